/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * opts.c — mkchunkfs option table and parser.
 *
 * One table describes every option: its letter, its long name, what kind of
 * value it takes and the range that value must fall in (xfs_mkfs keeps the
 * same facts in its struct opt_params). The parser walks argv once with
 * getopt_long, checks each value against its table entry and collects a
 * message for every problem instead of stopping at the first, so a user who
 * got three options wrong learns about all three in one run.
 *
 * Invariant: cfs_mkfs_opts_parse() never prints and never exits; main()
 * decides how to report. Range checks here are only those that make sense
 * without a target; the rest is cfs_sb_layout()'s job.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "iopath/iopath.h"
#include "mkchunkfs/opts.h"

const char cfs_mkfs_usage_line[] =
	"usage: mkchunkfs [-fnqKV] [-L label] [-U uuid] [-b block-size] [-a alloc-unit] "
	"[-m metadata-size] [-s size] [--sparse] [--join STORE0] [--no-written-runs] [--no-pieces] "
	"[--ceph-conf path] [--id user] [--cluster name] DEVICE-OR-IMAGE-OR-RBD";

enum opt_kind {
	OPT_FLAG, /* no value */
	OPT_SIZE, /* a size with optional K/M/G/T suffix */
	OPT_LABEL,
	OPT_UUID,
	OPT_PATH, /* a device or image path */
	OPT_TEXT, /* any non-empty string */
};

struct opt_desc {
	int key;	       /* the short letter (also getopt's return value) */
	const char *long_name; /* for --name; NULL if there is none */
	enum opt_kind kind;
	const char *what; /* noun used in messages: "block size" */
	uint64_t min;	  /* OPT_SIZE: inclusive range */
	uint64_t max;
	bool pow2;    /* OPT_SIZE: must be a power of two */
	bool formats; /* only meaningful when formatting (conflicts with -D) */
};

/* Long-only options get keys outside the char range. */
enum {
	KEY_SPARSE = 256,
	KEY_JOIN,
	KEY_NO_WRITTEN_RUNS,
	KEY_NO_PIECES,
	KEY_CEPH_CONF,
	KEY_CEPH_ID,
	KEY_CEPH_CLUSTER
};

static const struct opt_desc opt_table[] = {
	{'f', "force", OPT_FLAG, NULL, 0, 0, false, true},
	{'n', "dry-run", OPT_FLAG, NULL, 0, 0, false, true},
	{'q', "quiet", OPT_FLAG, NULL, 0, 0, false, false},
	{'K', "no-discard", OPT_FLAG, NULL, 0, 0, false, true},
	{'V', "version", OPT_FLAG, NULL, 0, 0, false, false},
	{'h', "help", OPT_FLAG, NULL, 0, 0, false, false},
	{'D', "print", OPT_FLAG, NULL, 0, 0, false, false},
	{KEY_SPARSE, "sparse", OPT_FLAG, NULL, 0, 0, false, true},
	{KEY_JOIN, "join", OPT_PATH, "store", 0, 0, false, true},
	{KEY_NO_WRITTEN_RUNS, "no-written-runs", OPT_FLAG, NULL, 0, 0, false, true},
	{KEY_NO_PIECES, "no-pieces", OPT_FLAG, NULL, 0, 0, false, true},
	{'L', "label", OPT_LABEL, "label", 0, CFS_LABEL_BYTES - 1, false, true},
	{'U', "uuid", OPT_UUID, "uuid", 0, 0, false, true},
	{'b', "block-size", OPT_SIZE, "block size", CFS_BLOCK_SIZE_MIN, CFS_BLOCK_SIZE_MAX, true,
	 true},
	/* -a and -m: range 0 = "ask cfs_sb_layout()" (see check_layout_opts). */
	{'a', "alloc-unit", OPT_SIZE, "allocation unit", 0, 0, false, true},
	{'m', "metadata-size", OPT_SIZE, "metadata size", 0, 0, false, true},
	{'s', "size", OPT_SIZE, "size", 0, 0, false, true},
	{KEY_CEPH_CONF, "ceph-conf", OPT_TEXT, "Ceph configuration", 0, 0, false, false},
	{KEY_CEPH_ID, "id", OPT_TEXT, "cephx user", 0, 0, false, false},
	{KEY_CEPH_CLUSTER, "cluster", OPT_TEXT, "Ceph cluster name", 0, 0, false, false},
};

