# chunkfs — one non-recursive Makefile for every program, library and test.
#
#   make                 build every program into build/$(BUILD)/
#   make check           unit + golden + integration tests (tests/run.sh)
#   make check-asan      the same under ASan + UBSan; fails on any sanitizer report
#   make install         DESTDIR=... prefix=... (default /usr/local)
#   make deb             the Debian package into build/deb/ (debian/)
#   make WERROR=         turn -Werror off (package builds, newer compilers)
#
# Module dependencies (enforced by what each program links):
#   fs/format/   -> libc + xxhash only       (libcfs_format.a: mkchunkfs links it without libfuse)
#   iopath/*.c   -> libc + liburing          (libcfs_iopath.a: knows nothing of files or FUSE)
#   fs/stats, fs/meta, fs/fuse -> format + iopath + fuse3  (the chunkfs daemon)
#   mkchunkfs/   -> format + iopath + blkid

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
LIBS_FORMAT := -lxxhash
LIBS_IOPATH := -luring -lpthread
LIBS_BLKID  := -lblkid
LIBS_FUSE   := -lfuse3

# ---- sources ---------------------------------------------------------------
BASE_SRCS      := $(wildcard fs/base/*.c)
FORMAT_SRCS    := fs/format/format.c
IOPATH_SRCS    := $(wildcard iopath/*.c)
DAEMON_SRCS    := $(wildcard fs/stats/*.c fs/meta/*.c fs/fuse/*.c)
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
LIB_DAEMON := $(B)/libcfs_daemon.a

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
.PHONY: all check check-unit check-asan bench-build demo install clean lint fuzz fuzz-build deb
all: $(PROGRAMS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(FUSE_CFLAGS) $(BLKID_CFLAGS) -c -o $@ $<

$(LIB_BASE): $(call obj,$(BASE_SRCS))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(LIB_FORMAT): $(call obj,$(FORMAT_SRCS))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(LIB_IOPATH): $(call obj,$(IOPATH_SRCS))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

# Everything of the daemon but main.c, so unit tests can link its modules.
$(LIB_DAEMON): $(call obj,$(filter-out fs/fuse/main.c,$(DAEMON_SRCS)))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(B)/mkchunkfs: $(call obj,$(MKFS_SRCS)) $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_FORMAT) $(LIBS_IOPATH) $(LIBS_BLKID)

# fsck repairs through the daemon's metadata engine (libcfs_daemon.a); the
# linker takes only the engine's objects, so it needs no libfuse.
$(B)/fsck.chunkfs: $(call obj,$(FSCK_SRCS)) $(LIB_DAEMON) $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_FORMAT) $(LIBS_IOPATH)

$(B)/chunkfs: $(call obj,$(DAEMON_SRCS)) $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_FUSE) $(LIBS_FORMAT) $(LIBS_IOPATH)

# Each unit test is its own binary, so a crash names its module. Every test links
# every library; the linker keeps only what the test uses.
UNIT_LIBS := $(if $(DAEMON_SRCS),$(LIB_DAEMON)) $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
$(B)/tests/unit/%: $(B)/obj/tests/unit/%.o $(call obj,$(TESTLIB_SRCS)) $(UNIT_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -lcriterion $(LIBS_FUSE) $(LIBS_FORMAT) $(LIBS_IOPATH) $(LIBS_BLKID)

# The do-nothing FUSE filesystem of the open/close case needs only libfuse.
$(B)/bench/fuse_null: $(B)/obj/bench/fuse_null.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_FUSE)

$(B)/bench/%: $(B)/obj/bench/%.o $(LIB_FORMAT) $(LIB_IOPATH) $(LIB_BASE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_FORMAT) $(LIBS_IOPATH)

# Programs the integration tests run (tests/progs/: loads no shell tool
# makes, e.g. asynchronous O_DIRECT); built with the benchmarks, which the
# integration tests also need.
$(B)/tests/progs/%: $(B)/obj/tests/progs/%.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_IOPATH)

bench-build: $(BENCH_BINS) $(TESTPROG_BINS) $(PROGRAMS)

# make bench: every benchmark of issue 10 in one run, with a report in
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
FUZZ_LIBSRCS := $(BASE_SRCS) $(FORMAT_SRCS) $(IOPATH_SRCS) $(filter-out fs/fuse/main.c,$(DAEMON_SRCS)) \
		mkchunkfs/opts.c mkchunkfs/fsck_model.c
FUZZ_LINK    := $(LIBS_FUSE) $(LIBS_FORMAT) $(LIBS_IOPATH) $(LIBS_BLKID)

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
check: $(PROGRAMS) $(UNIT_BINS) $(BENCH_BINS) $(TESTPROG_BINS) $(FUZZ_REPLAY_BINS)
	BUILD=$(BUILD) tests/run.sh

check-unit: $(PROGRAMS) $(UNIT_BINS)
	BUILD=$(BUILD) tests/run.sh unit golden

# Every sanitized process writes its reports under build/asan/reports (log_path),
# so a report from a forked Criterion child or a daemon in the background counts
# too; any file there fails the target.
check-asan:
	rm -rf build/asan/reports && mkdir -p build/asan/reports
	$(MAKE) BUILD=asan SANITIZER_REPORTS=$(CURDIR)/build/asan/reports check
	@if [ -n "$$(ls -A build/asan/reports)" ]; then \
		echo "check-asan: sanitizer reports:"; cat build/asan/reports/*; exit 1; \
	else echo "check-asan: no sanitizer reports"; fi

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
	clang-format --dry-run -Werror $(BASE_SRCS) $(FORMAT_SRCS) $(IOPATH_SRCS) $(DAEMON_SRCS) $(MKFS_SRCS) $(FSCK_SRCS) fs/*/*.h iopath/*.h

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
