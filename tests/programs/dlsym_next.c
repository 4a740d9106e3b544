/*
 * dlsym_next.c — dlsym(RTLD_NEXT) must keep meaning "after the caller" when stepprof interposes dlsym (a cu* name, the
 * kind stepprof looks at).
 * Built three ways from this file (loading.mk): libnext_a.so (DLSYM_A: defines cuProbeNext and next_probe(),
 * which asks dlsym(RTLD_NEXT, "cuProbeNext")), libnext_b.so (DLSYM_B: defines cuProbeNext) and the program
 * dlsym_next (links a, then b). Prints `next=b` when the lookup skipped a's own definition, as glibc does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#if defined(DLSYM_A)
const char *cuProbeNext(void) { return "a"; }
const char *next_probe(void)
{
    const char *(*f)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "cuProbeNext");
    return f ? f() : "none";
}
#elif defined(DLSYM_B)
const char *cuProbeNext(void) { return "b"; }
#else
const char *next_probe(void);
int main(void)
{
    printf("next=%s\n", next_probe());
    return 0;
}
#endif
