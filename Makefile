# weir: plain GNU make, out-of-tree objects under $(BUILD).
#
#   make                 build every program into $(BUILD)/bin
#   make check           build and run every test (unit + integration)
#   make demo            relay 40 messages to a local stand-in upstream under a limit
#   make install DESTDIR= PREFIX=
#   make bench-inject    injection benchmark (scripts/bench/inject.sh)
#   make bench-compare   weir against Postfix and nullmailer (scripts/bench/compare.sh, root, ~20-25 min)
#   make fuzz            libFuzzer on each parser of untrusted bytes, FUZZ_TIME seconds each
#   make crashtest       crash-replay harness, exhaustive (tests/durability/), and the soak
#   make deb             the Debian package and its lintian report, in $(BUILD)/package
#   make package-test    install and use the package in a throwaway Debian 12 root (root)
#   make soak            the long kill -9 soak (tests/soak; part of make crashtest)
#   make crash-race      crash replay with weir-send racing weir-queue's todo/ sync (part of
#                        make crashtest)
#
# Sources are found by folder: src/lib and src/mail make libweir.a; each
# folder in PROGRAMS is one program whose main.c is thin, and whose other
# files are also linked into the test binaries.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBEXECDIR ?= $(PREFIX)/lib/weir
SYSCONFDIR ?= /etc/weir
MANDIR     ?= $(PREFIX)/share/man
DESTDIR    ?=
BUILD      ?= build

CC       ?= gcc
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
# Installation paths reach the code through a generated header, rewritten
# only when a path changes, so `make install PREFIX=...` after a plain
# `make` rebuilds what embeds the old path.
PATHS_H  := $(BUILD)/paths.h
DEFS     := -D_GNU_SOURCE -include $(PATHS_H)
ALL_CFLAGS = $(CFLAGS) $(WARN) -std=gnu11 -Isrc $(DEFS) $(CPPFLAGS)
LDLIBS   := -lconfuse -lm
# Libraries only some programs need: weir-queue is set-id when installed
# and must not load OpenSSL or SASL for nothing.
LIBS_weir-remote := -lssl -lcrypto -lsasl2
LIBS_weir-smtpd := -lssl -lcrypto -lcrypt
# weir-smtpd -l forks a process per connection: with every symbol bound
# at start (not lazily), the sessions inherit the bindings instead of each
# resolving them again (perf: _dl_fixup in every session; BENCHMARKS.md).
LDFLAGS_weir-smtpd := -Wl,-z,now
LIBS_weir-gate := -lhiredis
ALL_LIBS := $(LDLIBS) $(LIBS_weir-remote) -lcrypt -lhiredis
TESTLIBS := -lcriterion

# program name : source folder (a folder without main.c is not built yet)
ALL_PROGRAMS := weir-queue:queue weir-queued:queued weir:weir sendmail:sendmail weir-send:send weir-remote:remote weir-gate:gate weir-smtpd:smtpd weir-metrics:metrics weir-showq:showq
PROGRAMS := $(foreach p,$(ALL_PROGRAMS),$(if $(wildcard src/$(word 2,$(subst :, ,$(p)))/main.c),$(p)))

