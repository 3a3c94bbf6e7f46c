/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_mkchunkfs_opts.c — unit tests of mkchunkfs's option parser
 * (mkchunkfs/opts.c): values and suffixes, every flag, long options, the
 * collect-then-report contract (all errors, in order, bounded), -D
 * conflicts, and that the parser can run twice in one process.
 *
 * Unit test binaries link the layers' libraries (libcfs_*.a) but no
 * mkchunkfs objects, so the parser is compiled into this test directly.
 * If the Makefile ever links mkchunkfs/opts.o into unit tests, drop the
 * #include of opts.c below.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "mkchunkfs/opts.c"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ARGS_MAX 12

/* Parse a NULL-terminated list of arguments (program name added). getopt
 * permutes the pointer array, never the strings, so literals are fine. */
static int parse(struct cfs_mkfs_opts *o, struct cfs_mkfs_errs *e, const char *const *args)
{
	char *argv[ARGS_MAX + 2];
	int argc = 0;

	argv[argc++] = (char *)"mkchunkfs";
	while (*args) {
		cr_assert_lt(argc, ARGS_MAX + 1, "too many test arguments");
		argv[argc++] = (char *)*args++;
	}
	argv[argc] = NULL;
	return cfs_mkfs_opts_parse(argc, argv, o, e);
}

#define PARSE(o, e, ...) parse((o), (e), (const char *const[]){__VA_ARGS__, NULL})

static void assert_ok(int ret, const struct cfs_mkfs_errs *e)
{
	cr_assert_eq(ret, 0, "unexpected error %u: %s", e->count, e->count ? e->msg[0] : "");
	cr_assert_eq(e->count, 0);
}

/* ---- values ------------------------------------------------------------- */

Test(opts, target_only_gives_defaults)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "store.img"), &e);
	cr_assert_str_eq(o.target, "store.img");
	cr_assert_null(o.label);
	cr_assert_not(o.uuid_given);
	cr_assert_not(o.size_given);
	cr_assert_eq(o.block_size_bytes, 0);
	cr_assert_eq(o.alloc_unit_bytes, 0);
	cr_assert_eq(o.meta_size_bytes, 0);
	cr_assert_not(o.force || o.dry_run || o.quiet || o.no_discard || o.sparse || o.print_only ||
		      o.version || o.help);
}

Test(opts, every_flag)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "-fnqK", "--sparse", "/dev/loop3"), &e);
	cr_assert(o.force);
	cr_assert(o.dry_run);
	cr_assert(o.quiet);
	cr_assert(o.no_discard);
	cr_assert(o.sparse);
	cr_assert_str_eq(o.target, "/dev/loop3");
}

Test(opts, sizes_with_suffixes)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "-b", "8K", "-a", "2MiB", "-m", "64m", "-s", "16G", "img"), &e);
	cr_assert_eq(o.block_size_bytes, 8192);
	cr_assert_eq(o.alloc_unit_bytes, 2u << 20);
	cr_assert_eq(o.meta_size_bytes, 64ull << 20);
	cr_assert(o.size_given);
	cr_assert_eq(o.size_bytes, 16ull << 30);
}

Test(opts, size_zero_is_left_to_the_layout)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	/* "-s 0" parses; cfs_sb_layout() says the store is too small. */
	assert_ok(PARSE(&o, &e, "-s", "0", "img"), &e);
	cr_assert(o.size_given);
	cr_assert_eq(o.size_bytes, 0);
}

Test(opts, label_and_uuid)
{
	static const uint8_t want[CFS_UUID_BYTES] = {0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a,
						     0x49, 0x78, 0x86, 0x95, 0xa4, 0xb3,
						     0xc2, 0xd1, 0xe0, 0xf0};
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "-L", "rootdbs chunks", "-U",
			"0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F0", "img"),
		  &e);
	cr_assert_str_eq(o.label, "rootdbs chunks");
	cr_assert(o.uuid_given);
	cr_assert_arr_eq(o.uuid, want, CFS_UUID_BYTES);
}

