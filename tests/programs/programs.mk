# tests/programs/programs.mk — build rules for the target programs stepprof is tested on.
#
# Included by the top Makefile, which provides BUILD, CUDA_HOME, NVCC, CC and CFLAGS_COMMON.
# Defines PROGRAMS_C (need only cc and the CUDA headers/libcudart) and PROGRAMS_NVCC (need nvcc),
# so the top Makefile can build the nvcc ones only where nvcc exists. Everything lands in
# $(BUILD)/programs/. Names here start with PROG_ to stay out of the top Makefile's way.
#
# CUDA programs link NVIDIA's libcudart.so.13 with a RUNPATH to $(CUDA_HOME)/lib64: run plainly they
# get the real runtime (with no driver every call fails, and they must still finish), and
# LD_LIBRARY_PATH=build/fakecuda, which the loader searches before a RUNPATH, swaps in the CPU
# stand-in. C programs are linked -rdynamic so the functions they pass to cudaLaunchKernel have
# dynamic symbols a stand-in runtime or the profiler can name with dladdr().

PROG_SRC := tests/programs
PROG_OUT := $(BUILD)/programs

PROGRAMS_C := $(addprefix $(PROG_OUT)/,train_c calls_all calls_all_ptsz threads nocuda exitcode launch_bench \
                                      cupti_queries sync_devices)
PROGRAMS_NVCC := $(addprefix $(PROG_OUT)/,train train_ptsz train_static)

# -isystem: the CUDA and NVTX headers are not ours to keep free of -Wextra warnings.
PROG_CFLAGS := $(CFLAGS_COMMON) -I$(PROG_SRC) -isystem $(CUDA_HOME)/include
PROG_CUDA_LIBS := -rdynamic -L$(CUDA_HOME)/lib64 -Wl,--enable-new-dtags,-rpath,$(CUDA_HOME)/lib64 -lcudart
PROG_NVCCFLAGS := -O2 -g -std=c++17 -I$(PROG_SRC) -Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker $(CUDA_HOME)/lib64
PROG_DEPS := $(PROG_SRC)/cuda_check.h $(PROG_SRC)/programs.mk

$(PROG_OUT)/train_c: $(PROG_SRC)/train_c.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS) -lm -ldl

$(PROG_OUT)/cupti_queries: $(PROG_SRC)/cupti_queries.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)

$(PROG_OUT)/sync_devices: $(PROG_SRC)/sync_devices.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)

$(PROG_OUT)/calls_all: $(PROG_SRC)/calls_all.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)

# Same source: the headers rename the calls to their _ptsz/_ptds symbols, and so do the names the
# program writes into its JSON.
$(PROG_OUT)/calls_all_ptsz: $(PROG_SRC)/calls_all.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1 -o $@ $< $(PROG_CUDA_LIBS)

$(PROG_OUT)/threads: $(PROG_SRC)/threads.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -pthread -o $@ $< $(PROG_CUDA_LIBS)

$(PROG_OUT)/exitcode: $(PROG_SRC)/exitcode.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)

$(PROG_OUT)/launch_bench: $(PROG_SRC)/launch_bench.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS)

# Deliberately not linked to libcudart: stepprof must stay inert in processes without CUDA.
$(PROG_OUT)/nocuda: $(PROG_SRC)/nocuda.c $(PROG_SRC)/programs.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $<

# train: shared cudart, what LD_PRELOAD interposition can see (and what PyTorch does).
$(PROG_OUT)/train: $(PROG_SRC)/train.cu $(PROG_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(PROG_NVCCFLAGS) -cudart shared -o $@ $<

# train_ptsz: per-thread default stream, so launches call __cudaLaunchKernel_ptsz.
$(PROG_OUT)/train_ptsz: $(PROG_SRC)/train.cu $(PROG_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(PROG_NVCCFLAGS) -cudart shared --default-stream per-thread -o $@ $<

# train_static: nvcc's default static cudart; no runtime symbol is visible to LD_PRELOAD.
$(PROG_OUT)/train_static: $(PROG_SRC)/train.cu $(PROG_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(PROG_NVCCFLAGS) -o $@ $<

.PHONY: programs-c programs-nvcc
programs-c: $(PROGRAMS_C)
programs-nvcc: $(PROGRAMS_NVCC)

# Step-marker targets that need a program written for them (NVTX domains, cudaProfilerStart/Stop,
# signals); see the header of markers_misc.c.
PROGRAMS_C += $(PROG_OUT)/markers_misc
$(PROG_OUT)/markers_misc: $(PROG_SRC)/markers_misc.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS) -ldl

# short_threads: issue 15, many short-lived CUDA threads (chunks retired at thread exit).
PROGRAMS_C += $(PROG_OUT)/short_threads
$(PROG_OUT)/short_threads: $(PROG_SRC)/short_threads.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -pthread -o $@ $< $(PROG_CUDA_LIBS)
