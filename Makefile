# stepprof — top-level build. `make` builds build/libstepprof.so; `make demo`
# and `make test` first install missing Debian packages (scripts/deps.sh).
# Test fixtures (the CUDA stand-in, target programs, unit tests) have their own
# make fragments beside their sources.

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= cc
BUILD ?= build
PREFIX ?= /usr/local
PYTHON ?= python3

CFLAGS_COMMON := -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC
EXTRA_CFLAGS ?=
EXTRA_LDFLAGS ?=
# TLS through TLS descriptors (gnu2), never initial-exec: the library must load with dlopen (CUDA / NVTX
# injection), and a preloaded one still reads its TLS with one load behind _dl_tlsdesc_return.
LIB_CFLAGS := $(CFLAGS_COMMON) -fvisibility=hidden -mtls-dialect=gnu2 -isystem $(CUDA_HOME)/include \
              -MMD -MP $(EXTRA_CFLAGS)
LIBYAML_A ?= $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libyaml.a /usr/lib/libyaml.a /usr/lib64/libyaml.a))

LIB_DIRS := inject collectors schedule exporters
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(filter-out %_main.c,$(wildcard $(d)/*.c)))
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
LIB := $(BUILD)/libstepprof.so

.PHONY: all lib programs unit demo test bench install deps clean check-exports cli
all: lib $(BUILD)/stepprof-report cli

# The PyTorch bootstrap (inject/python/) lives beside the library: its
# constructor finds <libdir>/python (installed: <libdir>/stepprof/python).
PY_BOOT := $(patsubst inject/python/%,$(BUILD)/python/%,$(wildcard inject/python/*.py))
lib: $(LIB) $(PY_BOOT)

$(BUILD)/python/%.py: inject/python/%.py
	@mkdir -p $(@D)
	cp $< $@

# Objects depend on the flags they were built with: a changed LIB_CFLAGS (e.g. the TLS dialect)
# rebuilds them rather than linking stale ones.
LIB_FLAGS_STAMP := $(BUILD)/obj/.cflags
$(LIB_FLAGS_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(LIB_CFLAGS)' | cmp -s - $@ || echo '$(LIB_CFLAGS)' > $@
FORCE:

$(BUILD)/obj/%.o: %.c $(LIB_FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJS)
	@test -n "$(LIBYAML_A)" || { echo "libyaml.a not found: apt-get install libyaml-dev" >&2; exit 1; }
	$(CC) -shared -o $@ $(LIB_OBJS) -Wl,--no-undefined -Wl,--exclude-libs,ALL $(LIBYAML_A) \
	      -ldl -lpthread $(EXTRA_LDFLAGS)

-include $(LIB_OBJS:.o=.d)

include tests/fakecuda/fakecuda.mk
include tests/programs/programs.mk
include tests/programs/markers.mk
include tests/programs/reports.mk
include tests/programs/memory.mk
include tests/unit/unit.mk
include tests/programs/reliability.mk
include tests/programs/rel_bounds.mk
include tests/programs/torch.mk
include tests/fuzz/fuzz.mk
include tests/programs/loading.mk
include tests/programs/scale.mk

HAVE_NVCC := $(shell test -x $(NVCC) && echo 1)
# The programs run against the stand-ins (LD_LIBRARY_PATH=build/fakecuda): a change to one is rebuilt with them.
programs: $(FAKECUDA_LIB) $(FAKECUPTI_LIB) $(PROGRAMS_C) $(PROGRAMS_TORCH) $(PROGRAMS_REL) $(PROGRAMS_MARKERS) $(PROGRAMS_REPORTS) $(PROGRAMS_MEM) $(PROGRAMS_LOAD) $(PROGRAMS_SCALE) $(if $(HAVE_NVCC),$(PROGRAMS_NVCC))

# The offline report tool reuses the exporters' aggregation; cJSON is for it
# only, never for the preloaded library.
REPORT_TOOL := $(BUILD)/stepprof-report
REPORT_TOOL_OBJS := $(addprefix $(BUILD)/obj/exporters/,agg.o agg_strings.o agg_lanes.o agg_rows.o table.o summary.o summary_rules.o \
                    summary_out.o stacks_out.o report_buf.o)
$(REPORT_TOOL): exporters/report_main.c $(REPORT_TOOL_OBJS)
	$(CC) $(CFLAGS_COMMON) -MMD -MP -o $@ $< $(REPORT_TOOL_OBJS) -lcjson -lz -lm
-include $(REPORT_TOOL).d
unit: $(UNIT_TESTS)

# The `stepprof` command (scripts/stepprof): its key list comes from the one
# key table through the C preprocessor, so every key is a flag of `run`.
STEPPROF_CMD := $(BUILD)/stepprof $(BUILD)/stepprof_trace.py $(BUILD)/stepprof_keys.py
$(BUILD)/stepprof_keys.py: scripts/stepprof_keys.py.in schedule/config_keys.h
	@mkdir -p $(@D)
	{ echo "# generated from schedule/config_keys.h by the Makefile; do not edit"; \
	  $(CC) -E -P -x c $< | grep -v '^[[:space:]]*$$'; } > $@
$(BUILD)/stepprof $(BUILD)/stepprof_trace.py: $(BUILD)/%: scripts/%
	@mkdir -p $(@D)
	cp $< $@
cli: $(STEPPROF_CMD) $(REPORT_TOOL)

deps:
	@sh scripts/deps.sh

demo: deps
	@$(MAKE) --no-print-directory lib $(FAKECUDA_LIB) programs
	@sh scripts/demo.sh

test: deps
	@$(MAKE) --no-print-directory lib $(REPORT_TOOL) cli $(FAKECUDA_LIB) programs unit
	@$(MAKE) --no-print-directory fakecupti-check $(if $(HAVE_NVCC),fakecuda-check)
	@$(PYTHON) tests/run_tests.py

bench: deps
	@$(MAKE) --no-print-directory lib $(REPORT_TOOL) $(FAKECUDA_LIB) programs
	@sh scripts/bench.sh

check-exports: $(LIB)
	@nm -D --defined-only $(LIB)

install: $(LIB) $(REPORT_TOOL) $(STEPPROF_CMD)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/share/doc/stepprof
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libstepprof.so
	install -d $(DESTDIR)$(PREFIX)/lib/stepprof/python
	install -m 0644 inject/python/*.py $(DESTDIR)$(PREFIX)/lib/stepprof/python/
	install -m 0755 $(REPORT_TOOL) $(DESTDIR)$(PREFIX)/bin/stepprof-report
	install -m 0755 $(BUILD)/stepprof $(DESTDIR)$(PREFIX)/bin/stepprof
	install -d $(DESTDIR)$(PREFIX)/lib/stepprof
	install -m 0644 $(BUILD)/stepprof_trace.py $(BUILD)/stepprof_keys.py $(DESTDIR)$(PREFIX)/lib/stepprof/
	install -m 0644 README.md profiling.example.yaml $(DESTDIR)$(PREFIX)/share/doc/stepprof/

clean:
	rm -rf $(BUILD)
