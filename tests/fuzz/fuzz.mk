# tests/fuzz/fuzz.mk — the sanitizer and fuzzing passes (docs/reliability.md, "Tooling").
#
# Included by the top Makefile after the other fragments; uses BUILD, CC, CFLAGS_COMMON, LIB_SRCS,
# LIBYAML_A, PYTHON and the PROGRAMS_* lists. Targets:
#
#   make fuzz            builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined)
#                        and runs each for FUZZ_TIME seconds (default 60) from the seed corpus in
#                        tests/fuzz/corpus/<target>/; new inputs go to $(BUILD)/fuzz/corpus-<target>/
#                        (not committed), crashes to $(BUILD)/fuzz/ (crash-*), which then fails the run.
#                        The committed seeds, and any crash saved under tests/fuzz/regressions/<target>/,
#                        are replayed first as regression tests.
#   make test-asan       the library, the CUDA stand-in, the target programs and the unit tests built
#                        with -fsanitize=address,undefined into $(BUILD)-asan, and the whole test suite
#                        run on them (SP_BUILD=$(BUILD)-asan). The target programs are preloaded with
#                        libasan first (an ASan library must come first in LD_PRELOAD; the tests
#                        read it from SP_PRELOAD_FIRST), with detect_leaks=0 (the programs and the
#                        stand-in free nothing at exit by design) and handle_segv=0 & co. (the tests
#                        crash targets on purpose: stepprof's own fault handling is what is tested).
#   make test-valgrind   the unit tests, and the reliability tests named in VALGRIND_TESTS with their
#                        targets run under valgrind (memcheck; one log per process in $(BUILD)),
#                        on the plain build; any log with errors fails the run.
#
# Needs clang (Debian: clang, with libclang-rt for libFuzzer) and valgrind; `make fuzz-deps` installs
# them when run as root.

FUZZ_CC ?= clang
FUZZ_TIME ?= 60
FUZZ_OUT := $(BUILD)/fuzz
FUZZ_DIR := tests/fuzz
FUZZ_FLAGS := -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TARGETS := config jsonw trace_reader

FUZZ_SRCS_config := schedule/config.c schedule/config_yaml.c schedule/marker.c collectors/log.c collectors/rank.c
FUZZ_LIBS_config := $(LIBYAML_A)
FUZZ_SRCS_jsonw := exporters/jsonw.c exporters/gz.c collectors/log.c
FUZZ_LIBS_jsonw := -ldl
# The offline tool's own sources (report_main.c is #included by the target).
FUZZ_SRCS_trace_reader := $(filter-out %_main.c,$(wildcard exporters/agg*.c exporters/report_buf.c \
                          exporters/stacks_out.c exporters/summary*.c exporters/table.c))
FUZZ_LIBS_trace_reader := -lcjson -lz -lm
FUZZ_EXTRA_DEPS_trace_reader := exporters/report_main.c

FUZZ_BINS := $(addprefix $(FUZZ_OUT)/fuzz_,$(FUZZ_TARGETS))

$(FUZZ_OUT)/fuzz_%: $(FUZZ_DIR)/fuzz_%.c $(FUZZ_DIR)/fuzz.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_SRCS_$*) $(FUZZ_LIBS_$*)

$(FUZZ_OUT)/fuzz_trace_reader: $(FUZZ_EXTRA_DEPS_trace_reader) $(FUZZ_SRCS_trace_reader)

# -close_fd_mask=2: the targets' own "stepprof:" / "stepprof-report:" lines are expected output;
# libFuzzer and the sanitizers still report on a duplicate of stderr.
.PHONY: fuzz fuzz-build fuzz-regress fuzz-deps test-asan test-valgrind
fuzz-build: $(FUZZ_BINS)