#define OPT_COUNT (sizeof(opt_table) / sizeof(opt_table[0]))

/* Leading ':' makes getopt return ':' for a missing argument, so the two
 * mistakes get different messages; opterr = 0 silences getopt itself. */
static const char short_opts[] = ":fnqKVhDL:U:b:a:m:s:";

static const struct opt_desc *opt_find(int key)
{
	size_t i;

	for (i = 0; i < OPT_COUNT; i++)
		if (opt_table[i].key == key)
			return &opt_table[i];
	return NULL;
}

/* How messages name an option: "-b", or "--sparse" for long-only ones. */
static void opt_name(const struct opt_desc *d, char *buf, size_t size)
{
	if (d->key < 256)
		snprintf(buf, size, "-%c", d->key);
	else
		snprintf(buf, size, "--%s", d->long_name);
}

void cfs_mkfs_err_add(struct cfs_mkfs_errs *errs, const char *fmt, ...)
{
	va_list ap;

	if (errs->count < CFS_MKFS_ERRS_MAX) {
		va_start(ap, fmt);
		vsnprintf(errs->msg[errs->count], CFS_MKFS_ERR_BYTES, fmt, ap);
		va_end(ap);
	}
	errs->count++;
}

static bool is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* Check a size value against its table entry; returns true if usable. */
static bool parse_size_opt(const struct opt_desc *d, const char *arg, uint64_t *out,
			   struct cfs_mkfs_errs *errs)
{
	char name[32], lo[CFS_SIZE_STR_BYTES], hi[CFS_SIZE_STR_BYTES];
	int ret;

	opt_name(d, name, sizeof(name));
	ret = cfs_parse_size(arg, out);
	if (ret == -ERANGE) {
		cfs_mkfs_err_add(errs, "%s %s: %s is too large", name, arg, d->what);
		return false;
	}
	if (ret < 0) {
		cfs_mkfs_err_add(errs,
				 "%s %s: not a size (digits with an optional K, M, G or T suffix)",
				 name, arg);
		return false;
	}
	if (d->max == 0 || (*out >= d->min && *out <= d->max && (!d->pow2 || is_pow2(*out))))
		return true;

	/* Byte counts for the block size (users think of it in bytes, and the
	 * documented message says "between 512 and 65536"), units above it. */
	if (d->key == 'b') {
		snprintf(lo, sizeof(lo), "%llu", (unsigned long long)d->min);
		snprintf(hi, sizeof(hi), "%llu", (unsigned long long)d->max);
	} else {
		cfs_size_format(d->min, lo);
		cfs_size_format(d->max, hi);
	}
	cfs_mkfs_err_add(errs, "%s %s: %s must be %sbetween %s and %s", name, arg, d->what,
			 d->pow2 ? "a power of two " : "", lo, hi);
	return false;
}

static void apply_value(const struct opt_desc *d, const char *arg, struct cfs_mkfs_opts *opts,
			struct cfs_mkfs_errs *errs)
{
	uint64_t v;