Test(opts, label_of_63_bytes_fits_64_does_not)
{
	char l63[64], l64[65];
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	memset(l63, 'x', 63);
	l63[63] = '\0';
	memset(l64, 'y', 64);
	l64[64] = '\0';
	assert_ok(PARSE(&o, &e, "-L", l63, "img"), &e);
	cr_assert_eq(strlen(o.label), 63);
	cr_assert_eq(PARSE(&o, &e, "-L", l64, "img"), -EINVAL);
	cr_assert_eq(e.count, 1);
	cr_assert(strstr(e.msg[0], "label is longer than 63 bytes"));
}

Test(opts, long_options)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "--force", "--dry-run", "--label=db", "--block-size", "16K",
			"--alloc-unit=4M", "--metadata-size=8M", "--size=1G", "--no-discard",
			"--quiet", "img"),
		  &e);
	cr_assert(o.force && o.dry_run && o.no_discard && o.quiet);
	cr_assert_str_eq(o.label, "db");
	cr_assert_eq(o.block_size_bytes, 16384);
	cr_assert_eq(o.alloc_unit_bytes, 4u << 20);
	cr_assert_eq(o.meta_size_bytes, 8ull << 20);
	cr_assert_eq(o.size_bytes, 1ull << 30);
}

Test(opts, options_after_the_target)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "img", "-n", "-L", "late"), &e);
	cr_assert_str_eq(o.target, "img");
	cr_assert(o.dry_run);
	cr_assert_str_eq(o.label, "late");
}

Test(opts, help_and_version_need_no_target)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "-h"), &e);
	cr_assert(o.help);
	assert_ok(PARSE(&o, &e, "-V"), &e);
	cr_assert(o.version);
	cr_assert_not(o.help, "state leaked from the previous parse");
}

Test(opts, print_alone_and_with_quiet)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	assert_ok(PARSE(&o, &e, "-D", "-q", "/dev/sdb"), &e);
	cr_assert(o.print_only);
	cr_assert(o.quiet);
	assert_ok(PARSE(&o, &e, "--print", "/dev/sdb"), &e);
	cr_assert(o.print_only);
}

/* ---- one bad option: exactly one message -------------------------------- */

/* Arrays, not pointers: Criterion runs each case in a fresh process of
 * this (position-independent) binary, where pointers taken in the parent
 * would not be valid. An empty string ends args. */
struct bad_case {
	char args[6][48];
	char msg[CFS_MKFS_ERR_BYTES]; /* the whole message, without "mkchunkfs: " */
};

ParameterizedTestParameters(opts, one_bad_option)
{
	static struct bad_case cases[] = {
		{{"-b", "3000", "img"},
		 "-b 3000: block size must be a power of two between 512 and 65536"},
		{{"-b", "256", "img"},
		 "-b 256: block size must be a power of two between 512 and 65536"},
		{{"-b", "128K", "img"},
		 "-b 128K: block size must be a power of two between 512 and 65536"},
		{{"-b", "4096x", "img"},
		 "-b 4096x: not a size (digits with an optional K, M, G or T suffix)"},
		{{"-a", "3M", "img"}, "-a 3M: allocation unit must be a power of two"},
		{{"-a", "2G", "img"}, "-a 2G: allocation unit must be at most 1 GiB"},
		{{"-a", "8G", "img"}, "-a 8G: allocation unit must be at most 1 GiB"},
		{{"-b", "64K", "-a", "32K", "img"},
		 "-a 32K: allocation unit must be a multiple of the block size"},
		{{"-m", "1M", "img"}, "-m 1M: metadata size below the 4 MiB minimum"},
		{{"-m", "65G", "img"}, "-m 65G: metadata size above the 64 GiB maximum"},
		{{"-s", "-1", "img"},
		 "-s -1: not a size (digits with an optional K, M, G or T suffix)"},
		{{"-s", "99999999999999999999", "img"},
		 "-s 99999999999999999999: size is too large"},
		{{"-U", "not-a-uuid", "img"},
		 "-U not-a-uuid: not a UUID (expected the form "
		 "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"},
		{{"-U", "00000000-0000-0000-0000-000000000000", "img"},
		 "-U 00000000-0000-0000-0000-000000000000: the nil UUID cannot name a store"},
		{{"-x", "img"}, "-x: unknown option"},
		{{"--frobnicate", "img"}, "--frobnicate: unknown option"},
		{{"img", "-b"}, "-b: missing argument"},
		{{"img", "--label"}, "--label: missing argument"},
		{{"a.img", "b.img"}, "b.img: unexpected argument (one device or image at a time)"},
		{{"-n"}, "no device or image file given"},
		{{"-D", "-n", "img"}, "-D prints an existing store; it cannot be combined with -n"},
		{{"-D", "--sparse", "img"},
		 "-D prints an existing store; it cannot be combined with --sparse"},
	};

	return cr_make_param_array(struct bad_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct bad_case *c, opts, one_bad_option)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;
	const char *args[ARRAY_SIZE(c->args) + 1];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(c->args) && c->args[i][0]; i++)
		args[i] = c->args[i];
	args[i] = NULL;
	cr_assert_eq(parse(&o, &e, args), -EINVAL);
	cr_assert_eq(e.count, 1, "expected one error, got %u (first: %s)", e.count, e.msg[0]);
	cr_assert_str_eq(e.msg[0], c->msg);
}

