# chunkfs — one non-recursive Makefile for every program, library and test.
#
#   make                 build every program into build/$(BUILD)/
#   make check           unit + golden + integration tests (tests/run.sh)
#   make check-asan      the same under ASan + UBSan; fails on any sanitizer report
#   make install         DESTDIR=... prefix=... (default /usr/local)
#   make deb             the Debian package into build/deb/ (debian/)
#   make WERROR=         turn -Werror off (package builds, newer compilers)
#
# Layers, bottom to top, one library each. A layer calls and includes only
# itself and the layers after its arrow, and uses only the system libraries in
# brackets (a layer without libfuse or libblkid is compiled without their
# headers); inside a layer no modules call each other in a circle, except in
# iopath/ (its core picks a backend's ops table, the backends complete
# through the core).
# tests/layers.sh reads this table and checks it in make check: every
# object's undefined symbols (nm), every #include "..." line, the circles.
#   fs/base/    libcfs_base.a    -> [c]
#   fs/format/  libcfs_format.a  -> fs/base/ [c xxhash]
#   iopath/     libcfs_iopath.a  -> fs/base/ [c uring rbd rados] (circles: core <-> backends)
#   fs/stats/   libcfs_stats.a   -> iopath/ fs/base/ [c]
#   fs/meta/    libcfs_meta.a    -> fs/stats/ fs/format/ iopath/ fs/base/ [c xxhash blkid]
#   fs/fuse/    libcfs_fuse.a    -> fs/meta/ fs/stats/ fs/format/ iopath/ fs/base/ [c fuse3 uring]
#   mkchunkfs/                   -> fs/meta/ fs/stats/ fs/format/ iopath/ fs/base/ [c xxhash blkid] (circles: helpers -> main's cfs_mkfs_error)
# Programs: chunkfs = fs/fuse/main.c + every library; fsck.chunkfs =
# mkchunkfs/fsck*.c + fs/meta/ and below (no libfuse); mkchunkfs = the rest of
# mkchunkfs/ + fs/format/, iopath/, fs/base/ and fs/meta/'s signature.o (no
# metadata engine).

BUILD   ?= release
prefix  ?= /usr/local
bindir  ?= $(prefix)/bin
sbindir ?= $(prefix)/sbin
mandir  ?= $(prefix)/share/man
CC      ?= cc
CFLAGS  ?= -O2 -g
WERROR  ?= -Werror

WARN = -Wall -Wextra $(WERROR) -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wformat=2 -Wundef -Wvla -Wno-unused-parameter

override CPPFLAGS += -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -MMD -MP -I.
override CFLAGS   += -std=gnu11 -pthread $(WARN)

ifeq ($(BUILD),asan)
override CFLAGS  += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
override LDFLAGS += -fsanitize=address,undefined
else ifeq ($(BUILD),tsan)
# ThreadSanitizer for the daemon's threads (loops, committer); libfuse and
# liburing are not instrumented, so races inside them are not seen.
override CFLAGS  += -O1 -fsanitize=thread -fno-omit-frame-pointer
override LDFLAGS += -fsanitize=thread
else ifeq ($(BUILD),debug)
override CFLAGS  += -O0 -DCFS_DEBUG
else ifneq ($(BUILD),release)
$(error BUILD must be release, debug, asan or tsan)
endif

# make CFS_NO_STATS=1: the per-chunk statistics compiled out (fs/stats/chunkstat.h),
# to measure what counting costs (bench/stats-overhead.sh). Its own objects.
ifeq ($(CFS_NO_STATS),1)
override CPPFLAGS += -DCFS_NO_STATS
B := build/$(BUILD)-nostats
else
B := build/$(BUILD)
endif

FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
BLKID_CFLAGS := $(shell pkg-config --cflags blkid 2>/dev/null)
LIBS_XXHASH := -lxxhash
# librbd and librados: the "rbd" backend (Debian's librbd-dev has no .pc file)
LIBS_IOPATH := -luring -lrbd -lrados -lpthread
LIBS_BLKID  := -lblkid
LIBS_FUSE   := -lfuse3

