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
#   make flood           weir-metrics under a slow-head flood of 1000 connections
#   make architecture    render ARCHITECTURE.md's picture (scripts/architecture.dot)
#   make architecture-check  ARCHITECTURE.md's checks alone (scripts/architecture.sh; part of make check)
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
DATADIR    ?= $(PREFIX)/share/weir
DESTDIR    ?=
BUILD      ?= build

CC       ?= gcc
CFLAGS   ?= -O2 -g
LDFLAGS  ?=
WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
# Installation paths reach the code through a generated header, rewritten
# only when a path changes, so `make install PREFIX=...` after a plain
# `make` rebuilds what embeds the old path.
PATHS_H  := $(BUILD)/paths.h
# Other generated headers, included as "folder/name.h".
GEN      := $(BUILD)/gen
DEFS     := -D_GNU_SOURCE -include $(PATHS_H) -I$(GEN)
ALL_CFLAGS = $(CFLAGS) $(WARN) -std=gnu11 -Isrc $(DEFS) $(PKG_CFLAGS) $(CPPFLAGS)
# Libraries, named for pkg-config: PKGS for every program, PKGS_<program>
# for one program alone (weir-queue is set-id when installed and must not
# load OpenSSL or SASL for nothing), TEST_PKGS for the tests, which link
# them all.  LDLIBS: libraries without a pkg-config file.
PKGS             := libconfuse
# OAuth (mail/oauth.c: HTTPS through libcurl, JSON through json-c): only
# in the deliverer and the operator command (weir auth); weir-send and
# weir-metrics read the token status file (json-c).  weir-metrics serves
# HTTP with GNU libmicrohttpd and checks basic authentication with
# crypt(3) (lib/pwfile.c, as weir check-config does), and hashes its
# page's style sheet for its Content-Security-Policy (libcrypto's
# SHA-256); weir status and weir-metrics read weir-showq's JSON listing
# (json-c).
PKGS_weir-remote := openssl libsasl2 libcurl json-c
PKGS_weir        := libcurl json-c libcrypto libxcrypt
PKGS_weir-send   := json-c
PKGS_weir-metrics := json-c libmicrohttpd libxcrypt libcrypto
PKGS_weir-smtpd  := openssl libxcrypt
PKGS_weir-gate   := hiredis
TEST_PKGS        := criterion
LDLIBS           := -lm
# Link flags of one program, after $(LDFLAGS).  weir-smtpd -l forks a
# process per connection: with every symbol bound at start (not lazily),
# the sessions inherit the bindings instead of each resolving them again
# (perf: _dl_fixup in every session; BENCHMARKS.md).
LDFLAGS_weir-smtpd := -Wl,-z,now

# program name : source folder (a folder without main.c is not built yet)
ALL_PROGRAMS := weir-queue:queue weir-queued:queued weir:weir sendmail:sendmail weir-send:send weir-remote:remote weir-gate:gate weir-smtpd:smtpd weir-metrics:metrics weir-showq:showq
PROGRAMS := $(foreach p,$(ALL_PROGRAMS),$(if $(wildcard src/$(word 2,$(subst :, ,$(p)))/main.c),$(p)))

