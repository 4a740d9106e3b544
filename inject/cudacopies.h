/* inject/cudacopies.h — a second copy of the CUDA runtime (or driver) in one
 * process: plugins loaded RTLD_LOCAL that each link their own libcudart
 * under another soname (wheels repaired by auditwheel). Bare, each plugin's
 * calls bind to its own copy; stepprof's interposers forward to one real
 * function per name (the first copy), so the calls of a plugin whose copy is
 * another are sent back to that copy, unrecorded (cudacopies.c). */
#ifndef SP_CUDACOPIES_H
#define SP_CUDACOPIES_H

/* Looks for a second copy when objects were loaded or unloaded since the
 * last look (cheap otherwise), and points the GOT slots bound to stepprof's
 * interposers at the definition each object would bind to without stepprof,
 * where that is not the interposers' real function. Says so once per copy.
 * Safe in constructors (inside dlopen) and on any thread; a look another
 * thread is making is not waited for. */
void sp_copies_check(void);

/* What a call to `name` made from the code at `caller` reaches without
 * stepprof, when a second copy is loaded and that is not the interposer's
 * real function; else fallback. For calls that reach stepprof before the
 * caller's GOT can be pointed elsewhere: registrations from constructors
 * inside dlopen, and dlsym(RTLD_DEFAULT) from a plugin. */
void *sp_copies_target(const void *caller, const char *name, void *fallback);

#endif
