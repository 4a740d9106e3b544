# tests/programs/reports.mk — target programs of the report tests (tests/test_reports.py).
#
# Included by the top Makefile after programs.mk (it uses PROG_SRC, PROG_OUT, PROG_CFLAGS,
# PROG_CUDA_LIBS, PROG_DEPS). Defines PROGRAMS_REPORTS. The targets keep their frames
# (-fno-optimize-sibling-calls, noinline in the sources) and export their functions (-rdynamic,
# from PROG_CUDA_LIBS) so call stacks name them. libreport_stacks.so holds the stack collector and
# symbolizer for report_stack_bench, in a module of their own as they are in libstepprof.so.

PROGRAMS_REPORTS := $(addprefix $(PROG_OUT)/,report_stacks report_findings report_stack_bench libreport_stacks.so)
REPORT_PROG_CFLAGS := $(PROG_CFLAGS) -fno-optimize-sibling-calls

$(PROG_OUT)/report_stacks: $(PROG_SRC)/report_stacks.c $(PROG_DEPS) $(PROG_SRC)/reports.mk
	@mkdir -p $(@D)
	$(CC) $(REPORT_PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)

$(PROG_OUT)/report_findings: $(PROG_SRC)/report_findings.c $(PROG_DEPS) $(PROG_SRC)/reports.mk
	@mkdir -p $(@D)
	$(CC) $(REPORT_PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)

REPORT_STACK_SRCS := collectors/stacks.c collectors/pystack.c collectors/pyname.c collectors/events.c collectors/prefault.c collectors/threads.c collectors/clock.c collectors/strings.c collectors/strings_log.c collectors/kernels.c collectors/log.c exporters/stacks_sym.c exporters/symtab.c exporters/report_buf.c \
                     exporters/jsonw.c exporters/gz.c
$(PROG_OUT)/libreport_stacks.so: $(REPORT_STACK_SRCS) $(wildcard collectors/*.h exporters/*.h) $(PROG_SRC)/reports.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -shared -o $@ $(REPORT_STACK_SRCS) -ldl -lpthread

$(PROG_OUT)/report_stack_bench: $(PROG_SRC)/report_stack_bench.c $(PROG_OUT)/libreport_stacks.so $(PROG_SRC)/reports.mk
	@mkdir -p $(@D)
	$(CC) $(REPORT_PROG_CFLAGS) -rdynamic -o $@ $< -L$(PROG_OUT) -lreport_stacks -Wl,-rpath,'$$ORIGIN'

# pystack_bench embeds Python (make bench's Python stack lines): built when python3-config says how.
PYTHON_EMBED := $(shell python3-config --embed --ldflags 2>/dev/null)
ifneq ($(PYTHON_EMBED),)
PROGRAMS_REPORTS += $(PROG_OUT)/pystack_bench
$(PROG_OUT)/pystack_bench: $(PROG_SRC)/pystack_bench.c $(PROG_OUT)/libreport_stacks.so $(PROG_SRC)/reports.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(shell python3-config --includes) -o $@ $< -L$(PROG_OUT) -lreport_stacks \
	    -Wl,-rpath,'$$ORIGIN' $(PYTHON_EMBED)
endif