LIB_SRC  := $(wildcard src/lib/*.c src/mail/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIBWEIR  := $(BUILD)/libweir.a

prog_name = $(word 1,$(subst :, ,$(1)))
prog_dir  = $(word 2,$(subst :, ,$(1)))
BINS     := $(foreach p,$(PROGRAMS),$(BUILD)/bin/$(call prog_name,$(p)))

# pkg-config's answers: the include folders once, quietly (make check,
# on a fresh machine, starts before its first step installed the
# packages); the libraries at each link, where a package it does not
# know stops the build with its name.  Include folders only: a define
# (hiredis.pc's -D_FILE_OFFSET_BITS=64) would rename the libc functions
# that the fault-injection and crash-recording shims define.
ALL_PKGS   := $(PKGS) $(foreach p,$(PROGRAMS),$(PKGS_$(call prog_name,$(p))))
PKG_CFLAGS := $(shell pkg-config --cflags-only-I $(ALL_PKGS) $(TEST_PKGS) 2>/dev/null)
pkg_libs    = $(or $(shell pkg-config --libs $(1) 2>/dev/null),$(error pkg-config: no $(1) \
	(scripts/deps.sh build installs what weir needs)))
ALL_LIBS    = $(call pkg_libs,$(ALL_PKGS)) $(LDLIBS)
TEST_LIBS   = $(call pkg_libs,$(ALL_PKGS) $(TEST_PKGS)) $(LDLIBS)

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
# mailq, sendmail's link, with the programs: the build tree is usable as
# it is (the README's demo, the man pages' examples).
all: $(BINS) $(MAILQ)

# V=1 shows the full commands.
Q := $(if $(V),,@)

$(PATHS_H): FORCE
	@mkdir -p $(dir $@)
	@printf '#define SYSCONFDIR "%s"\n#define LIBEXECDIR "%s"\n#define DATADIR "%s"\n' \
		'$(SYSCONFDIR)' '$(LIBEXECDIR)' '$(DATADIR)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
FORCE:

$(BUILD)/%.o: %.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  CC  $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

# The version, from debian/changelog's first line, for --version.
$(GEN)/version.h: debian/changelog
	@mkdir -p $(dir $@)
	$(Q)v=$$(sed -n '1s/^weir (\([^)]*\)).*/\1/p' $<); \
		[ -n "$$v" ] || { echo "$<: no 'weir (VERSION)' on its first line" >&2; exit 1; }; \
		printf '#define WEIR_VERSION "%s"\n' "$$v" >$@
$(BUILD)/src/lib/usage.o $(BUILD)/fuzz/src/lib/usage.o $(BUILD)/arch/src/lib/usage.o: $(GEN)/version.h

# weir-gate's Redis scripts (src/gate/*.lua) as C strings for shared.c.
LUA_SRC := $(wildcard src/gate/*.lua)
$(GEN)/gate/lua.h: $(LUA_SRC) scripts/lua2c.sh
	@mkdir -p $(dir $@)
	$(Q)scripts/lua2c.sh $(LUA_SRC) >$@.tmp && mv -f $@.tmp $@
$(BUILD)/src/gate/shared.o $(BUILD)/fuzz/src/gate/shared.o $(BUILD)/arch/src/gate/shared.o: $(GEN)/gate/lua.h

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
	$$(Q)$$(CC) $$(CFLAGS) $$(LDFLAGS) $$(LDFLAGS_$(call prog_name,$(1))) -o $$@ $$^ \
		$$(call pkg_libs,$$(PKGS) $$(PKGS_$(call prog_name,$(1)))) $$(LDLIBS)
endef
$(foreach p,$(PROGRAMS),$(eval $(call program_rule,$(p))))

$(BUILD)/bin/mailq: $(BUILD)/bin/sendmail
	ln -sf sendmail $@

$(BUILD)/tests/%.o: ALL_CFLAGS += -Itests/lib

$(BUILD)/tests/%_test: $(BUILD)/tests/%_test.o $(TESTLIB_OBJ) $(LIBPROGS) $(LIBWEIR)
	@$(if $(V),,echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(TEST_LIBS)

# tests/unit/windowdiff_test runs the same scripts at a clock of its own:
# a copy of shared.c compiled against them with Redis's TIME replaced by
# the list weir:test:clock, which the test sets.
TESTCLOCK := $(BUILD)/tests/gen
$(TESTCLOCK)/gate/lua.h: $(LUA_SRC) scripts/lua2c.sh
	@mkdir -p $(dir $@)
	$(Q)scripts/lua2c.sh -e "s/redis\.call('TIME')/redis.call('LRANGE', 'weir:test:clock', 0, 1)/g" \
		$(LUA_SRC) >$@.tmp
	$(Q)! grep -q "'TIME'" $@.tmp && mv -f $@.tmp $@
$(BUILD)/tests/gate/shared_testclock.o: src/gate/shared.c $(TESTCLOCK)/gate/lua.h | $(PATHS_H)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  CC  $@")
	$(Q)$(CC) -I$(TESTCLOCK) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/tests/unit/windowdiff_test: $(BUILD)/tests/unit/windowdiff_test.o \
    $(BUILD)/tests/gate/shared_testclock.o $(TESTLIB_OBJ) $(LIBPROGS) $(LIBWEIR)
	@$(if $(V),,echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(TEST_LIBS)

$(FAULTINJ): tests/fault/faultinj.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -fPIC -shared -o $@ $< -ldl

# The two README commands first make sure the Debian packages are there.
check:
	@scripts/deps.sh check
	@$(MAKE) --no-print-directory architecture-check
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory test-run
	@$(MAKE) --no-print-directory crash-check

# ARCHITECTURE.md's picture, rendered from its source with Graphviz;
# make check (scripts/architecture.sh) fails when the two disagree.
.PHONY: architecture
architecture:
	dot -Tsvg scripts/architecture.dot -o scripts/architecture.svg

# What the check reads of the code: every source once more, unoptimized
# and with each function and datum in a section of its own
# (-ffunction-sections -fdata-sections), so that an object's relocations
# say which function calls, names or points to which
# (scripts/procedges.py), whatever CFLAGS the programs are built with
# (no warnings: the build proper reports them).
ARCH_FLAGS := -O0 -w -std=gnu11 -Isrc $(DEFS) $(PKG_CFLAGS) -ffunction-sections -fdata-sections
ARCH_OBJ   := $(patsubst %.c,$(BUILD)/arch/%.o,$(LIB_SRC) $(foreach p,$(PROGRAMS),$(wildcard src/$(call prog_dir,$(p))/*.c)))
$(BUILD)/arch/src/%.o: src/%.c | $(PATHS_H)
	@mkdir -p $(dir $@)
	@$(if $(V),,echo "  ARCH-CC  $<")
	$(Q)$(CC) $(ARCH_FLAGS) -MMD -MP -c -o $@ $<

.PHONY: architecture-check
architecture-check: $(ARCH_OBJ)
	@scripts/architecture.sh $(BUILD)/arch

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
FUZZ_FLAGS := -g -O1 $(WARN) -Wno-format-nonliteral -std=gnu11 -Isrc $(DEFS) $(PKG_CFLAGS)
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

test-run: all $(TEST_BINS) $(FAULTINJ)
	@BUILD=$(BUILD) tests/run.sh $(TEST_BINS)

# The crash-replay harness: make crash-check (part of make check),
# crash-race, crash-selftest and crashtest.
include tests/durability/crash.mk

# The long kill -9 soak (tests/soak/soak_test.c); SOAK_ROUNDS, SOAK_MESSAGES,
# SOAK_KILLS and SOAK_SEED (printed by every run) shape or replay it.
SOAK_BIN := $(BUILD)/tests/soak/soak_test
.PHONY: soak
soak: all $(SOAK_BIN)
	@BUILD=$(BUILD) TEST_JOBS=1 tests/run.sh $(SOAK_BIN)

# weir-metrics under a slow-head flood at the issue's scale (1000
# connections, FLOOD_N), from one address and from eight; make check
# runs the same tests with 300.
FLOOD_N ?= 1000
.PHONY: flood
flood: all $(BUILD)/tests/integration/metrics_test
	@WEIR_BIN=$(abspath $(BUILD))/bin WEIR_FLOOD_N=$(FLOOD_N) \
		$(BUILD)/tests/integration/metrics_test --filter 'metrics/slow_heads*' --verbose

demo:
	@scripts/deps.sh demo
	@$(MAKE) --no-print-directory demo-run

demo-run: all
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

# Every page in its section (its suffix); policy.conf(5) as
# weir-policy.conf(5), a name that says whose file it is.
MANPAGES := $(wildcard src/*/*.[18] etc/*.5)
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
	for m in $(MANPAGES); do n=$${m##*/}; [ "$$n" != policy.conf.5 ] || n=weir-policy.conf.5; \
		install -D -m 0644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/$$n || exit 1; done
	install -d $(DESTDIR)$(DATADIR)
	install -m 0644 etc/weir-grafana.json $(DESTDIR)$(DATADIR)/grafana-dashboard.json
	install -d $(DESTDIR)$(DATADIR)/providers
	install -m 0644 etc/providers/*.conf $(DESTDIR)$(DATADIR)/providers/

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
