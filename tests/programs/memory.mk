# tests/programs/memory.mk — build rules for the target programs of the profile_memory tests
# (tests/test_memory.py) and of the allocation benchmark (scripts/bench.sh).
#
# Included by the top Makefile, which provides BUILD, CUDA_HOME, CC and CFLAGS_COMMON. Defines
# PROGRAMS_MEM (cc and the CUDA headers/libcudart only). Everything lands in $(BUILD)/programs/.
# Names start with MEM_.
#
#   mem_pattern         a known allocation pattern: leaks, bad frees, async and pinned memory
#   mem_oom             runs out of memory under FAKECUDA_MEM_LIMIT and recovers
#   mem_devices         two devices, two threads, cudaSetDevice
#   libmemdrv_stub.so   the driver allocation calls, without libcuda (finds them via RUNPATH $ORIGIN)
#   mem_driver          driver API allocations, virtual memory and an out-of-memory, on the stub
#   mem_bench           ns per cudaMalloc + cudaFree pair

MEM_SRC := tests/programs
MEM_OUT := $(BUILD)/programs

PROGRAMS_MEM := $(addprefix $(MEM_OUT)/,mem_pattern mem_oom mem_devices libmemdrv_stub.so mem_driver mem_bench)

MEM_CFLAGS := $(CFLAGS_COMMON) -I$(MEM_SRC) -isystem $(CUDA_HOME)/include
# -rdynamic: the memory report names leak sites with dladdr; -ldl: glibc before 2.34 keeps dlopen there.
MEM_LIBS := -rdynamic -L$(CUDA_HOME)/lib64 -Wl,--enable-new-dtags,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl
MEM_DEPS := $(MEM_SRC)/cuda_check.h $(MEM_SRC)/memory.mk

$(addprefix $(MEM_OUT)/,mem_pattern mem_oom mem_devices mem_bench): $(MEM_OUT)/%: $(MEM_SRC)/%.c $(MEM_DEPS)
	@mkdir -p $(@D)
	$(CC) $(MEM_CFLAGS) -pthread -o $@ $< $(MEM_LIBS)

$(MEM_OUT)/libmemdrv_stub.so: $(MEM_SRC)/mem_drvstub.c $(MEM_SRC)/memory.mk
	@mkdir -p $(@D)
	$(CC) $(MEM_CFLAGS) -shared -o $@ $<

$(MEM_OUT)/mem_driver: $(MEM_SRC)/mem_driver.c $(MEM_OUT)/libmemdrv_stub.so $(MEM_SRC)/memory.mk
	$(CC) $(MEM_CFLAGS) -o $@ $< -L$(MEM_OUT) -lmemdrv_stub -Wl,--enable-new-dtags,-rpath,'$$ORIGIN'

.PHONY: programs-mem
programs-mem: $(PROGRAMS_MEM)