fuzz-regress: $(FUZZ_BINS)
	@for t in $(FUZZ_TARGETS); do \
	  for d in $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/regressions/$$t; do \
	    [ -d $$d ] && [ -n "$$(ls -A $$d)" ] || continue; \
	    $(FUZZ_OUT)/fuzz_$$t -close_fd_mask=2 -runs=0 $$d/* >$(FUZZ_OUT)/$$t.replay.log 2>&1 || \
	      { echo "fuzz: $$t fails on $$d (see $(FUZZ_OUT)/$$t.replay.log)"; exit 1; }; \
	  done; echo "fuzz: $$t: seeds and regressions replayed clean"; \
	done

fuzz: fuzz-regress
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_OUT)/corpus-$$t; \
	  echo "fuzz: $$t for $(FUZZ_TIME) s"; \
	  (cd $(FUZZ_OUT) && ./fuzz_$$t -max_total_time=$(FUZZ_TIME) -close_fd_mask=2 -print_final_stats=1 \
	     corpus-$$t $(CURDIR)/$(FUZZ_DIR)/corpus/$$t >$$t.log 2>&1) || \
	    { tail -40 $(FUZZ_OUT)/$$t.log; echo "fuzz: $$t found a crash: $$(ls $(FUZZ_OUT)/crash-* 2>/dev/null)"; \
	      exit 1; }; \
	  grep -E "^stat::number_of_executed_runs|^stat::peak_rss" $(FUZZ_OUT)/$$t.log | tr '\n' ' '; echo; \
	done

fuzz-deps:
	@command -v $(FUZZ_CC) >/dev/null && command -v valgrind >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang valgrind >/dev/null; } || \
	  { echo "install clang and valgrind: apt-get install clang valgrind" >&2; exit 1; }

# ---- sanitizers ------------------------------------------------------------------------------------

ASAN_BUILD := $(BUILD)-asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_RT := $(shell $(CC) -print-file-name=libasan.so)

# A recursive make: the same rules, another BUILD, sanitizer flags on every C file (the programs'
# and the stand-in's come in through CFLAGS_COMMON). The library keeps -Wl,--no-undefined: libasan
# and libubsan are linked in.
test-asan:
	@$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) BUILD=$(ASAN_BUILD) \
	  CFLAGS_COMMON="$(CFLAGS_COMMON) $(ASAN_FLAGS)" EXTRA_LDFLAGS="$(ASAN_FLAGS)" \
	  lib $(ASAN_BUILD)/stepprof-report cli $(ASAN_BUILD)/fakecuda/libcudart.so.13 programs unit \
	  $(if $(PROGRAMS_REL),$(PROGRAMS_REL:$(BUILD)/%=$(ASAN_BUILD)/%))
	@SP_BUILD=$(abspath $(ASAN_BUILD)) SP_PRELOAD_FIRST="$(ASAN_RT)" \
	  ASAN_OPTIONS=detect_leaks=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:halt_on_error=1:exitcode=86:log_path=$(abspath $(ASAN_BUILD))/asan \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87:log_path=$(abspath $(ASAN_BUILD))/ubsan \
	  $(PYTHON) tests/run_tests.py $(TESTS); rc=$$?; \
	  reports=$$(ls $(ASAN_BUILD)/asan.* $(ASAN_BUILD)/ubsan.* 2>/dev/null | wc -l); \
	  echo "test-asan: $$reports sanitizer report(s)$$( [ $$reports = 0 ] || echo ": $$(ls $(ASAN_BUILD)/asan.* $(ASAN_BUILD)/ubsan.* 2>/dev/null | head -5)")"; \
	  [ $$rc = 0 ] && [ $$reports = 0 ]

# A subset: memcheck makes the 200000-launch and 32-thread targets take minutes.
VALGRIND_TESTS ?= test_reliability:test_fork test_reliability:test_exec test_reliability:test_processes \
                  test_reliability:test_end test_reliability:test_sigkill test_reliability:test_output \
                  test_reliability:test_unwritable test_reliability:test_missing test_reliability:test_hostile
test-valgrind: lib $(FAKECUDA_LIB) programs unit $(PROGRAMS_REL)
	@rm -f $(BUILD)/valgrind.*.log
	@for t in $(UNIT_TESTS); do \
	  valgrind -q --error-exitcode=99 --leak-check=no $$t >/dev/null 2>$(BUILD)/valgrind.unit.log || \
	    { cat $(BUILD)/valgrind.unit.log; echo "test-valgrind: $$t"; exit 1; }; done
	@SP_BUILD=$(abspath $(BUILD)) SP_VALGRIND=1 $(PYTHON) tests/run_tests.py $(VALGRIND_TESTS); rc=$$?; \
	  reports=$$(cat $(BUILD)/valgrind.[0-9]*.log 2>/dev/null | grep -c "ERROR SUMMARY: [1-9]"); \
	  echo "test-valgrind: $$reports process(es) with memcheck errors"; [ $$rc = 0 ] && [ $$reports = 0 ]