/* ---- collect, then report ------------------------------------------------ */

Test(opts, all_errors_are_collected_in_order)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	cr_assert_eq(PARSE(&o, &e, "-b", "3000", "-x", "-U", "bad", "-L",
			   "0123456789012345678901234567890123456789012345678901234567890123",
			   "img", "extra"),
		     -EINVAL);
	cr_assert_eq(e.count, 5);
	cr_assert(strstr(e.msg[0], "-b 3000:"));
	cr_assert_str_eq(e.msg[1], "-x: unknown option");
	cr_assert(strstr(e.msg[2], "-U bad:"));
	cr_assert(strstr(e.msg[3], "label is longer"));
	cr_assert(strstr(e.msg[4], "extra: unexpected argument"));
	/* The target is still taken, so main() could name it. */
	cr_assert_str_eq(o.target, "img");
}

Test(opts, each_conflict_with_print_is_reported)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	cr_assert_eq(PARSE(&o, &e, "-D", "-f", "-s", "1G", "-f", "-L", "x", "img"), -EINVAL);
	/* -f twice is reported once. */
	cr_assert_eq(e.count, 3);
	cr_assert(strstr(e.msg[0], "with -f"));
	cr_assert(strstr(e.msg[1], "with -s"));
	cr_assert(strstr(e.msg[2], "with -L"));
}

Test(opts, more_errors_than_kept_are_counted)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;
	char *argv[CFS_MKFS_ERRS_MAX + 8];
	unsigned i, n = CFS_MKFS_ERRS_MAX + 5;
	int argc = 0;

	argv[argc++] = (char *)"mkchunkfs";
	for (i = 0; i < n; i++)
		argv[argc++] = (char *)"-Z";
	argv[argc++] = (char *)"img";
	argv[argc] = NULL;
	cr_assert_eq(cfs_mkfs_opts_parse(argc, argv, &o, &e), -EINVAL);
	cr_assert_eq(e.count, n);
	cr_assert_str_eq(e.msg[CFS_MKFS_ERRS_MAX - 1], "-Z: unknown option");
}

Test(opts, parser_is_reentrant)
{
	struct cfs_mkfs_opts o;
	struct cfs_mkfs_errs e;

	cr_assert_eq(PARSE(&o, &e, "-b", "3000", "-x", "img"), -EINVAL);
	cr_assert_eq(e.count, 2);
	/* A second parse starts from scratch: getopt state and results. */
	assert_ok(PARSE(&o, &e, "-b", "4096", "other.img"), &e);
	cr_assert_eq(o.block_size_bytes, 4096);
	cr_assert_str_eq(o.target, "other.img");
}

Test(opts, usage_is_one_line)
{
	cr_assert_null(strchr(cfs_mkfs_usage_line, '\n'));
	cr_assert(strncmp(cfs_mkfs_usage_line, "usage: mkchunkfs ", 17) == 0);
}
