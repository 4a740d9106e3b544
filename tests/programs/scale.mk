# tests/programs/scale.mk — the export benchmark's program (scripts/bench_export.py,
# tests/test_scale.py). Included by the top Makefile after programs.mk.
PROGRAMS_SCALE := $(PROG_OUT)/export_bench
$(PROG_OUT)/export_bench: $(PROG_SRC)/export_bench.c $(PROG_DEPS) $(PROG_SRC)/scale.mk
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)
