# tests/fakecuda/fakecuda.mk - builds the fakecuda CUDA-runtime stand-in, $(FAKECUDA_LIB).
#
# Included by the top-level Makefile, which provides BUILD, CUDA_HOME, CC and CFLAGS_COMMON.  Run
# programs on it with LD_LIBRARY_PATH=$(BUILD)/fakecuda.  When nvcc is available, abi_check.cu first
# proves that the nvcc-internal prototypes in fakecuda_abi.h match the toolkit's own declarations.
# The fragment leaves the including Makefile's default goal alone.

fakecuda_saved_goal := $(.DEFAULT_GOAL)

FAKECUDA_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
FAKECUDA_OUT := $(BUILD)/fakecuda
FAKECUDA_LIB := $(FAKECUDA_OUT)/libcudart.so.13
FAKECUDA_SRCS := $(wildcard $(FAKECUDA_DIR)/fakecuda_*.c)
FAKECUDA_OBJS := $(patsubst $(FAKECUDA_DIR)/%.c,$(FAKECUDA_OUT)/%.o,$(FAKECUDA_SRCS))
FAKECUDA_CFLAGS := $(CFLAGS_COMMON) -fvisibility=hidden -I$(CUDA_HOME)/include
FAKECUDA_NVCC := $(CUDA_HOME)/bin/nvcc

ifneq ($(wildcard $(FAKECUDA_NVCC)),)
FAKECUDA_ABI_OK := $(FAKECUDA_OUT)/abi_check.ok
$(FAKECUDA_ABI_OK): $(FAKECUDA_DIR)/abi_check.cu $(FAKECUDA_DIR)/fakecuda_abi.h
	@mkdir -p $(@D)
	$(FAKECUDA_NVCC) -c $< -o $(@D)/abi_check.o
	@touch $@

# `make fakecuda-check`: the self-test, built like users build (-cudart shared), in both stream modes.
FAKECUDA_SELFTESTS := $(FAKECUDA_OUT)/selftest $(FAKECUDA_OUT)/selftest_ptds
$(FAKECUDA_OUT)/selftest: FAKECUDA_STREAM_MODE :=
$(FAKECUDA_OUT)/selftest_ptds: FAKECUDA_STREAM_MODE := --default-stream per-thread
$(FAKECUDA_SELFTESTS): $(FAKECUDA_DIR)/selftest.cu $(FAKECUDA_DIR)/fakecuda.h
	@mkdir -p $(@D)
	$(FAKECUDA_NVCC) -cudart shared $(FAKECUDA_STREAM_MODE) -I$(FAKECUDA_DIR) $< -o $@

.PHONY: fakecuda-check
fakecuda-check: $(FAKECUDA_LIB) $(FAKECUDA_SELFTESTS)
	for t in $(FAKECUDA_SELFTESTS); do LD_LIBRARY_PATH=$(FAKECUDA_OUT) $$t || exit 1; done
endif

$(FAKECUDA_OBJS): $(FAKECUDA_OUT)/%.o: $(FAKECUDA_DIR)/%.c
	@mkdir -p $(@D)
	$(CC) $(FAKECUDA_CFLAGS) -MMD -MP -c $< -o $@

$(FAKECUDA_LIB): $(FAKECUDA_OBJS) $(FAKECUDA_DIR)/fakecuda.map $(FAKECUDA_ABI_OK)
	$(CC) $(FAKECUDA_CFLAGS) -shared -Wl,-soname,libcudart.so.13 \
	  -Wl,--version-script=$(FAKECUDA_DIR)/fakecuda.map -Wl,-z,defs -o $@ $(FAKECUDA_OBJS) -lpthread
	ln -sf libcudart.so.13 $(FAKECUDA_OUT)/libcudart.so

$(FAKECUDA_OUT)/libcudart.so: $(FAKECUDA_LIB)
	ln -sf libcudart.so.13 $@

.PHONY: fakecuda
fakecuda: $(FAKECUDA_LIB) $(FAKECUDA_OUT)/libcudart.so

-include $(FAKECUDA_OBJS:.o=.d)

.DEFAULT_GOAL := $(fakecuda_saved_goal)
