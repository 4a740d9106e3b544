# tests/programs/rel_bounds.mk — build rule for the target of tests/test_reliability_bounds.py
# (issue 14 items 2, 3, 5, 6: bounded memory, config file guards, early NVTX ranges, UTF-8 in the
# summary). Included by the top Makefile after programs.mk, whose PROG_CFLAGS, PROG_CUDA_LIBS and
# PROG_DEPS it reuses; adds its program to PROGRAMS_REL so `make programs` builds it.

PROGRAMS_REL += $(BUILD)/programs/rel_bounds

$(BUILD)/programs/rel_bounds: tests/programs/rel_bounds.c $(PROG_DEPS) tests/programs/rel_bounds.mk
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS) -lpthread