# ---- sources ---------------------------------------------------------------
BASE_SRCS      := $(wildcard fs/base/*.c)
FORMAT_SRCS    := $(wildcard fs/format/*.c)
IOPATH_SRCS    := $(wildcard iopath/*.c)
STATS_SRCS     := $(wildcard fs/stats/*.c)
META_SRCS      := $(wildcard fs/meta/*.c)
FUSE_SRCS      := $(filter-out fs/fuse/main.c,$(wildcard fs/fuse/*.c))
FSCK_SRCS      := $(wildcard mkchunkfs/fsck*.c)
MKFS_SRCS      := $(filter-out $(FSCK_SRCS),$(wildcard mkchunkfs/*.c))
UNIT_SRCS      := $(wildcard tests/unit/test_*.c)
TESTLIB_SRCS   := $(wildcard tests/lib/*.c)
BENCH_SRCS     := $(wildcard bench/*.c)
TESTPROG_SRCS  := $(wildcard tests/progs/*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIB_BASE   := $(B)/libcfs_base.a
LIB_FORMAT := $(B)/libcfs_format.a
LIB_IOPATH := $(B)/libcfs_iopath.a
LIB_STATS  := $(B)/libcfs_stats.a
LIB_META   := $(B)/libcfs_meta.a
LIB_FUSE   := $(B)/libcfs_fuse.a
LIBS_ALL   := $(LIB_FUSE) $(LIB_META) $(LIB_STATS) $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)

PROGRAMS := $(B)/mkchunkfs
ifneq ($(wildcard fs/fuse/main.c),)
PROGRAMS += $(B)/chunkfs
endif
ifneq ($(FSCK_SRCS),)
PROGRAMS += $(B)/fsck.chunkfs
endif
UNIT_BINS  := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRCS))
BENCH_BINS := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRCS))
TESTPROG_BINS := $(patsubst tests/progs/%.c,$(B)/tests/progs/%,$(TESTPROG_SRCS))

.SECONDARY:
.PHONY: all check check-unit check-layers check-asan check-tsan bench-build demo install clean lint fuzz fuzz-build deb
all: $(PROGRAMS)

# The system headers a layer may use (the table above); tests, benchmarks and
# fuzz targets see them all.
LAYER_CFLAGS = $(FUSE_CFLAGS) $(BLKID_CFLAGS)
$(B)/obj/fs/base/%.o $(B)/obj/fs/format/%.o $(B)/obj/iopath/%.o: LAYER_CFLAGS =
$(B)/obj/fs/stats/%.o: LAYER_CFLAGS =
$(B)/obj/fs/meta/%.o: LAYER_CFLAGS = $(BLKID_CFLAGS)
$(B)/obj/fs/fuse/%.o: LAYER_CFLAGS = $(FUSE_CFLAGS)
$(B)/obj/mkchunkfs/%.o: LAYER_CFLAGS = $(BLKID_CFLAGS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LAYER_CFLAGS) -c -o $@ $<

$(LIB_BASE): $(call obj,$(BASE_SRCS))
$(LIB_FORMAT): $(call obj,$(FORMAT_SRCS))
$(LIB_IOPATH): $(call obj,$(IOPATH_SRCS))
$(LIB_STATS): $(call obj,$(STATS_SRCS))
$(LIB_META): $(call obj,$(META_SRCS))
$(LIB_FUSE): $(call obj,$(FUSE_SRCS))
$(LIBS_ALL):
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(B)/mkchunkfs: $(call obj,$(MKFS_SRCS)) $(LIB_META) $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_XXHASH) $(LIBS_IOPATH) $(LIBS_BLKID)

# fsck repairs through the metadata engine: no libfuse on its link line.
$(B)/fsck.chunkfs: $(call obj,$(FSCK_SRCS)) $(LIB_META) $(LIB_STATS) $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_XXHASH) $(LIBS_IOPATH) $(LIBS_BLKID)

$(B)/chunkfs: $(call obj,fs/fuse/main.c) $(LIBS_ALL)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_FUSE) $(LIBS_XXHASH) $(LIBS_IOPATH) $(LIBS_BLKID)

# Each unit test is its own binary, so a crash names its module. Every test links
# every library; the linker keeps only what the test uses.
UNIT_LIBS := $(LIBS_ALL)
$(B)/tests/unit/%: $(B)/obj/tests/unit/%.o $(call obj,$(TESTLIB_SRCS)) $(UNIT_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -lcriterion $(LIBS_FUSE) $(LIBS_XXHASH) $(LIBS_IOPATH) $(LIBS_BLKID)

# The extent map's out-of-memory cases: the allocations of the objects linked
# in (fs/meta/extent.c's among them) go through the test's wrappers, which
# can refuse them; Criterion's own, in its shared library, do not.
$(B)/tests/unit/test_extent_nomem: override LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc

# The do-nothing FUSE filesystem of the open/close case needs only libfuse.
$(B)/bench/fuse_null: $(B)/obj/bench/fuse_null.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_FUSE)

$(B)/bench/%: $(B)/obj/bench/%.o $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_XXHASH) $(LIBS_IOPATH)

# Programs the integration tests run (tests/progs/: loads no shell tool
# makes, e.g. asynchronous O_DIRECT); built with the benchmarks, which the
# integration tests also need.
$(B)/tests/progs/%: $(B)/obj/tests/progs/%.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_IOPATH)

# The extent map's concurrency cases (tests/progs/extent_race.c) link the
# metadata engine; a plain program because Criterion cannot run under
# ThreadSanitizer here (make BUILD=tsan bench-build, then run it).
$(B)/tests/progs/extent_race: $(B)/obj/tests/progs/extent_race.o $(LIB_META) $(LIB_STATS) \
		$(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_XXHASH) $(LIBS_IOPATH)

bench-build: $(BENCH_BINS) $(TESTPROG_BINS) $(PROGRAMS)

# make bench: every benchmark in one run, with a report in
# bench/results/run-<time>/ (bench/run-all.sh; as root; about 35 minutes,
# QUICK=1 under 8). Never part of make check or CI.
.PHONY: bench
bench: bench-build
	QUICK="$(QUICK)" BUILD=$(BUILD) bench/run-all.sh -N

# README's first command: the main job.
demo: all
	BUILD=$(BUILD) bench/demo.sh

# ---- fuzzing ---------------------------------------------------------------
# make fuzz: every tests/fuzz/fuzz_*.c built with clang's libFuzzer, ASan and
# UBSan (build/fuzz/, its own objects) and run for FUZZ_SECONDS each on its
# corpus (tests/fuzz/corpus/<target>, regressions too). A finding stops make
# with the input in build/fuzz/artifacts/<target>/: save it under
# tests/fuzz/regressions/<target>/, where make check replays it
# (tests/integration/fuzz_replay.sh, through the same targets built with
# $(CC) and tests/fuzz/driver.c).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_B       := build/fuzz
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES   := $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRCS))
FUZZ_CFLAGS  := -g -O1 -std=gnu11 -pthread -Wall -Wextra -Wno-unused-parameter \
		-fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_LIBSRCS := $(BASE_SRCS) $(FORMAT_SRCS) $(IOPATH_SRCS) $(STATS_SRCS) $(META_SRCS) $(FUSE_SRCS) \
		mkchunkfs/opts.c mkchunkfs/fsck_model.c
FUZZ_LINK    := $(LIBS_FUSE) $(LIBS_XXHASH) $(LIBS_IOPATH) $(LIBS_BLKID)

$(FUZZ_B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUSE_CFLAGS) $(BLKID_CFLAGS) -c -o $@ $<

$(FUZZ_B)/libfuzzcfs.a: $(patsubst %.c,$(FUZZ_B)/obj/%.o,$(FUZZ_LIBSRCS))
	$(AR) rcs $@ $^

$(FUZZ_B)/fuzz_%: $(FUZZ_B)/obj/tests/fuzz/fuzz_%.o $(FUZZ_B)/libfuzzcfs.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LINK)

fuzz-build: $(addprefix $(FUZZ_B)/,$(FUZZ_NAMES))

fuzz: fuzz-build
	@set -e; for t in $(FUZZ_NAMES); do \
		mkdir -p $(FUZZ_B)/corpus/$$t $(FUZZ_B)/artifacts/$$t; \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		quiet=; [ $$t != fuzz_chunkfs_opts ] || quiet=-close_fd_mask=3; \
		$(FUZZ_B)/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $$quiet \
			-artifact_prefix=$(FUZZ_B)/artifacts/$$t/ $(FUZZ_ARGS) $(FUZZ_B)/corpus/$$t \
			$$(ls -d tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t 2>/dev/null) \
			>$(FUZZ_B)/$$t.log 2>&1 || { tail -n 40 $(FUZZ_B)/$$t.log; exit 1; }; \
		grep -E "^stat::number_of_executed_units|^Done" $(FUZZ_B)/$$t.log | tr '\n' ' '; echo; \
	done

# The targets without libFuzzer, for make check.
FUZZ_REPLAY_BINS := $(patsubst tests/fuzz/%.c,$(B)/tests/fuzz/%,$(FUZZ_SRCS))
$(B)/tests/fuzz/%: $(B)/obj/tests/fuzz/%.o $(call obj,tests/fuzz/driver.c mkchunkfs/opts.c mkchunkfs/fsck_model.c) $(UNIT_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(FUZZ_LINK)

# ---- tests -----------------------------------------------------------------
# tests/run.sh runs unit, golden and integration tests against build/$(BUILD)
# and ends with one line "tests: N passed, N failed, N skipped".
# check-unit builds all that check runs too, so a quick check before a merge
# catches a test program that no longer compiles.
CHECK_BUILD := $(PROGRAMS) $(UNIT_BINS) $(BENCH_BINS) $(TESTPROG_BINS) $(FUZZ_REPLAY_BINS)
check: $(CHECK_BUILD) check-layers
	BUILD=$(BUILD) tests/run.sh

check-unit: $(CHECK_BUILD) check-layers
	BUILD=$(BUILD) tests/run.sh unit golden

# The layer table at the top of this file, checked against the objects.
check-layers: $(PROGRAMS)
	tests/layers.sh $(B)/obj

# Every sanitized process writes its reports under build/asan/reports (log_path),
# so a report from a forked Criterion child or a daemon in the background counts
# too; any file there fails the target.
check-asan:
	rm -rf build/asan/reports && mkdir -p build/asan/reports
	$(MAKE) BUILD=asan SANITIZER_REPORTS=$(CURDIR)/build/asan/reports check
	@if [ -n "$$(ls -A build/asan/reports)" ]; then \
		echo "check-asan: sanitizer reports:"; cat build/asan/reports/*; exit 1; \
	else echo "check-asan: no sanitizer reports"; fi

# make check-tsan: the daemon's threads under ThreadSanitizer on the loads that
# race them hardest in under a minute: asynchronous O_DIRECT writes next to
# buffered readers (daemon_dio_coherence: the loops, the committer and the
# page-cache worker of fs/fuse/dio_inval.c) and the extent map's concurrency
# cases (extent_race). Any report fails (tests/tsan.supp says what is
# suppressed and why). Not part of make check: it needs a second build of
# the daemon (build/tsan/), which costs more than the run; CI runs both.
TSAN_CASES := ^(daemon_dio_coherence|extent_race)$$
check-tsan:
	$(MAKE) BUILD=tsan all build/tsan/tests/progs/dio_coherence build/tsan/tests/progs/extent_race
	BUILD=tsan CFS_TEST_FILTER='$(TSAN_CASES)' tests/run.sh integration

# ---- install ---------------------------------------------------------------
MANPAGES := $(wildcard fs/*.8 mkchunkfs/*.8)
install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(sbindir) $(DESTDIR)$(mandir)/man8
	install -m 0755 $(B)/mkchunkfs $(DESTDIR)$(sbindir)/mkchunkfs
	$(if $(FSCK_SRCS),install -m 0755 $(B)/fsck.chunkfs $(DESTDIR)$(sbindir)/fsck.chunkfs)
	$(if $(wildcard fs/fuse/main.c),install -m 0755 $(B)/chunkfs $(DESTDIR)$(bindir)/chunkfs)
	@# mount(8) runs mount.chunkfs for -t chunkfs and mount.fuse.chunkfs for -t fuse.chunkfs
	$(if $(wildcard fs/fuse/main.c),ln -sf $(bindir)/chunkfs $(DESTDIR)$(sbindir)/mount.chunkfs)
	$(if $(wildcard fs/fuse/main.c),ln -sf $(bindir)/chunkfs $(DESTDIR)$(sbindir)/mount.fuse.chunkfs)
	$(if $(MANPAGES),install -m 0644 $(MANPAGES) $(DESTDIR)$(mandir)/man8/)

# ---- Debian package --------------------------------------------------------
# make deb: dpkg-buildpackage -us -uc -b on a copy of the source tree (the
# tracked files and the untracked ones git does not ignore) in
# build/deb/chunkfs/, so the package's clean step (make clean) never touches
# this tree's build/; the .deb, .buildinfo and .changes land in build/deb/.
# Then lintian, when installed, fails the target on any error or warning.
# DEB_BUILD_OPTIONS as usual (nocheck: no build-time tests); DEB_JOBS=N.
DEB_JOBS ?= 2
deb:
	@command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null || \
		{ echo "make deb: needs dpkg-dev and debhelper (.ci/install-deps.sh)" >&2; exit 1; }
	rm -rf build/deb && mkdir -p build/deb/chunkfs
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -co --exclude-standard -z | \
			tar --null -T - --ignore-failed-read -cf - | tar -xf - -C build/deb/chunkfs; \
	else \
		tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C build/deb/chunkfs; \
	fi
	cd build/deb/chunkfs && dpkg-buildpackage -us -uc -b -j$(DEB_JOBS)
	@if command -v lintian >/dev/null; then \
		echo "lintian build/deb/*.changes"; \
		lintian --fail-on error,warning build/deb/*.changes; \
	else echo "make deb: lintian not installed, package not checked"; fi
	@ls -l build/deb/*.deb

lint:
	clang-format --dry-run -Werror $(BASE_SRCS) $(FORMAT_SRCS) $(IOPATH_SRCS) $(STATS_SRCS) \
		$(META_SRCS) $(FUSE_SRCS) fs/fuse/main.c $(MKFS_SRCS) $(FSCK_SRCS) fs/*/*.h iopath/*.h

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
