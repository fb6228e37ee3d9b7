# tests/durability/crash.mk: the crash-replay harness's rules, included
# by the Makefile (which defines BUILD, CC, ALL_CFLAGS, the libraries and
# soak).
.PHONY: crashtest crash-check crash-race crash-selftest

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
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -fPIC -shared -o $@ $< -ldl

$(CRASHREPLAY): $(CRASH_OBJ) $(LIBPROGS) $(LIBWEIR)
	@$(if $(V),,echo "  LD  $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(ALL_LIBS)

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

crashtest: all $(RECORDER) $(CRASHREPLAY) soak
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
crash-selftest: all $(RECORDER) $(CRASHREPLAY)
	@for m in $(CRASH_MUTANTS); do \
		$(CRASHREPLAY) $(CRASH_SELFTEST_FLAGS) -S $$m -B $(BUILD)/bin -R $(RECORDER) \
			>$(BUILD)/crash-selftest.log 2>&1; rc=$$?; \
		if [ $$rc -ne 1 ]; then cat $(BUILD)/crash-selftest.log; \
			echo "crash-selftest: mutant $$m was not caught (exit $$rc)"; exit 1; fi; \
		echo "crash-selftest: mutant $$m caught: $$(grep -m1 '^    ' $(BUILD)/crash-selftest.log)"; \
	done