	switch (d->kind) {
	case OPT_FLAG:
		break;
	case OPT_PATH:
		if (!*arg) {
			cfs_mkfs_err_add(errs, "--join: an empty path");
			return;
		}
		opts->join = arg;
		return;
	case OPT_TEXT: {
		char name[32];

		opt_name(d, name, sizeof(name));
		if (!*arg) {
			cfs_mkfs_err_add(errs, "%s: the %s is empty", name, d->what);
			return;
		}
		if (d->key == KEY_CEPH_CONF)
			opts->ceph_conf = arg;
		else if (d->key == KEY_CEPH_ID)
			opts->ceph_id = arg;
		else
			opts->ceph_cluster = arg;
		return;
	}
	case OPT_LABEL:
		if (strlen(arg) > d->max) {
			cfs_mkfs_err_add(errs, "-L %s: label is longer than %llu bytes", arg,
					 (unsigned long long)d->max);
			return;
		}
		opts->label = arg;
		return;
	case OPT_UUID:
		if (cfs_uuid_parse(arg, opts->uuid) < 0) {
			cfs_mkfs_err_add(errs,
					 "-U %s: not a UUID (expected the form "
					 "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
					 arg);
			return;
		}
		/* The nil uuid reads as "no uuid" to tools like blkid. */
		if (cfs_uuid_is_null(opts->uuid)) {
			cfs_mkfs_err_add(errs, "-U %s: the nil UUID cannot name a store", arg);
			return;
		}
		opts->uuid_given = true;
		return;
	case OPT_SIZE:
		if (!parse_size_opt(d, arg, &v, errs))
			return;
		switch (d->key) {
		case 'b':
			opts->block_size_bytes = (uint32_t)v;
			break;
		case 'a':
			/* The field is 32 bits; anything above the maximum gets
			 * the layout's own wording rather than a wrapped value. */
			if (v > CFS_ALLOC_UNIT_MAX) {
				cfs_mkfs_err_add(
					errs, "-a %s: allocation unit must be at most 1 GiB", arg);
				return;
			}
			opts->alloc_unit_bytes = (uint32_t)v;
			opts->alloc_unit_arg = arg;
			break;
		case 'm':
			opts->meta_size_bytes = v;
			opts->meta_size_arg = arg;
			break;
		case 's':
			opts->size_bytes = v;
			opts->size_given = true;
			break;
		}
		return;
	}
}

static void apply_flag(int key, struct cfs_mkfs_opts *opts)
{
	switch (key) {
	case 'f':
		opts->force = true;
		break;
	case 'n':
		opts->dry_run = true;
		break;
	case 'q':
		opts->quiet = true;
		break;
	case 'K':
		opts->no_discard = true;
		break;
	case 'V':
		opts->version = true;
		break;
	case 'h':
		opts->help = true;
		break;
	case 'D':
		opts->print_only = true;
		break;
	case KEY_SPARSE:
		opts->sparse = true;
		break;
	case KEY_NO_WRITTEN_RUNS:
		opts->no_written_runs = true;
		break;
	case KEY_NO_PIECES:
		opts->no_pieces = true;
		break;
	}
}

/*
 * -a and -m are checked by the layout code itself, on a store large enough
 * that only the options can be wrong, so the reasons are word for word the
 * ones cfs_sb_layout() gives later (and the daemon and fsck give too). The
 * block size passed along is the one the user chose, so "-b 64K -a 4K" is
 * reported here, with the other option errors, not after probing the target.
 */
static void check_layout_opts(const struct cfs_mkfs_opts *opts, struct cfs_mkfs_errs *errs)
{
	const uint64_t store_bytes = 1ull << 50; /* 1 PiB: never "too small" */
	struct cfs_sb sb;
	const char *why;

	if (opts->alloc_unit_bytes) {
		cfs_sb_init_defaults(&sb);
		if (cfs_sb_layout(&sb, store_bytes, opts->block_size_bytes, opts->alloc_unit_bytes,
				  0, &why) < 0)
			cfs_mkfs_err_add(errs, "-a %s: %s", opts->alloc_unit_arg, why);
	}
	if (opts->meta_size_bytes) {
		cfs_sb_init_defaults(&sb);
		if (cfs_sb_layout(&sb, store_bytes, 0, 0, opts->meta_size_bytes, &why) < 0)
			cfs_mkfs_err_add(errs, "-m %s: %s", opts->meta_size_arg, why);
	}
}