LIB_SRC  := $(wildcard src/lib/*.c src/mail/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIBWEIR  := $(BUILD)/libweir.a

prog_name = $(word 1,$(subst :, ,$(1)))
prog_dir  = $(word 2,$(subst :, ,$(1)))
BINS     := $(foreach p,$(PROGRAMS),$(BUILD)/bin/$(call prog_name,$(p)))

# Non-main objects of every program, for the tests to link directly.
PROG_LOGIC_SRC := $(filter-out %/main.c,$(foreach p,$(PROGRAMS),$(wildcard src/$(call prog_dir,$(p))/*.c)))
PROG_LOGIC_OBJ := $(PROG_LOGIC_SRC:%.c=$(BUILD)/%.o)
LIBPROGS := $(BUILD)/libprogs.a

UNIT_SRC   := $(wildcard tests/unit/*_test.c)
INTEG_SRC  := $(wildcard tests/integration/*_test.c)
TESTLIB_SRC := $(wildcard tests/lib/*.c)
TESTLIB_OBJ := $(TESTLIB_SRC:%.c=$(BUILD)/%.o)
TEST_BINS  := $(UNIT_SRC:%.c=$(BUILD)/%) $(INTEG_SRC:%.c=$(BUILD)/%)
FAULTINJ   := $(if $(wildcard tests/fault/faultinj.c),$(BUILD)/tests/faultinj.so)
MAILQ      := $(if $(filter sendmail:%,$(PROGRAMS)),$(BUILD)/bin/mailq)

.SECONDARY:
.PHONY: FORCE all check test-run demo demo-run install clean bench-inject fuzz fuzz-smoke
.PHONY: crashtest crash-check crash-race
all: $(BINS)

# V=1 shows the full commands.
Q := $(if $(V),,@)

$(PATHS_H): FORCE
	@mkdir -p $(dir $@)
	@printf '#define SYSCONFDIR "%s"\n#define LIBEXECDIR "%s"\n' '$(SYSCONFDIR)' '$(LIBEXECDIR)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
FORCE:

$(BUILD)/%.o: %.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  CC  $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIBWEIR): $(LIB_OBJ)
	@rm -f $@
	@$(if $(V),,echo "  AR  $@")
	$(Q)$(AR) rcs $@ $^

$(LIBPROGS): $(PROG_LOGIC_OBJ)
	@rm -f $@
	@$(if $(V),,echo "  AR  $@")
	$(Q)$(AR) rcs $@ $^

define program_rule
$(BUILD)/bin/$(call prog_name,$(1)): $(patsubst %.c,$(BUILD)/%.o,$(wildcard src/$(call prog_dir,$(1))/*.c)) $(LIBWEIR)
	@mkdir -p $$(dir $$@)
	@$$(if $$(V),,echo "  LD  $$@")
	$$(Q)$$(CC) $$(CFLAGS) $$(LDFLAGS_$(call prog_name,$(1))) -o $$@ $$^ $$(LDLIBS) $$(LIBS_$(call prog_name,$(1)))
endef
$(foreach p,$(PROGRAMS),$(eval $(call program_rule,$(p))))

$(BUILD)/bin/mailq: $(BUILD)/bin/sendmail
	ln -sf sendmail $@

$(BUILD)/tests/%.o: ALL_CFLAGS += -Itests/lib

$(BUILD)/tests/%_test: $(BUILD)/tests/%_test.o $(TESTLIB_OBJ) $(LIBPROGS) $(LIBWEIR)
	@$(if $(V),,echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(ALL_LIBS) $(TESTLIBS)

$(FAULTINJ): tests/fault/faultinj.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -o $@ $< -ldl

# The two README commands first make sure the Debian packages are there.
check:
	@scripts/deps.sh check
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory test-run
	@$(MAKE) --no-print-directory crash-check

# libFuzzer (clang, Debian's libclang-rt-14-dev): one target per parser of
# untrusted bytes, tests/fuzz/<name>_fuzz.c, each with its seed corpus in
# tests/fuzz/corpus/<name>/.  The library and program sources are built
# once more with clang and the sanitizers into $(FUZZ_LIB).  `make fuzz`
# runs each target FUZZ_TIME seconds and keeps what it finds under
# $(BUILD)/fuzz/corpus/<name>; `make check` (fuzz-smoke) runs each over its
# seed corpus plus a short mutation pass (FUZZ_SMOKE_RUNS, at most
# FUZZ_SMOKE_TIME seconds each).
FUZZ_CC   ?= clang
FUZZ_TIME ?= 60
FUZZ_SMOKE_RUNS ?= 20000
FUZZ_SMOKE_TIME ?= 8
FUZZ_FLAGS := -g -O1 $(WARN) -Wno-format-nonliteral -std=gnu11 -Isrc $(DEFS)
FUZZ_NAMES := $(patsubst tests/fuzz/%_fuzz.c,%,$(wildcard tests/fuzz/*_fuzz.c))
FUZZ_BINS  := $(FUZZ_NAMES:%=$(BUILD)/fuzz/%_fuzz)
FUZZ_LIB   := $(BUILD)/fuzz/libweir-fuzz.a
FUZZ_OBJ   := $(patsubst %.c,$(BUILD)/fuzz/%.o,$(LIB_SRC) $(PROG_LOGIC_SRC))

$(BUILD)/fuzz/src/%.o: src/%.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  FUZZ-CC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_OBJ)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(BUILD)/fuzz/%_fuzz: tests/fuzz/%_fuzz.c tests/fuzz/fuzz.h $(FUZZ_LIB) | $(PATHS_H)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  FUZZ-LD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_LIB) $(ALL_LIBS)

fuzz: $(FUZZ_BINS)
	@for t in $(FUZZ_NAMES); do mkdir -p $(BUILD)/fuzz/corpus/$$t; \
		echo "fuzz: $$t for $(FUZZ_TIME) s"; \
		$(BUILD)/fuzz/$${t}_fuzz -max_total_time=$(FUZZ_TIME) $(BUILD)/fuzz/corpus/$$t \
			tests/fuzz/corpus/$$t || exit 1; done

fuzz-smoke: $(FUZZ_BINS)
	@rm -rf $(BUILD)/fuzz/smoke && mkdir -p $(BUILD)/fuzz/smoke
	@for t in $(FUZZ_NAMES); do mkdir -p $(BUILD)/fuzz/smoke/$$t; \
		$(BUILD)/fuzz/$${t}_fuzz -runs=$(FUZZ_SMOKE_RUNS) -max_total_time=$(FUZZ_SMOKE_TIME) -seed=1 \
			$(BUILD)/fuzz/smoke/$$t tests/fuzz/corpus/$$t >$(BUILD)/fuzz/smoke/$$t.log 2>&1 \
			|| { tail -n 40 $(BUILD)/fuzz/smoke/$$t.log; echo "fuzz-smoke: $$t FAILED"; exit 1; }; done
	@echo "fuzz-smoke: ok ($(FUZZ_NAMES): seed corpora + $(FUZZ_SMOKE_RUNS) runs each)"

test-run: all $(MAILQ) $(TEST_BINS) $(FAULTINJ)
	@BUILD=$(BUILD) tests/run.sh $(TEST_BINS)

# Crash consistency beyond kill -9 (tests/durability/crashreplay.c): a
# recorder preloaded into weir's programs logs every file-changing call;
# the replayer checks every state a power cut could leave.  `make check`
# tries a bounded set of states per call boundary, `make crashtest` all
# subsets of what was not yet durable (up to CRASH_BOUND, sampled beyond).
# The workload injects with weir-queue, sendmail and over SMTP to the real
# weir-smtpd (messages over 100 KB among them), kills a weir-queue and an
# SMTP client halfway, and restarts weir-gate (a journal compaction) in
# the middle of the deliveries and at the end.  Both then let
# the real weir-gate, weir-send and weir-remote deliver a few recovered
# states to the stand-in upstream (tests/upstream/upstream.py), and run
# the harness on weir-queue mutants that must fail (crash-selftest).
RECORDER    := $(BUILD)/tests/recorder.so
CRASHREPLAY := $(BUILD)/tests/durability/crashreplay
CRASH_OBJ   := $(patsubst %.c,$(BUILD)/%.o,$(filter-out %/recorder.c,$(wildcard tests/durability/*.c)))
CRASH_OBJ   += $(BUILD)/tests/lib/testlib_sock.o
CRASH_BOUND ?= 10
# States that the real weir-gate, weir-send and weir-remote then deliver
# to the upstream (-d): make check; make crashtest delivers 20.
CRASH_DELIVER ?= 2

$(RECORDER): tests/durability/recorder.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -o $@ $< -ldl

$(CRASHREPLAY): $(CRASH_OBJ) $(LIBPROGS) $(LIBWEIR)
	@$(if $(V),,echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(ALL_LIBS)

# make crash-race: the workload with weir-queue held between its todo/
# link and that folder's fsync while weir-send starts and takes the entry
# (crashreplay -r).  It failed while weir-send preprocessed a todo/ entry
# before the entry was durable (a power cut then left intd/ and info/
# without todo/); weir-send now syncs todo/ first (send/sched.c,
# scan_todo).  A few minutes: part of make crashtest, not make check.
crash-race: all $(RECORDER) $(CRASHREPLAY)
	@$(CRASHREPLAY) -r -1 -B $(BUILD)/bin -R $(RECORDER)

crash-check: all $(RECORDER) $(CRASHREPLAY)
	@$(CRASHREPLAY) -d $(CRASH_DELIVER) -U tests/upstream/upstream.py -B $(BUILD)/bin -R $(RECORDER)
	@$(MAKE) --no-print-directory crash-selftest CRASH_SELFTEST_FLAGS=-1

crashtest: all $(RECORDER) $(CRASHREPLAY)
	@$(CRASHREPLAY) -x -b $(CRASH_BOUND) -d 20 -U tests/upstream/upstream.py -B $(BUILD)/bin -R $(RECORDER)
	@$(MAKE) --no-print-directory crash-race
	@$(MAKE) --no-print-directory crash-selftest

# The harness's self-test: weir-queue made wrong through the recorder's
# WEIR_REC_SKIP (nothing in src/ changes), each mutant must fail: the
# mess/ file's fsync moved after the todo/ link and its fsync; that fsync
# left out; the todo/ folder's fsync left out.  And weir-queued, each
# fsync of its group commit left out in turn: the mess/ files', the
# intd/ files', the mess/S folders', todo/'s.  (The mess/ file is open
# under its pid/ name.)  make check stops each at its first failing state.
CRASH_MUTANTS := weir-queue:queue/pid/:file:queue/todo weir-queue:queue/pid/:file \
	weir-queue:queue/todo:dir weir-queued:queue/pid/:file weir-queued:queue/intd/:file \
	weir-queued:queue/mess/:dir weir-queued:queue/todo:dir
.PHONY: crash-selftest
crash-selftest: all $(RECORDER) $(CRASHREPLAY)
	@for m in $(CRASH_MUTANTS); do \
		$(CRASHREPLAY) $(CRASH_SELFTEST_FLAGS) -S $$m -B $(BUILD)/bin -R $(RECORDER) \
			>$(BUILD)/crash-selftest.log 2>&1; rc=$$?; \
		if [ $$rc -ne 1 ]; then cat $(BUILD)/crash-selftest.log; \
			echo "crash-selftest: mutant $$m was not caught (exit $$rc)"; exit 1; fi; \
		echo "crash-selftest: mutant $$m caught: $$(grep -m1 '^    ' $(BUILD)/crash-selftest.log)"; \
	done

# The long kill -9 soak (tests/soak/soak_test.c); SOAK_ROUNDS, SOAK_MESSAGES,
# SOAK_KILLS and SOAK_SEED (printed by every run) shape or replay it.
SOAK_BIN := $(BUILD)/tests/soak/soak_test
.PHONY: soak crashtest
soak: all $(MAILQ) $(SOAK_BIN)
	@BUILD=$(BUILD) TEST_JOBS=1 tests/run.sh $(SOAK_BIN)
crashtest: soak

demo:
	@scripts/deps.sh demo
	@$(MAKE) --no-print-directory demo-run

demo-run: all $(MAILQ)
	@BUILD=$(BUILD) scripts/demo.sh

bench-inject:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) scripts/bench/inject.sh

# As root; QUICK=1 for a short run (scripts/bench/BENCHMARKS.md).
.PHONY: bench-compare
bench-compare:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) scripts/bench/compare.sh

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)
	install -m 0755 $(BUILD)/bin/weir $(DESTDIR)$(SBINDIR)/weir
	install -m 0755 $(BUILD)/bin/weir-queue $(DESTDIR)$(LIBEXECDIR)/weir-queue
	for p in $(filter-out weir sendmail weir-queue,$(foreach p,$(PROGRAMS),$(call prog_name,$(p)))); do \
		install -m 0755 $(BUILD)/bin/$$p $(DESTDIR)$(LIBEXECDIR)/$$p || exit 1; done
	install -m 0755 $(BUILD)/bin/sendmail $(DESTDIR)$(SBINDIR)/sendmail
	ln -sf ../sbin/sendmail $(DESTDIR)$(BINDIR)/mailq
	install -d $(DESTDIR)$(SYSCONFDIR)
	install -m 0644 etc/weir.conf $(DESTDIR)$(SYSCONFDIR)/weir.conf
	install -m 0644 etc/policy.conf $(DESTDIR)$(SYSCONFDIR)/policy.conf
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0644 src/sendmail/mailq.1 $(DESTDIR)$(MANDIR)/man1/mailq.1
	install -m 0644 etc/weir.conf.5 $(DESTDIR)$(MANDIR)/man5/weir.conf.5
	install -m 0644 etc/policy.conf.5 $(DESTDIR)$(MANDIR)/man5/weir-policy.conf.5
	install -m 0644 src/gate/weir-gate.8 $(DESTDIR)$(MANDIR)/man8/weir-gate.8
	install -m 0644 src/remote/weir-remote.8 $(DESTDIR)$(MANDIR)/man8/weir-remote.8
	install -m 0644 src/smtpd/weir-smtpd.8 $(DESTDIR)$(MANDIR)/man8/weir-smtpd.8
	install -m 0644 src/send/weir-send.8 $(DESTDIR)$(MANDIR)/man8/weir-send.8
	install -m 0644 src/metrics/weir-metrics.8 $(DESTDIR)$(MANDIR)/man8/weir-metrics.8
	install -m 0644 src/showq/weir-showq.8 $(DESTDIR)$(MANDIR)/man8/weir-showq.8
	install -m 0644 src/queue/weir-queue.8 $(DESTDIR)$(MANDIR)/man8/weir-queue.8
	install -m 0644 src/queued/weir-queued.8 $(DESTDIR)$(MANDIR)/man8/weir-queued.8
	install -m 0644 src/sendmail/sendmail.8 $(DESTDIR)$(MANDIR)/man8/sendmail.8
	install -m 0644 src/weir/weir.8 $(DESTDIR)$(MANDIR)/man8/weir.8

# The Debian package: dpkg-buildpackage on a copy of the tree, then
# lintian (scripts/deb.sh).  package-test installs it into a throwaway
# Debian 12 root and uses it there (tests/package/run.sh); it needs root
# and the network to Debian's mirror, so it is not part of make check.
.PHONY: deb package-test
deb:
	@scripts/deps.sh package
	@scripts/deb.sh $(BUILD)/package

package-test:
	@scripts/deps.sh package
	@BUILD=$(BUILD) tests/package/run.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
