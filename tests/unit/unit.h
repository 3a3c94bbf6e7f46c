/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unit.h — set-up the unit tests share: a backing target and a queue that
 * must open (else the test fails, naming the errno), and MIB.
 */
#ifndef CFS_TESTS_UNIT_H
#define CFS_TESTS_UNIT_H

#include <string.h>

#include <criterion/criterion.h>

#include "iopath/iopath.h"

#define MIB (1ull << 20)

/* cfs_io_open(cfg), or the test fails. */
static inline struct cfs_io *t_io_open(const struct cfs_io_config *cfg)
{
	struct cfs_io *io = NULL;
	int ret = cfs_io_open(cfg, &io);

	cr_assert_eq(ret, 0, "open %s %s: %s", cfg->backend, cfg->path ? cfg->path : "",
		     strerror(-ret));
	return io;
}

/* A queue of depth requests on io, or the test fails. */
static inline struct cfs_ioq *t_ioq_new(struct cfs_io *io, unsigned depth)
{
	struct cfs_ioq_config qc = {.depth = depth};
	struct cfs_ioq *q = NULL;
	int ret = cfs_ioq_create(io, &qc, &q);

	cr_assert_eq(ret, 0, "queue of depth %u: %s", depth, strerror(-ret));
	return q;
}

#endif /* CFS_TESTS_UNIT_H */