int cfs_mkfs_opts_parse(int argc, char *argv[], struct cfs_mkfs_opts *opts,
			struct cfs_mkfs_errs *errs)
{
	struct option long_opts[OPT_COUNT + 1];
	/* Formatting options seen, in order, for the -D conflict messages. */
	const struct opt_desc *seen[OPT_COUNT];
	size_t seen_count = 0;
	const struct opt_desc *d;
	char name[32];
	size_t i;
	int c;

	memset(opts, 0, sizeof(*opts));
	memset(errs, 0, sizeof(*errs));

	for (i = 0; i < OPT_COUNT; i++) {
		long_opts[i] = (struct option){
			.name = opt_table[i].long_name,
			.has_arg = opt_table[i].kind == OPT_FLAG ? no_argument : required_argument,
			.flag = NULL,
			.val = opt_table[i].key,
		};
	}
	long_opts[OPT_COUNT] = (struct option){0};

	opterr = 0;
	optind = 0; /* glibc: 0 forces a full re-initialisation */
	while ((c = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
		if (c == '?') {
			if (optopt != 0 && optopt < 256)
				cfs_mkfs_err_add(errs, "-%c: unknown option", optopt);
			else
				cfs_mkfs_err_add(errs, "%s: unknown option", argv[optind - 1]);
			continue;
		}
		if (c == ':') {
			if (strncmp(argv[optind - 1], "--", 2) == 0)
				cfs_mkfs_err_add(errs, "%s: missing argument", argv[optind - 1]);
			else
				cfs_mkfs_err_add(errs, "-%c: missing argument", optopt);
			continue;
		}
		d = opt_find(c);
		if (!d) /* cannot happen: every key comes from the table */
			continue;
		if (d->kind == OPT_FLAG)
			apply_flag(c, opts);
		else
			apply_value(d, optarg, opts, errs);
		if (d->formats) {
			for (i = 0; i < seen_count && seen[i] != d; i++)
				;
			if (i == seen_count)
				seen[seen_count++] = d;
		}
	}

	check_layout_opts(opts, errs);
	/* A data store's geometry is its pool's; it has no metadata region. */
	if (opts->join && opts->meta_size_bytes)
		cfs_mkfs_err_add(errs,
				 "-m %s: a store joining a pool (--join) has no metadata "
				 "region",
				 opts->meta_size_arg);

	if (opts->print_only) {
		for (i = 0; i < seen_count; i++) {
			opt_name(seen[i], name, sizeof(name));
			cfs_mkfs_err_add(
				errs, "-D prints an existing store; it cannot be combined with %s",
				name);
		}
	}

	if (optind < argc)
		opts->target = argv[optind++];
	for (; optind < argc; optind++)
		cfs_mkfs_err_add(errs, "%s: unexpected argument (one device or image at a time)",
				 argv[optind]);
	if (!opts->target && !opts->help && !opts->version)
		cfs_mkfs_err_add(errs, "no device or image file given");
	if (opts->target && !cfs_source_is_rbd(opts->target) &&
	    (opts->ceph_conf || opts->ceph_id || opts->ceph_cluster))
		cfs_mkfs_err_add(errs, "--ceph-conf, --id and --cluster are for RBD images "
				       "(rbd:POOL/IMAGE)");
	if (opts->target && cfs_source_is_rbd(opts->target)) {
		struct cfs_rbd_name rbd;
		const char *why;

		if (cfs_rbd_name_parse(opts->target, &rbd, &why) < 0)
			cfs_mkfs_err_add(errs, "%s: %s", opts->target, why);
		if (opts->sparse)
			cfs_mkfs_err_add(errs, "--sparse is for image files (an RBD image is "
					       "always thin)");
	}
	if (opts->join && cfs_source_is_rbd(opts->join))
		cfs_mkfs_err_add(errs,
				 "--join %s: a pool's first store holds its metadata and must be a "
				 "local device or image file (an RBD image can join it)",
				 opts->join);

	return errs->count ? -EINVAL : 0;
}
