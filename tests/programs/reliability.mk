# tests/programs/reliability.mk — build rules for the target programs of the reliability tests
# (tests/test_reliability.py, docs/reliability.md): fork/exec, threads, signals, every end of a
# process, output files.
#
# Included by the top Makefile after programs.mk, whose PROG_CFLAGS, PROG_CUDA_LIBS and PROG_DEPS it
# reuses. Defines PROGRAMS_REL (cc, g++ and the CUDA headers/libcudart only). Everything lands in
# $(BUILD)/programs/. Names start with REL_.

REL_SRC := tests/programs
REL_OUT := $(BUILD)/programs
CXX ?= g++

PROGRAMS_REL := $(addprefix $(REL_OUT)/,rel_ends rel_throw rel_fork rel_exec rel_threads rel_sigcuda rel_outfile \
                rel_exitrace) $(REL_OUT)/librel_nonode.so

$(REL_OUT)/rel_ends $(REL_OUT)/rel_fork $(REL_OUT)/rel_exec $(REL_OUT)/rel_threads $(REL_OUT)/rel_sigcuda \
$(REL_OUT)/rel_exitrace: \
$(REL_OUT)/%: $(REL_SRC)/%.c $(PROG_DEPS) $(REL_SRC)/reliability.mk
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -pthread -o $@ $< $(PROG_CUDA_LIBS)

# C++: an uncaught exception must end in std::terminate -> abort(), as it does for PyTorch.
$(REL_OUT)/rel_throw: $(REL_SRC)/rel_throw.cc $(REL_SRC)/reliability.mk
	@mkdir -p $(@D)
	$(CXX) -O2 -g -Wall -Wextra -Werror -isystem $(CUDA_HOME)/include -o $@ $< $(PROG_CUDA_LIBS)

# A shim preloaded in front of the library: the exporter's queue node cannot be allocated.
$(REL_OUT)/librel_nonode.so: $(REL_SRC)/rel_nonode.c exporters/export.h $(REL_SRC)/reliability.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -shared -fPIC -o $@ $< -ldl

# No CUDA: it links the output-file code of the library directly to plant files at chosen names.
$(REL_OUT)/rel_outfile: $(REL_SRC)/rel_outfile.c exporters/outfile.c collectors/log.c \
                        $(wildcard collectors/*.h exporters/*.h) $(REL_SRC)/reliability.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -pthread -o $@ $(filter %.c,$^)

.PHONY: programs-rel
programs-rel: $(PROGRAMS_REL)
