# tests/programs/loading.mk — the programs of tests/test_loading.py: every way a process can load CUDA
# and stepprof (RTLD_LOCAL plugins, libraries loaded late, dlopen of libstepprof itself).
#
# Included by the top Makefile (BUILD, CUDA_HOME, CC, CFLAGS_COMMON). Defines PROGRAMS_LOAD. Names
# start with LOAD_. The plugin links NVIDIA's libcudart with a RUNPATH, like programs.mk's programs, so
# LD_LIBRARY_PATH=build/fakecuda swaps in the stand-in.
#
#   libcudaplugin.so   links libcudart; dlopen'ed RTLD_LOCAL by plugin_host
#   plugin_host        does not link CUDA; loads the plugin (modes local, late, reopen)
#   dlopen_lib         dlopens a library given on its command line (libstepprof.so)

LOAD_SRC := tests/programs
LOAD_OUT := $(BUILD)/programs
LOAD_CFLAGS := $(CFLAGS_COMMON) -I$(LOAD_SRC) -isystem $(CUDA_HOME)/include
LOAD_CUDA := -L$(CUDA_HOME)/lib64 -Wl,--enable-new-dtags,-rpath,$(CUDA_HOME)/lib64 -lcudart

PROGRAMS_LOAD := $(addprefix $(LOAD_OUT)/,libcudaplugin.so plugin_host dlopen_lib)

$(LOAD_OUT)/libcudaplugin.so: $(LOAD_SRC)/libcudaplugin.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -shared -fvisibility=hidden -o $@ $< $(LOAD_CUDA)

$(LOAD_OUT)/plugin_host $(LOAD_OUT)/dlopen_lib: $(LOAD_OUT)/%: $(LOAD_SRC)/%.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -o $@ $< -ldl

# Plugins, each with its own runtime copy (libcopyplugin.c; plugin_host copies): libcopy_a.so links
# libcudart.so.13, libcopy_b.so (and libcopy_c.so, which registers no kernel) copies/libcudart-b.so.13,
# the stand-in linked again under another soname (as auditwheel renames a wheel's libcudart; same symbol
# versions), found through $ORIGIN.
LOAD_COPY_B := $(LOAD_OUT)/copies/libcudart-b.so.13
PROGRAMS_LOAD += $(addprefix $(LOAD_OUT)/,libcopy_a.so libcopy_b.so libcopy_c.so)
$(LOAD_COPY_B): $(FAKECUDA_OBJS) $(FAKECUDA_DIR)/fakecuda.map
	@mkdir -p $(@D)
	$(CC) $(FAKECUDA_CFLAGS) -shared -Wl,-soname,libcudart-b.so.13 \
	  -Wl,--version-script=$(FAKECUDA_DIR)/fakecuda.map -Wl,-z,defs -o $@ $(FAKECUDA_OBJS) -ldl -lpthread
$(LOAD_OUT)/libcopy_a.so: $(LOAD_SRC)/libcopyplugin.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -DCOPY_TAG=a -shared -fvisibility=hidden -o $@ $< $(LOAD_CUDA) -ldl
$(LOAD_OUT)/libcopy_c.so: COPY_FLAGS := -DCOPY_TAG=c -DCOPY_NOREG
$(LOAD_OUT)/libcopy_b.so: COPY_FLAGS := -DCOPY_TAG=b
$(LOAD_OUT)/libcopy_b.so $(LOAD_OUT)/libcopy_c.so: $(LOAD_SRC)/libcopyplugin.c $(LOAD_SRC)/loading.mk $(LOAD_COPY_B)
	$(CC) $(LOAD_CFLAGS) $(COPY_FLAGS) -shared -fvisibility=hidden -o $@ $< -L$(dir $(LOAD_COPY_B)) \
	  -l:libcudart-b.so.13 -Wl,--enable-new-dtags,-rpath,'$$ORIGIN/copies' -ldl

# The driver API programs (drv_work.c; tests/test_driver.py), on the libcuda.so.1 stand-in. Linking uses
# the toolkit's stub libcuda.so; at run time LD_LIBRARY_PATH=build/fakecuda supplies libcuda.so.1.
#   drv_linked      links libcuda (modes direct, proc, dlopen)
#   drv_static      does not link libcuda: dlopen + cuGetProcAddress only, as static cudart
#   libdrvblas.so   links libcuda; plugin_host drv dlopens it RTLD_LOCAL (cuBLAS-style launches)
#   drv_reload      links libcuda: a module unloaded, another loaded (drv_reload.c)
#   drv_linked_pt, drv_static_pt   the first two built with -DCUDA_API_PER_THREAD_DEFAULT_STREAM
#   drv_versions    does not link libcuda: cuCtxSynchronize / cuCtxGetDevice asked at 13000 and 12080
LOAD_DRV := -L$(CUDA_HOME)/lib64/stubs -lcuda -ldl
PROGRAMS_LOAD += $(addprefix $(LOAD_OUT)/,drv_linked drv_static libdrvblas.so drv_reload drv_linked_pt drv_static_pt \
                   drv_versions)
