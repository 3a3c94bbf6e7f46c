/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mkchunkfs.c — main(): format a block device or image file as a chunkfs
 * store, or (-D) print the store it already holds.
 *
 * The sequence follows xfs_mkfs's main(): parse every option (reporting all
 * errors at once) -> open and measure the target -> compute and validate the
 * layout -> dry run: print it and stop -> refuse, or with -f erase, what the
 * target already holds -> create/extend the image -> write (write.c) ->
 * print the summary. Nothing is written before the last check passed, so
 * exit status 1 always means "the target is as it was".
 *
 * What this file does not do: the on-disk encoding (fs/format/format.c, shared with
 * the daemon and fsck) or alignment discovery (iopath/align.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mkchunkfs/mkchunkfs.h"

#define SUMMARY_KEY_FMT "%-17s" /* the width cfs_sb_print() uses */

void cfs_mkfs_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(CFS_MKFS_PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void print_help(void)
{
	printf("%s\n\n", cfs_mkfs_usage_line);
	puts("Format a block device, an image file or a Ceph RBD image (rbd:POOL/IMAGE,\n"
	     "rbd:POOL/NAMESPACE/IMAGE) as a chunkfs store.\n"
	     "\n"
	     "  -f               overwrite an existing filesystem, partition table or store\n"
	     "  -n               dry run: print the layout, write nothing\n"
	     "  -L label         store label (at most 63 bytes)\n"
	     "  -U uuid          store uuid (default: random)\n"
	     "  -b block-size    block size, a power of two from 512 to 65536 (default 4096)\n"
	     "  -a alloc-unit    allocation unit, a power of two multiple of the block size\n"
	     "                   up to 1G (default 1M)\n"
	     "  -m metadata-size metadata region (default 1% of the store, 4M to 1G)\n"
	     "  -s size          store size; creates or extends an image file\n"
	     "  --sparse         do not write a new or extended image file fully\n"
	     "  --join STORE0    format as a data store of STORE0's pool (fs/POOLS.md); the\n"
	     "                   pool is then mounted as chunkfs STORE0,THIS,... DIR\n"
	     "  --no-written-runs  without the written_runs feature: mountable by chunkfs\n"
	     "                   before it, snapshots one record per written unit\n"
	     "  --no-pieces      without the pieces feature: every file with data takes\n"
	     "                   whole allocation units (mountable by chunkfs before it)\n"
	     "  -K               do not discard a block device's or RBD image's data region\n"
	     "  -q               quiet: no summary, no progress\n"
	     "  -D               print the store the target holds (read-only) and exit\n"
	     "  --ceph-conf path an RBD image's cluster configuration (default: Ceph's search)\n"
	     "  --id user        the cephx user, without client. (default admin)\n"
	     "  --cluster name   the Ceph cluster name (default ceph)\n"
	     "  -V               print the version and exit\n"
	     "  -h               print this help and exit\n"
	     "\n"
	     "Sizes take a K, M, G or T suffix (powers of 1024). See mkchunkfs(8).");
}

static const char *target_kind(const struct cfs_mkfs_target *t)
{
	return t->is_rbd ? "RBD image" : t->is_block_device ? "block device" : "image file";
}

/* The lines above the superblock summary: what is being formatted and how.
 * The superblock part comes from cfs_sb_print(), the same words the daemon
 * and fsck use. */
static void print_target(const struct cfs_mkfs_target *t, const struct cfs_mkfs_opts *opts,
			 bool formatting)
{
	printf(SUMMARY_KEY_FMT, "target:");
	if (!t->exists)
		printf("%s (new image file)\n", t->path);
	else if (!t->is_block_device && formatting && t->target_size_bytes < t->store_size_bytes)
		printf("%s (image file, %llu bytes, to be extended)\n", t->path,
		       (unsigned long long)t->target_size_bytes);
	else
		printf("%s (%s, %llu bytes)\n", t->path, target_kind(t),
		       (unsigned long long)t->target_size_bytes);
	printf(SUMMARY_KEY_FMT "memory alignment %u bytes\n",
	       "direct I/O:", t->geo.mem_align_bytes);
	if (!formatting)
		return;
	printf(SUMMARY_KEY_FMT, "preparation:");
	if (t->is_block_device || t->is_rbd)
		puts(opts->no_discard ? "none (-K: data region not discarded)"
				      : "discard the data region");
	else if (opts->sparse)
		puts("none (--sparse: holes in the image stay holes)");
	else
		puts("write zeros into every hole of the image");
}

static int report_opt_errors(const struct cfs_mkfs_errs *errs)
{
	unsigned i, kept = errs->count < CFS_MKFS_ERRS_MAX ? errs->count : CFS_MKFS_ERRS_MAX;

	for (i = 0; i < kept; i++)
		cfs_mkfs_error("%s", errs->msg[i]);
	if (errs->count > kept)
		cfs_mkfs_error("... and %u more errors", errs->count - kept);
	fprintf(stderr, "%s\n", cfs_mkfs_usage_line);
	return CFS_MKFS_EXIT_USAGE;
}

/* -D reads a snapshot up to this size to verify it; fsck checks larger ones. */
#define SNAPSHOT_CHECK_MAX_BYTES (64ull << 20)

/*
 * Read and verify the active half's snapshot, the other thing a mount
 * needs besides the superblock. Returns 0 (snap filled), 1 when it is too
 * large to check here, or -errno with *why.
 */
static int read_snapshot(const struct cfs_mkfs_target *t, const struct cfs_sb *sb,
			 struct cfs_snap *snap, const char **why)
{
	uint64_t offset = cfs_sb_half_offset_bytes(sb, sb->meta_active_half);
	size_t length = (size_t)sb->meta_snap_length_bytes;
	size_t done = 0;
	uint8_t *buf;
	ssize_t n;
	int ret;

	if (sb->meta_snap_length_bytes > SNAPSHOT_CHECK_MAX_BYTES)
		return 1;
	/* Whole sectors from an aligned buffer: an RBD image is read
	 * through iopath, which checks both. */
	buf = aligned_alloc(4096, (length + 4095) / 4096 * 4096);
	if (!buf) {
		*why = "out of memory";
		return -ENOMEM;
	}
	if (t->is_rbd) {
		ret = cfs_mkfs_rbd_read(t, buf, (length + 511) / 512 * 512, offset);
		if (ret < 0) {
			*why = strerror(-ret);
			goto out_free;
		}
		done = length;
	}
	while (done < length) {
		n = pread(t->fd, buf + done, length - done, (off_t)(offset + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*why = n < 0 ? strerror(errno) : "the store ends inside the snapshot";
			ret = n < 0 ? -errno : -EIO;
			goto out_free;
		}
		done += (size_t)n;
	}
	ret = cfs_snap_decode(buf, length, cfs_log_seed(sb->uuid), snap, why);
	snap->body = NULL; /* points into buf, which goes now */
out_free:
	free(buf);
	return ret;
}

/* -D: decode both slots read-only and print what every reader would see. */
static int print_store(const struct cfs_mkfs_opts *opts)
{
	uint8_t slots[CFS_MKFS_SB_PAIR_BYTES];
	struct cfs_mkfs_target t;
	const char *why = NULL, *mount_why = NULL, *slot_why, *snap_why = NULL;
	int ret, mountable, snap_ret, status = CFS_MKFS_EXIT_NOSTORE;
	struct cfs_snap snap;
	struct cfs_sb sb, one;
	unsigned s;
	int slot;

	cfs_mkfs_target_init(&t);
	if (cfs_mkfs_target_open(&t, opts) < 0) {
		status = CFS_MKFS_EXIT_USAGE;
		goto out_close;
	}
	if (cfs_mkfs_read_slots(&t, slots) < 0)
		goto out_close;
	ret = cfs_sb_pick(slots, slots + CFS_SB_BLOCK_BYTES, &sb, &slot, &why);
	if (ret == -EINVAL) {
		cfs_mkfs_error("%s: not a chunkfs store: %s", t.path, why);
		goto out_close;
	}
	if (ret < 0) {
		cfs_mkfs_error("%s: %s", t.path, why);
		goto out_close;
	}
	mountable = cfs_sb_check_mountable(&sb, &mount_why);
	if (mountable < 0) {
		cfs_mkfs_error("%s: %s", t.path, mount_why);
		goto out_close;
	}
	snap_ret = cfs_sb_is_data_store(&sb) ? 2 : read_snapshot(&t, &sb, &snap, &snap_why);
	if (snap_ret < 0) {
		cfs_mkfs_error("%s: the metadata snapshot is unusable: %s", t.path, snap_why);
		goto out_close;
	}
	status = CFS_MKFS_EXIT_OK;
	if (opts->quiet)
		goto out_close;

	print_target(&t, opts, false);
	cfs_sb_print(stdout, &sb);
	printf(SUMMARY_KEY_FMT "slot %d\n", "newest copy:", slot);
	for (s = 0; s < CFS_SB_SLOTS; s++) {
		printf("slot %u:%10s", s, "");
		ret = cfs_sb_decode(slots + CFS_SB_SLOT_OFFSET_BYTES(s), &one, &slot_why);
		if (ret < 0)
			printf("unusable (%s)\n", slot_why);
		else
			printf("generation %llu%s\n", (unsigned long long)one.generation,
			       one.flags & CFS_SB_INPROGRESS ? ", in progress" : "");
	}
	printf(SUMMARY_KEY_FMT, "snapshot:");
	if (snap_ret == 2)
		printf("none (a data store of a pool)\n");
	else if (snap_ret == 0)
		printf("%llu records, seq %llu, %llu bytes, checksum ok\n",
		       (unsigned long long)snap.record_count, (unsigned long long)snap.seq,
		       (unsigned long long)snap.length_bytes);
	else
		printf("%llu bytes, not verified here (larger than %llu MiB: use fsck)\n",
		       (unsigned long long)sb.meta_snap_length_bytes,
		       SNAPSHOT_CHECK_MAX_BYTES >> 20);
	if (why)
		cfs_mkfs_error("warning: %s: one superblock copy is unusable (%s)", t.path, why);
	if (mountable == CFS_SB_RO_REQUIRED)
		cfs_mkfs_error("warning: %s: %s", t.path, mount_why);

out_close:
	cfs_mkfs_target_close(&t, false);
	return status;
}

static int format_store(const struct cfs_mkfs_opts *opts)
{
	struct cfs_mkfs_write_cfg wcfg = {0};
	struct cfs_mkfs_target t;
	struct cfs_mkfs_found found;
	uint32_t block_size_bytes;
	int status = CFS_MKFS_EXIT_USAGE;
	const char *why;
	struct cfs_sb sb;
	int ret;

	cfs_mkfs_target_init(&t);
	if (cfs_mkfs_target_open(&t, opts) < 0)
		goto out_close;

	/* Geometry: the target's sectors bound the block size from below, so
	 * the default follows a 64 KiB-sector device up rather than failing. */
	cfs_sb_init_defaults(&sb);
	sb.logical_sector_bytes = t.geo.logical_sector_bytes;
	sb.physical_sector_bytes = t.geo.physical_sector_bytes;
	block_size_bytes = opts->block_size_bytes;
	if (!block_size_bytes)
		block_size_bytes = t.geo.logical_sector_bytes > CFS_BLOCK_SIZE_DEFAULT
					   ? t.geo.logical_sector_bytes
					   : CFS_BLOCK_SIZE_DEFAULT;
	ret = cfs_sb_layout(&sb, t.store_size_bytes, block_size_bytes, opts->alloc_unit_bytes,
			    opts->meta_size_bytes, &why);
	if (ret < 0) {
		cfs_mkfs_error("%s: %s", t.path, why);
		goto out_close;
	}
	if (opts->uuid_given) {
		memcpy(sb.uuid, opts->uuid, CFS_UUID_BYTES);
	} else {
		ret = cfs_uuid_generate(sb.uuid);
		if (ret < 0) {
			cfs_mkfs_error("cannot generate a uuid: %s", strerror(-ret));
			goto out_close;
		}
	}
	if (opts->label)
		cfs_sb_set_label(&sb, opts->label); /* length checked by opts.c */
	if (!opts->no_written_runs)
		sb.incompat |= CFS_FEAT_INCOMPAT_WRITTEN_RUNS;
	if (!opts->no_pieces)
		sb.incompat |= CFS_FEAT_INCOMPAT_PIECES;

	if (cfs_mkfs_signatures_find(&t, &found) < 0)
		goto out_close;
	/* Before anything is written: zeros into a filesystem too small for
	 * them would fill it for everyone and then fail anyway. */
	if (!t.is_block_device && !t.is_rbd && !opts->sparse && !opts->dry_run) {
		char space[160];

		ret = cfs_mkfs_target_check_space(&t, space, sizeof(space));
		if (ret == -ENOSPC) {
			cfs_mkfs_error("%s: %s; use --sparse (holes stay holes, the space is "
				       "taken as chunkfs writes) or a smaller -s",
				       t.path, space);
			goto out_close;
		}
		if (ret < 0) {
			cfs_mkfs_error("%s: cannot tell the free space of its filesystem: %s",
				       t.path, strerror(-ret));
			goto out_close;
		}
	}

	if (opts->dry_run) {
		/* Show the superblock as it will be once written. */
		sb.generation = 2;
		sb.flags = 0;
		if (!opts->quiet) {
			print_target(&t, opts, true);
			cfs_sb_print(stdout, &sb);
		}
		if (t.note[0])
			cfs_mkfs_error("note: %s: a real run would be refused", t.note);
		if (found.count)
			cfs_mkfs_error("note: %s contains %s; %s", t.path, found.what,
				       opts->force ? "a real run will erase it (-f)"
						   : "a real run needs -f");
		if (!opts->quiet)
			puts("dry run (-n): nothing was written");
		status = CFS_MKFS_EXIT_OK;
		goto out_close;
	}

	if (found.count && !opts->force) {
		cfs_mkfs_error("%s contains %s; use -f to overwrite", t.path, found.what);
		goto out_close;
	}

	/* From here on the target changes: failures are exit 2. */
	status = CFS_MKFS_EXIT_WRITE;
	if (found.count && cfs_mkfs_signatures_wipe(&t) < 0)
		goto out_close;
	if (cfs_mkfs_target_prepare(&t) < 0)
		goto out_close;

	wcfg.discard = (t.is_block_device || t.is_rbd) && !opts->no_discard;
	wcfg.fill = !t.is_block_device && !t.is_rbd && !opts->sparse;
	wcfg.progress = !opts->quiet && isatty(STDOUT_FILENO);
	/* A uuid chosen by the user may be the one an earlier format of this
	 * target had: its log records would verify with the same seed, so
	 * none may survive (fs/format/FORMAT.md, writer rule 5). A random uuid never
	 * matches, and the headers are enough. */
	wcfg.zero_meta = opts->uuid_given;
	if (cfs_mkfs_write(&t, &sb, &wcfg) < 0)
		goto out_close;

	status = CFS_MKFS_EXIT_OK;
	if (!opts->quiet) {
		print_target(&t, opts, true);
		cfs_sb_print(stdout, &sb);
	}

out_close:
	cfs_mkfs_target_close(&t, status == CFS_MKFS_EXIT_WRITE);
	return status;
}

int main(int argc, char *argv[])
{
	struct cfs_mkfs_opts opts;
	struct cfs_mkfs_errs errs;

	if (cfs_mkfs_opts_parse(argc, argv, &opts, &errs) < 0)
		return report_opt_errors(&errs);
	if (opts.help) {
		print_help();
		return CFS_MKFS_EXIT_OK;
	}
	if (opts.version) {
		printf("mkchunkfs %s (chunkfs on-disk format version %u)\n", CFS_MKFS_VERSION,
		       CFS_FORMAT_VERSION);
		return CFS_MKFS_EXIT_OK;
	}
	if (opts.print_only)
		return print_store(&opts);
	if (opts.join)
		return cfs_mkfs_join(&opts);
	return format_store(&opts);
}
