# tests/programs/scale.mk — the export benchmark's program (scripts/bench_export.py,
# tests/test_scale.py), the long overlapping-NVTX-ranges run (tests/test_scale.py) and the NVTX push+pop benchmark's (scripts/bench.sh). Included by the top Makefile after programs.mk.
PROGRAMS_SCALE := $(PROG_OUT)/export_bench $(PROG_OUT)/nvtx_bench $(PROG_OUT)/nvtx_overlap
# libstdc++ linked in, as in every program nvcc builds (its host linker is g++: train, train_ptsz and
# train_static here) and in PyTorch: stepprof's demangler then finds __cxa_demangle in the process, as it
# does in real use, instead of loading libstdc++ in the first export (1.5 MB of RSS there).
$(PROG_OUT)/export_bench: $(PROG_SRC)/export_bench.c $(PROG_DEPS) $(PROG_SRC)/scale.mk
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS) -Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state
$(PROG_OUT)/nvtx_bench: $(PROG_SRC)/nvtx_bench.c $(PROG_DEPS) $(PROG_SRC)/scale.mk
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)
$(PROG_OUT)/nvtx_overlap: $(PROG_SRC)/nvtx_overlap.c $(PROG_DEPS) $(PROG_SRC)/scale.mk
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)
