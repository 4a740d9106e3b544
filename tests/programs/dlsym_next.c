/*
 * dlsym_next.c — dlsym(RTLD_NEXT) must keep meaning "after the caller" when stepprof interposes dlsym (a cu* name, the
 * kind stepprof looks at).
 * Built three ways from this file (loading.mk): libnext_a.so (DLSYM_A: defines cuProbeNext and next_probe(),
 * which asks dlsym(RTLD_NEXT, "cuProbeNext")), libnext_b.so (DLSYM_B: defines cuProbeNext) and the program
 * dlsym_next (links a, then b). Prints `next=b` when the lookup skipped a's own definition, as glibc does.
 * dlsym(RTLD_DEFAULT) is relative to the caller too (its scope): with a path argument, the program loads
 * that library RTLD_LOCAL, libdefault_user.so (DLSYM_USER: default_probe() asks dlsym(RTLD_DEFAULT,
 * "cuProbeLocal")), which links libdefault_dep.so (DLSYM_DEP: defines it), and prints `default=dep` when
 * the lookup searched the library's own dependencies, as glibc does.
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
#elif defined(DLSYM_DEP)
const char *cuProbeLocal(void) { return "dep"; }
#elif defined(DLSYM_USER)
const char *default_probe(void)
{
    const char *(*f)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "cuProbeLocal");
    return f ? f() : "none";
}
#else
const char *next_probe(void);
int main(int argc, char **argv)
{
    printf("next=%s\n", next_probe());
    if (argc > 1) {   /* the library that links libdefault_dep.so, loaded RTLD_LOCAL */
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        const char *(*probe)(void) = h ? (const char *(*)(void))dlsym(h, "default_probe") : NULL;
        printf("default=%s\n", probe ? probe() : dlerror());
    }
    return 0;
}
#endif
