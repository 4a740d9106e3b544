# tests/unit/unit.mk — builds the unit tests, one plain C program each, into
# $(BUILD)/unit/. Each prints one line per failed check and a final
# "N passed, N failed" line, and exits non-zero on failure. Run them all with
# `make unit && for t in $(UNIT_TESTS); do $t || exit 1; done`.
#
# Included by the top Makefile, which provides BUILD, CC and CFLAGS_COMMON.
# A new test is tests/unit/test_NAME.c plus a line naming the sources it links.

UNIT_OUT := $(BUILD)/unit
UNIT_TESTS := $(UNIT_OUT)/test_config $(UNIT_OUT)/test_plan $(UNIT_OUT)/test_jsonw $(UNIT_OUT)/test_strings $(UNIT_OUT)/test_cupti_names $(UNIT_OUT)/test_kernels $(UNIT_OUT)/test_nvtx_glob $(UNIT_OUT)/test_radix $(UNIT_OUT)/test_events $(UNIT_OUT)/test_clock \
              $(UNIT_OUT)/test_agg $(UNIT_OUT)/test_stacks $(UNIT_OUT)/test_objtab $(UNIT_OUT)/test_export_worker $(UNIT_OUT)/test_cupti_buffers \
              $(UNIT_OUT)/test_ops_lists $(UNIT_OUT)/test_gpu_pair
UNIT_LIBYAML := $(or $(LIBYAML_A),/usr/lib/x86_64-linux-gnu/libyaml.a)
# test_config reads profiling.example.yaml from the repository root.
UNIT_CFLAGS := $(CFLAGS_COMMON) -DSP_REPO_ROOT='"$(CURDIR)"'
# Every header of the library (coarse, but the tests link sources whose includes reach far: a header
# change rebuilds the 15 tests, which take seconds).
UNIT_HEADERS := tests/unit/check.h $(wildcard collectors/*.h exporters/*.h inject/*.h schedule/*.h) tests/unit/unit.mk

# The configuration loader is split over three files, all linked together.
UNIT_CONFIG_SRCS := schedule/config.c schedule/config_yaml.c schedule/marker.c collectors/rank.c

$(UNIT_OUT)/test_config: $(UNIT_CONFIG_SRCS) collectors/log.c profiling.example.yaml
$(UNIT_OUT)/test_plan: schedule/plan.c $(UNIT_CONFIG_SRCS) collectors/log.c
$(UNIT_OUT)/test_jsonw: exporters/jsonw.c exporters/gz.c collectors/log.c
$(UNIT_OUT)/test_strings: collectors/strings.c collectors/strings_log.c
# A 16 MiB deferred-text log, so that filling it 1.5 times over (block reuse) takes little time.
$(UNIT_OUT)/test_strings: UNIT_CFLAGS += -DSP_STR_LOG_BLOCKS=1024
$(UNIT_OUT)/test_cupti_names: collectors/cupti_names.c collectors/api.c collectors/strings.c collectors/strings_log.c
$(UNIT_OUT)/test_kernels: collectors/kernels.c
# A yield after each lock-free probe that missed: where a reader once re-read the slot a writer was
# filling and answered with another kernel's name (50 of 50 runs failed with it, 1 in thousands without).
$(UNIT_OUT)/test_kernels: UNIT_CFLAGS += -DSP_KERN_TEST_YIELD
# A yield after each lock-free lookup that missed (see the test's header).
$(UNIT_OUT)/test_stacks: collectors/stacks.c collectors/pystack.c collectors/pyname.c collectors/events.c collectors/prefault.c \
                         collectors/threads.c collectors/clock.c collectors/strings.c collectors/strings_log.c collectors/log.c \
                         collectors/stacks.h
$(UNIT_OUT)/test_stacks: UNIT_CFLAGS += -DSP_STACKS_TEST
$(UNIT_OUT)/test_nvtx_glob: inject/nvtx_glob.c
$(UNIT_OUT)/test_objtab: inject/objtab.c inject/elfobj.c inject/objtab.h inject/elfobj.h
# A first table of 4 entries: the process's ~10 objects grow it twice (entries move: their info pointers too).
# ... and more than 4 new entries are sorted: the first fill and the re-read after an unload sort, two loads insert.
$(UNIT_OUT)/test_objtab: UNIT_CFLAGS += -DSP_OT_MIN_CAP=4 -DSP_OT_BULK=4
$(UNIT_OUT)/test_radix: exporters/radix.c
$(UNIT_OUT)/test_clock: collectors/clock.c collectors/clock.h
$(UNIT_OUT)/test_agg: exporters/agg.c exporters/agg_strings.c exporters/agg_lanes.c exporters/agg_rows.c exporters/stacks_out.c \
                      exporters/report_buf.c collectors/cupti_window.c exporters/agg.h collectors/cupti_window.h
$(UNIT_OUT)/test_events: collectors/events.c collectors/prefault.c collectors/threads.c collectors/strings.c \
                         collectors/strings_log.c collectors/log.c collectors/events.h collectors/prefault.h

# Tensor-list regrouping, the operator table stood in for by the test.
$(UNIT_OUT)/test_ops_lists: exporters/ops_lists.c collectors/strings.c collectors/strings_log.c

# The collecting thread's loop, with the collect, the export and the rewarm stood in for by the test.
$(UNIT_OUT)/test_export_worker: exporters/worker.c collectors/threads.c
# The activity buffers, CUPTI's record walk stood in for by the test, its allocations counted.
$(UNIT_OUT)/test_cupti_buffers: collectors/cupti_buffers.c collectors/cupti_records.c
$(UNIT_OUT)/test_cupti_buffers: UNIT_CFLAGS += -isystem $(CUDA_HOME)/include -Wl,--wrap=posix_memalign

# Calls paired with CUPTI's API records, CUPTI's names and devices stood in for by the test.
$(UNIT_OUT)/test_gpu_pair: exporters/gpu_pair.c exporters/gpu_trace.c exporters/gpu_annot.c exporters/gpu_launch.c exporters/radix.c \
    exporters/jsonw.c exporters/gz.c collectors/api.c collectors/strings.c collectors/strings_log.c collectors/log.c
$(UNIT_OUT)/test_gpu_pair: UNIT_CFLAGS += -isystem $(CUDA_HOME)/include

$(UNIT_OUT)/%: tests/unit/%.c $(UNIT_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -o $@ $(filter %.c,$^) $(UNIT_LIBYAML) -ldl -lpthread
