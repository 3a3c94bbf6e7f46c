/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_source.c — the names of stores (iopath/source.c): a path or an RBD
 * image, rbd:POOL/IMAGE and rbd:POOL/NAMESPACE/IMAGE split into their parts,
 * every malformed name refused with a reason, and the config a source
 * selects. The rbd backend's own behaviour needs a cluster: the
 * tests/integration/ceph_*.sh tests run one.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "iopath/iopath.h"

Test(source, paths_are_not_rbd)
{
	cr_assert(!cfs_source_is_rbd("/dev/vdb"));
	cr_assert(!cfs_source_is_rbd("store.img"));
	cr_assert(!cfs_source_is_rbd("./rbd:pool/image")); /* a file of that name */
	cr_assert(!cfs_source_is_rbd("RBD:pool/image"));
	cr_assert(!cfs_source_is_rbd(NULL));
	cr_assert(cfs_source_is_rbd("rbd:pool/image"));
}

Test(source, pool_and_image)
{
	struct cfs_rbd_name n;
	const char *why = NULL;

	cr_assert_eq(cfs_rbd_name_parse("rbd:chunks/informix01", &n, &why), 0);
	cr_assert_str_eq(n.pool, "chunks");
	cr_assert_str_eq(n.nspace, "");
	cr_assert_str_eq(n.image, "informix01");
}

Test(source, pool_namespace_and_image)
{
	struct cfs_rbd_name n;
	const char *why = NULL;

	cr_assert_eq(cfs_rbd_name_parse("rbd:chunks/prod/db.01-a_b", &n, &why), 0);
	cr_assert_str_eq(n.pool, "chunks");
	cr_assert_str_eq(n.nspace, "prod");
	cr_assert_str_eq(n.image, "db.01-a_b");
}

Test(source, longest_parts_fit)
{
	char src[3 * CFS_RBD_NAME_BYTES + 16], part[CFS_RBD_NAME_BYTES];
	struct cfs_rbd_name n;
	const char *why = NULL;

	memset(part, 'p', sizeof(part) - 1);
	part[sizeof(part) - 1] = '\0';
	snprintf(src, sizeof(src), "rbd:%s/%s/%s", part, part, part);
	cr_assert_eq(cfs_rbd_name_parse(src, &n, &why), 0, "%s", why);
	cr_assert_eq(strlen(n.image), CFS_RBD_NAME_BYTES - 1);
	/* one byte more in the image is too long */
	snprintf(src, sizeof(src), "rbd:pool/%sx", part);
	cr_assert_eq(cfs_rbd_name_parse(src, &n, &why), -EINVAL);
	cr_assert(strstr(why, "1 to 127 bytes"));
}

/* Each malformed name is refused, and the reason names the rule. */
Test(source, malformed_names_refused)
{
	static const struct {
		const char *source, *reason;
	} bad[] = {
		{"rbd:", "no pool"},
		{"rbd:image", "no pool"},
		{"rbd:/image", "1 to 127 bytes"},
		{"rbd:pool/", "1 to 127 bytes"},
		{"rbd:pool//image", "1 to 127 bytes"},
		{"rbd:a/b/c/d", "too many '/'"},
		{"rbd:pool/image@snap", "snapshots"},
		{"rbd:pool/image,/dev/vdb", "lists a pool's stores"},
		{"rbd:pool/my image", "spaces"},
		{"rbd:pool/im\tage", "spaces"},
		{"/dev/vdb", "rbd:POOL/IMAGE"},
	};
	struct cfs_rbd_name n;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		cr_assert_eq(cfs_rbd_name_parse(bad[i].source, &n, &why), -EINVAL, "%s accepted",
			     bad[i].source);
		cr_assert(why && strstr(why, bad[i].reason), "%s: '%s' does not say '%s'",
			  bad[i].source, why ? why : "(null)", bad[i].reason);
	}
}

Test(source, config_follows_the_source)
{
	struct cfs_io_config cfg = {.read_only = true, .exclusive = true};

	cfs_io_config_source(&cfg, "rbd:chunks/db1");
	cr_assert_str_eq(cfg.backend, "rbd");
	cr_assert_str_eq(cfg.path, "rbd:chunks/db1");
	cfs_io_config_source(&cfg, "/var/lib/store.img");
	cr_assert_str_eq(cfg.backend, "uring");
	cr_assert_str_eq(cfg.path, "/var/lib/store.img");
	cr_assert(cfg.read_only && cfg.exclusive, "other fields are left alone");
}

/* An rbd target whose name is malformed fails at open, before any cluster
 * is looked for (nothing to reach here). */
Test(source, rbd_open_refuses_a_malformed_name)
{
	struct cfs_io_config cfg = {0};
	struct cfs_io *io = NULL;

	cfs_io_config_source(&cfg, "rbd:nopool");
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL);
	cr_assert_null(io);
}
