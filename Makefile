# weir: plain GNU make, out-of-tree objects under $(BUILD).
#
#   make                 build every program into $(BUILD)/bin
#   make check           build and run every test (unit + integration)
#   make demo            relay 40 messages to a local stand-in upstream under a limit
#   make install DESTDIR= PREFIX=
#   make bench-inject    injection benchmark (scripts/bench/inject.sh)
#   make bench-compare   weir against Postfix and nullmailer (scripts/bench/compare.sh, root, ~20-25 min)
#   make fuzz            libFuzzer on weir-smtpd's parsers for FUZZ_TIME seconds
#   make crashtest       crash-replay harness, exhaustive (tests/durability/), and the soak
#   make deb             the Debian package and its lintian report, in $(BUILD)/package
#   make package-test    install and use the package in a throwaway Debian 12 root (root)
#   make soak            the long kill -9 soak (tests/soak; part of make crashtest)
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
LIBS_weir-gate := -lhiredis
ALL_LIBS := $(LDLIBS) $(LIBS_weir-remote) -lcrypt -lhiredis
TESTLIBS := -lcriterion

# program name : source folder (a folder without main.c is not built yet)
ALL_PROGRAMS := weir-queue:queue weir:weir sendmail:sendmail weir-send:send weir-remote:remote weir-gate:gate weir-smtpd:smtpd
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
.PHONY: crashtest crash-check
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
	$$(Q)$$(CC) $$(CFLAGS) -o $$@ $$^ $$(LDLIBS) $$(LIBS_$(call prog_name,$(1)))
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

# libFuzzer (clang, Debian's libclang-rt-14-dev) on weir-smtpd's parsers of
# client input (tests/fuzz/smtpd_fuzz.c).  `make fuzz` runs FUZZ_TIME
# seconds and keeps what it finds under $(BUILD)/fuzz/corpus; `make check`
# runs the seed corpus plus a short mutation pass.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 60
FUZZ_BIN  := $(BUILD)/fuzz/smtpd_fuzz
FUZZ_SRC  := tests/fuzz/smtpd_fuzz.c src/smtpd/dataend.c src/smtpd/path.c src/smtpd/auth.c \
	src/mail/address.c src/mail/envelope.c \
	src/lib/netaddr.c src/lib/buf.c src/lib/alloc.c src/lib/log.c src/lib/io.c

$(FUZZ_BIN): $(FUZZ_SRC) | $(PATHS_H)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  FUZZ-LD  $@")
	$(Q)$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined $(WARN) -Wno-format-nonliteral -std=gnu11 -Isrc $(DEFS) \
		-o $@ $(FUZZ_SRC) -lcrypt

fuzz: $(FUZZ_BIN)
	@mkdir -p $(BUILD)/fuzz/corpus
	$(FUZZ_BIN) -max_total_time=$(FUZZ_TIME) $(BUILD)/fuzz/corpus tests/fuzz/corpus/smtpd

fuzz-smoke: $(FUZZ_BIN)
	@rm -rf $(BUILD)/fuzz/smoke && mkdir -p $(BUILD)/fuzz/smoke
	@$(FUZZ_BIN) -runs=20000 -seed=1 $(BUILD)/fuzz/smoke tests/fuzz/corpus/smtpd >$(BUILD)/fuzz/smoke.log 2>&1 \
		&& echo "fuzz-smoke: ok (20000 runs over tests/fuzz/corpus/smtpd)" \
		|| { tail -n 40 $(BUILD)/fuzz/smoke.log; exit 1; }

test-run: all $(MAILQ) $(TEST_BINS) $(FAULTINJ)
	@BUILD=$(BUILD) tests/run.sh $(TEST_BINS)

# Crash consistency beyond kill -9 (tests/durability/crashreplay.c): a
# recorder preloaded into weir's programs logs every file-changing call;
# the replayer checks every state a power cut could leave.  `make check`
# tries a bounded set of states per call boundary, `make crashtest` all
# subsets of what was not yet durable (up to CRASH_BOUND, sampled beyond).
RECORDER    := $(BUILD)/tests/recorder.so
CRASHREPLAY := $(BUILD)/tests/durability/crashreplay
CRASH_OBJ   := $(patsubst %.c,$(BUILD)/%.o,$(filter-out %/recorder.c,$(wildcard tests/durability/*.c)))
CRASH_OBJ   += $(BUILD)/tests/lib/testlib_sock.o
CRASH_BOUND ?= 10

$(RECORDER): tests/durability/recorder.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -o $@ $< -ldl

$(CRASHREPLAY): $(CRASH_OBJ) $(LIBPROGS) $(LIBWEIR)
	@$(if $(V),,echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(ALL_LIBS)

crash-check: all $(RECORDER) $(CRASHREPLAY)
	@$(CRASHREPLAY) -B $(BUILD)/bin -R $(RECORDER)

crashtest: all $(RECORDER) $(CRASHREPLAY)
	@$(CRASHREPLAY) -x -b $(CRASH_BOUND) -B $(BUILD)/bin -R $(RECORDER)

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
	install -m 0644 src/queue/weir-queue.8 $(DESTDIR)$(MANDIR)/man8/weir-queue.8
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
