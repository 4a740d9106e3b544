# tests/programs/markers.mk — build rules for the target programs of the `function:` step marker
# tests (tests/test_marker_function.py).
#
# Included by the top Makefile, which provides BUILD, CUDA_HOME, CC and CFLAGS_COMMON. Defines
# PROGRAMS_MARKERS (cc and the CUDA headers/libcudart only). Everything lands in $(BUILD)/programs/;
# the programs find the two test libraries there through RUNPATH $ORIGIN. Names start with MARK_.
#
#   libmarkstep.so    exports markstep_train_step, the marked function
#   libmarkcaller.so  a plugin calling it through its own PLT (loaded by marker_dlopen with dlopen)
#   marker_lib        calls it through its PLT each step
#   marker_dlopen     calls it through libmarkcaller.so, dlopen()ed after CUDA started
#   marker_static     marks steps with do_train_step, a static function (-fno-inline, not stripped)

MARK_SRC := tests/programs
MARK_OUT := $(BUILD)/programs

PROGRAMS_MARKERS := $(addprefix $(MARK_OUT)/,libmarkstep.so libmarkcaller.so marker_lib marker_dlopen \
                    marker_static)

MARK_CFLAGS := $(CFLAGS_COMMON) -I$(MARK_SRC) -isystem $(CUDA_HOME)/include
MARK_LIBS := -rdynamic -L$(MARK_OUT) -L$(CUDA_HOME)/lib64 \
             -Wl,--enable-new-dtags,-rpath,'$$ORIGIN',-rpath,$(CUDA_HOME)/lib64 -lcudart
MARK_DEPS := $(MARK_SRC)/marker_common.c $(MARK_SRC)/cuda_check.h $(MARK_SRC)/markers.mk

$(MARK_OUT)/libmarkstep.so: $(MARK_SRC)/libmarkstep.c $(MARK_SRC)/markers.mk
	@mkdir -p $(@D)
	$(CC) $(MARK_CFLAGS) -shared -o $@ $<

$(MARK_OUT)/libmarkcaller.so: $(MARK_SRC)/libmarkcaller.c $(MARK_OUT)/libmarkstep.so $(MARK_SRC)/markers.mk
	@mkdir -p $(@D)
	$(CC) $(MARK_CFLAGS) -shared -o $@ $< -L$(MARK_OUT) -lmarkstep -Wl,--enable-new-dtags,-rpath,'$$ORIGIN'

$(MARK_OUT)/marker_lib: $(MARK_SRC)/marker_lib.c $(MARK_DEPS) $(MARK_OUT)/libmarkstep.so
	$(CC) $(MARK_CFLAGS) -o $@ $< $(MARK_SRC)/marker_common.c -lmarkstep $(MARK_LIBS)

# libmarkcaller.so is only dlopen()ed, never linked; it is a prerequisite so the program is complete.
# -ldl: glibc before 2.34 keeps dlopen in libdl.
$(MARK_OUT)/marker_dlopen: $(MARK_SRC)/marker_dlopen.c $(MARK_DEPS) $(MARK_OUT)/libmarkstep.so \
                           $(MARK_OUT)/libmarkcaller.so
	$(CC) $(MARK_CFLAGS) -o $@ $< $(MARK_SRC)/marker_common.c -lmarkstep $(MARK_LIBS) -ldl

$(MARK_OUT)/marker_static: $(MARK_SRC)/marker_static.c $(MARK_DEPS)
	@mkdir -p $(@D)
	$(CC) $(MARK_CFLAGS) -fno-inline -o $@ $< $(MARK_SRC)/marker_common.c $(MARK_LIBS)

.PHONY: programs-markers
programs-markers: $(PROGRAMS_MARKERS)
