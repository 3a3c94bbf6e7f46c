/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * epoch.h — epoch-based reclamation for structures read without locks
 * (the extent maps): when may memory that readers might still hold be freed?
 *
 * A reader brackets its lock-free reads with cfs_epoch_enter()/_exit() (a
 * thread-local slot publishes the global epoch it entered in; nesting is
 * allowed). A writer that unpublished an object tags it with
 * cfs_epoch_now() and frees it once cfs_epoch_safe(tag) is true: the global
 * epoch advances only when every thread inside a read section entered in the
 * current epoch, so two advances after the tag no reader can still hold it.
 * cfs_epoch_try_advance() never waits: a reader that stays inside a section
 * only delays frees, it never blocks a writer.
 *
 * Why not the inode's I/O reference (freed when in-flight I/O reaches 0): a
 * file kept busy at queue depth 32 never reaches 0, and memory retired by
 * its writes grew without bound. Read sections here last one map call.
 *
 * Cost per section: a thread-local load and two plain stores where the
 * kernel has membarrier(2) (the advancer then pays one membarrier() call per
 * advance, on the metadata side); else one sequentially consistent store
 * (xchg on x86, ~20 ns) and a release store. Threads register a slot on
 * first use (malloc, once per thread) and give it back at exit for reuse.
 *
 * What it does not do: keep lists of retired objects (each owner tags and
 * frees its own), or free anything itself.
 */
#ifndef CFS_EPOCH_H
#define CFS_EPOCH_H

#include <stdbool.h>
#include <stdint.h>

/* [any thread] Enter / leave a read section. enter() aborts the program if
 * the thread's first slot cannot be allocated (a few dozen bytes, once). */
void cfs_epoch_enter(void);
void cfs_epoch_exit(void);

/* [any thread] The current global epoch: the tag of an object unpublished
 * before this call. */
uint64_t cfs_epoch_now(void);

/* [any thread] Advance the global epoch if every thread inside a read
 * section entered in the current one. True if it advanced. */
bool cfs_epoch_try_advance(void);

/* [any thread] True when no reader can hold an object tagged with tag. */
bool cfs_epoch_safe(uint64_t tag);

#endif /* CFS_EPOCH_H */