$(LOAD_OUT)/drv_linked_pt $(LOAD_OUT)/drv_static_pt: LOAD_DRV_PT := -DCUDA_API_PER_THREAD_DEFAULT_STREAM
$(LOAD_OUT)/drv_reload: $(LOAD_SRC)/drv_reload.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -o $@ $< $(LOAD_DRV)
$(LOAD_OUT)/drv_linked $(LOAD_OUT)/drv_linked_pt: $(LOAD_SRC)/drv_work.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) $(LOAD_DRV_PT) -DDRV_MAIN -DDRV_LINKED -o $@ $< $(LOAD_DRV)
$(LOAD_OUT)/drv_static $(LOAD_OUT)/drv_static_pt: $(LOAD_SRC)/drv_work.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) $(LOAD_DRV_PT) -DDRV_MAIN -o $@ $< -ldl
$(LOAD_OUT)/drv_versions: $(LOAD_SRC)/drv_versions.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -o $@ $< -ldl
$(LOAD_OUT)/libdrvblas.so: $(LOAD_SRC)/drv_work.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -DDRV_LINKED -shared -fvisibility=hidden -o $@ $< $(LOAD_DRV)

# drv_copies (drv_copies.c; tests/test_driver_copies.py): the driver's copies, sets, host and pool
# allocations, event syncs, stream waits and host functions; drv_copies_pt is its per-thread build.
PROGRAMS_LOAD += $(addprefix $(LOAD_OUT)/,drv_copies drv_copies_pt)
$(LOAD_OUT)/drv_copies_pt: LOAD_DRV_PT := -DCUDA_API_PER_THREAD_DEFAULT_STREAM
$(LOAD_OUT)/drv_copies $(LOAD_OUT)/drv_copies_pt: $(LOAD_SRC)/drv_copies.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) $(LOAD_DRV_PT) -o $@ $< $(LOAD_DRV)

# dlsym(RTLD_NEXT) and dlsym(RTLD_DEFAULT) through stepprof's dlsym (dlsym_next.c): libnext_a.so,
# libnext_b.so, dlsym_next, and libdefault_user.so (links libdefault_dep.so), which it loads RTLD_LOCAL.
PROGRAMS_LOAD += $(addprefix $(LOAD_OUT)/,libnext_a.so libnext_b.so dlsym_next libdefault_dep.so libdefault_user.so)
$(LOAD_OUT)/libdefault_dep.so: $(LOAD_SRC)/dlsym_next.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -DDLSYM_DEP -shared -o $@ $<
$(LOAD_OUT)/libdefault_user.so: $(LOAD_SRC)/dlsym_next.c $(LOAD_OUT)/libdefault_dep.so
	$(CC) $(LOAD_CFLAGS) -DDLSYM_USER -shared -o $@ $< -L$(LOAD_OUT) -Wl,--no-as-needed -ldefault_dep -Wl,--as-needed \
	  -Wl,--enable-new-dtags,-rpath,'$$ORIGIN' -ldl
$(LOAD_OUT)/libnext_a.so: $(LOAD_SRC)/dlsym_next.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -DDLSYM_A -shared -o $@ $< -ldl
$(LOAD_OUT)/libnext_b.so: $(LOAD_SRC)/dlsym_next.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -DDLSYM_B -shared -o $@ $<
$(LOAD_OUT)/dlsym_next: $(LOAD_SRC)/dlsym_next.c $(LOAD_OUT)/libnext_a.so $(LOAD_OUT)/libnext_b.so
	$(CC) $(LOAD_CFLAGS) -o $@ $< -L$(LOAD_OUT) -Wl,--no-as-needed -lnext_a -lnext_b -Wl,--as-needed -Wl,--enable-new-dtags,-rpath,'$$ORIGIN' -ldl

# drv_bysym: an nvcc kernel launched through the driver (cudaGetFuncBySymbol + cuLaunchKernel); needs nvcc.
LOAD_NVCC := $(CUDA_HOME)/bin/nvcc
PROGRAMS_LOAD += $(if $(wildcard $(LOAD_NVCC)),$(LOAD_OUT)/drv_bysym)
$(LOAD_OUT)/drv_bysym: $(LOAD_SRC)/drv_bysym.cu $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(LOAD_NVCC) -O2 -cudart shared -Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker $(CUDA_HOME)/lib64 \
	  -o $@ $< -L$(CUDA_HOME)/lib64/stubs -lcuda

# dlopen_err: dlerror() after a failing dlopen while a function: marker arms stepprof's dlopen. Its
# RUNPATH dlerr/ holds libdlerr_broken.so, linked against libdlerr_missing.so, which is then removed.
PROGRAMS_LOAD += $(addprefix $(LOAD_OUT)/,dlopen_err dlerr/libdlerr_broken.so)
$(LOAD_OUT)/dlerr/libdlerr_broken.so: $(LOAD_SRC)/dlerr_lib.c $(LOAD_SRC)/loading.mk
	@mkdir -p $(@D)
	$(CC) $(LOAD_CFLAGS) -DDLERR_MISSING -shared -o $(@D)/libdlerr_missing.so $<
	$(CC) $(LOAD_CFLAGS) -shared -o $@ $< -L$(@D) -Wl,--no-as-needed -ldlerr_missing
	rm -f $(@D)/libdlerr_missing.so
$(LOAD_OUT)/dlopen_err: $(LOAD_SRC)/dlopen_err.c $(LOAD_OUT)/dlerr/libdlerr_broken.so
	$(CC) $(LOAD_CFLAGS) -o $@ $< $(LOAD_CUDA) -Wl,-rpath,'$$ORIGIN/dlerr' -ldl

.PHONY: programs-load
programs-load: $(PROGRAMS_LOAD)
