/*
 * dlopen_err.c — what dlerror() says after a dlopen that fails, when a function: marker has armed
 * stepprof's dlopen (libraries loaded later get their call sites hooked). Links libcudart (its first
 * call activates stepprof and so installs the marker) and has a RUNPATH to dlerr/ beside it, where
 * libdlerr_broken.so needs libdlerr_missing.so, which is not there (loading.mk deletes it).
 *
 * Usage: dlopen_err   prints `malloc=RESULT`, then `handle=nil|ok error=MESSAGE` for
 *                     dlopen("libdlerr_broken.so"): glibc found the file in the RUNPATH directory and
 *                     says why it could not load it (the missing dependency); stepprof must neither
 *                     change that message nor look for the file anywhere else. Exit 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

int main(void)
{
    void *p = NULL;
    printf("malloc=%d\n", (int)cudaMalloc(&p, 64));
    void *h = dlopen("libdlerr_broken.so", RTLD_NOW);
    const char *e = dlerror();
    printf("handle=%s error=%s\n", h ? "ok" : "nil", e ? e : "(none)");
    return 0;
}
