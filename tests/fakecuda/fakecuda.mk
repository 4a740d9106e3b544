# tests/fakecuda/fakecuda.mk - builds the fakecuda CUDA-runtime stand-in, $(FAKECUDA_LIB), and the
# CUPTI and driver stand-ins beside it, $(FAKECUPTI_LIB) (libcupti.so.13) and $(FAKEDRIVER_LIB)
# (libcuda.so.1); building $(FAKECUDA_LIB) builds them too.
#
# Included by the top-level Makefile, which provides BUILD, CUDA_HOME, CC and CFLAGS_COMMON.  Run
# programs on it with LD_LIBRARY_PATH=$(BUILD)/fakecuda.  When nvcc is available, abi_check.cu first
# proves that the nvcc-internal prototypes in fakecuda_abi.h match the toolkit's own declarations.
# Targets: fakecuda, fakecuda-check (needs nvcc), fakecupti-check (needs only a C compiler).
# The fragment leaves the including Makefile's default goal alone.

fakecuda_saved_goal := $(.DEFAULT_GOAL)

FAKECUDA_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
FAKECUDA_OUT := $(BUILD)/fakecuda
FAKECUDA_LIB := $(FAKECUDA_OUT)/libcudart.so.13
FAKECUPTI_LIB := $(FAKECUDA_OUT)/libcupti.so.13
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

# Order-only: whoever builds the runtime gets CUPTI and the driver too, without relinking one when another
# changes.
FAKEDRIVER_LIB := $(FAKECUDA_OUT)/libcuda.so.1
$(FAKECUDA_LIB): $(FAKECUDA_OBJS) $(FAKECUDA_DIR)/fakecuda.map $(FAKECUDA_ABI_OK) | $(FAKECUPTI_LIB) $(FAKEDRIVER_LIB)
	$(CC) $(FAKECUDA_CFLAGS) -shared -Wl,-soname,libcudart.so.13 \
	  -Wl,--version-script=$(FAKECUDA_DIR)/fakecuda.map -Wl,-z,defs -o $@ $(FAKECUDA_OBJS) -ldl -lpthread
	ln -sf libcudart.so.13 $(FAKECUDA_OUT)/libcudart.so

$(FAKECUDA_OUT)/libcudart.so: $(FAKECUDA_LIB)
	ln -sf libcudart.so.13 $@

# ---- fakecupti: libcupti.so.13 over the fakecuda observer (fakecupti_*.c) ----
# fakecupti_gen.h holds the cbid, callback-name and result-name tables, generated from the toolkit's headers.
FAKECUPTI_SRCS := $(wildcard $(FAKECUDA_DIR)/fakecupti_*.c)
FAKECUPTI_OBJS := $(patsubst $(FAKECUDA_DIR)/%.c,$(FAKECUDA_OUT)/%.o,$(FAKECUPTI_SRCS))
FAKECUPTI_GEN := $(FAKECUDA_OUT)/fakecupti_gen.h

$(FAKECUPTI_GEN): $(FAKECUDA_DIR)/fakecupti_gen.sh $(CUDA_HOME)/include/cupti_runtime_cbid.h \
                  $(CUDA_HOME)/include/cupti_driver_cbid.h $(CUDA_HOME)/include/cupti_result.h
	@mkdir -p $(@D)
	sh $< $(CUDA_HOME)/include > $@.tmp && mv $@.tmp $@

$(FAKECUPTI_OBJS): $(FAKECUDA_OUT)/%.o: $(FAKECUDA_DIR)/%.c $(FAKECUPTI_GEN)
	@mkdir -p $(@D)
	$(CC) $(FAKECUDA_CFLAGS) -I$(FAKECUDA_DIR) -I$(FAKECUDA_OUT) -MMD -MP -c $< -o $@

$(FAKECUPTI_LIB): $(FAKECUPTI_OBJS) $(FAKECUDA_DIR)/fakecupti.map
	$(CC) $(FAKECUDA_CFLAGS) -shared -Wl,-soname,libcupti.so.13 \
	  -Wl,--version-script=$(FAKECUDA_DIR)/fakecupti.map -Wl,-z,defs -o $@ $(FAKECUPTI_OBJS) -ldl -lpthread
	ln -sf libcupti.so.13 $(FAKECUDA_OUT)/libcupti.so

# `make fakecupti-check`: cupti_selftest.c (plain C, linked against the fake runtime) drives the CUPTI
# stand-in the way a profiler does; libfakecupti_inject.so is its CUDA_INJECTION64_PATH library.
FAKECUPTI_SELFTEST := $(FAKECUDA_OUT)/cupti_selftest
FAKECUPTI_INJECT := $(FAKECUDA_OUT)/libfakecupti_inject.so

$(FAKECUPTI_INJECT): $(FAKECUDA_DIR)/cupti_inject.c
	@mkdir -p $(@D)
	$(CC) $(FAKECUDA_CFLAGS) -shared -o $@ $< -ldl

$(FAKECUPTI_SELFTEST): $(FAKECUDA_DIR)/cupti_selftest.c $(FAKECUDA_DIR)/cupti_selftest_checks.c \
                       $(FAKECUDA_DIR)/cupti_selftest.h $(FAKECUDA_DIR)/fakecuda.h $(FAKECUDA_LIB)
	$(CC) $(FAKECUDA_CFLAGS) -I$(FAKECUDA_DIR) -o $@ $(filter %.c,$^) -L$(FAKECUDA_OUT) -lcudart -ldl -lpthread

.PHONY: fakecupti-check
fakecupti-check: $(FAKECUPTI_LIB) $(FAKECUPTI_INJECT) $(FAKECUPTI_SELFTEST)
	LD_LIBRARY_PATH=$(FAKECUDA_OUT) CUDA_HOME=$(CUDA_HOME) $(FAKECUPTI_SELFTEST)

.PHONY: fakecuda
fakecuda: $(FAKECUDA_LIB) $(FAKECUDA_OUT)/libcudart.so $(FAKECUPTI_LIB)

# ---- libcuda.so.1: the driver stand-in over the runtime stand-in (fakedriver.c; loads it at run time) ----
FAKEDRIVER_SRCS := $(wildcard $(FAKECUDA_DIR)/fakedriver*.c)
$(FAKEDRIVER_LIB): $(FAKEDRIVER_SRCS) $(FAKECUDA_DIR)/fakedriver_int.h $(FAKECUDA_DIR)/fakecuda.h
	@mkdir -p $(@D)
	$(CC) $(FAKECUDA_CFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs -o $@ $(FAKEDRIVER_SRCS) -ldl -lpthread
	ln -sf libcuda.so.1 $(FAKECUDA_OUT)/libcuda.so
fakecuda: $(FAKEDRIVER_LIB)

-include $(FAKECUDA_OBJS:.o=.d) $(FAKECUPTI_OBJS:.o=.d)

.DEFAULT_GOAL := $(fakecuda_saved_goal)
