/*
 * plugin_host.c — a host that does not link CUDA and reaches it only through a plugin it dlopens with
 * RTLD_LOCAL (libcudaplugin.so beside it), the way frameworks load their CUDA backends.
 *
 * Usage: plugin_host local   dlopen the plugin, run it twice.
 *        plugin_host late    first take cudaMalloc through a weak reference (none bare; under LD_PRELOAD
 *                            stepprof's interposer, whose real function is not loaded yet) and call it,
 *                            printing `early=RESULT` (or `early=none`); then load the plugin and run it;
 *                            then call the same pointer again: `late=RESULT` must be what the runtime
 *                            now says, not a failure remembered from before.
 *        plugin_host probe   probe for CUDA as programs do, with dlsym(RTLD_DEFAULT) and dlsym on
 *                            dlopen(NULL), before and after loading the plugin (whose libcudart stays
 *                            outside the global scope), printing `NAME=found|absent` and whether
 *                            dlerror() says why; in between the plugin probes from inside
 *                            (plugin_probe: found in its own dependencies) and calls what it found.
 *        plugin_host reopen  dlopen the plugin RTLD_GLOBAL (its libcudart joins the global scope), run it,
 *                            dlclose it, three times: each round's calls reach the runtime loaded now,
 *                            never one unloaded with a plugin closed before.
 *        plugin_host copies  dlopen libcopy_a.so and libcopy_b.so RTLD_LOCAL, each with its own copy of
 *                            the runtime (libcopyplugin.c), and run A, B, A. With `late`: run A, then
 *                            load libcopy_b.so (its kernel registered from its constructor: the second
 *                            copy is known) and libcopy_c.so (B's copy, no kernel registered) and run
 *                            C, A.
 *        plugin_host drv     dlopen libdrvblas.so (links libcuda.so.1, like cuBLAS) and run
 *                            drv_work("direct") in it: driver launches from a library the program did
 *                            not link.
 * Exit 0; 1 when the plugin cannot be loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);

/* Weak: NULL unless something in the global scope defines them (bare, nothing does here). */
extern int cudaMalloc(void **, size_t) __attribute__((weak));
extern int cudaFree(void *) __attribute__((weak));

static void probe(const char *when)
{
    static const char *const names[] = {"cudaMalloc", "cudaLaunchKernel", "cudaMemcpy", "cudaLaunchKernel_ptsz",
                                        "cuLaunchKernel", "cuMemAlloc_v2", "cuGetProcAddress_v2", "cudaGetDeviceCount"};
    void *self = dlopen(NULL, RTLD_NOW);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        for (int h = 0; h < 2; h++) {
            dlerror();
            void *p = dlsym(h ? self : RTLD_DEFAULT, names[i]);
            const char *err = dlerror();
            printf("%s %s %s=%s%s\n", when, h ? "self" : "default", names[i], p ? "found" : "absent",
                   !p && !err ? " (no dlerror)" : "");
        }
    }
}

static void *load_plugin_mode(const char *file, int mode)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0)
        return NULL;
    path[n] = 0;
    strcpy(strrchr(path, '/') + 1, file);
    void *h = dlopen(path, mode);
    if (!h)
        fprintf(stderr, "plugin_host: %s\n", dlerror());
    return h;
}

static void *load_plugin(const char *file)
{
    return load_plugin_mode(file, RTLD_NOW | RTLD_LOCAL);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int late = argc > 1 && strcmp(argv[1], "late") == 0;
    if (argc > 1 && strcmp(argv[1], "drv") == 0) {
        void *blas = load_plugin("libdrvblas.so");
        int (*work)(const char *) = blas ? (int (*)(const char *))dlsym(blas, "drv_work") : NULL;
        return work ? work("direct") : 1;
    }
    if (argc > 1 && strcmp(argv[1], "copies") == 0) {
        int later = argc > 2 && strcmp(argv[2], "late") == 0;
        void *a = load_plugin("libcopy_a.so");
        int (*run_a)(void) = a ? (int (*)(void))dlsym(a, "copy_run") : NULL;
        if (run_a && later)
            run_a();
        if (later && !load_plugin("libcopy_b.so"))
            return 1;
        void *b = run_a ? load_plugin(later ? "libcopy_c.so" : "libcopy_b.so") : NULL;
        if (!b)
            return 1;
        if (!later)
            run_a();
        ((int (*)(void))dlsym(b, "copy_run"))();
        run_a();
        printf("done\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "reopen") == 0) {
        for (int round = 0; round < 3; round++) {
            void *h = load_plugin_mode("libcudaplugin.so", RTLD_NOW | RTLD_GLOBAL);
            if (!h)
                return 1;
            ((int (*)(void))dlsym(h, "plugin_run"))();
            dlclose(h);
        }
        printf("done\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "probe") == 0) {
        probe("before");
        void *h = load_plugin("libcudaplugin.so");
        if (!h)
            return 1;
        ((int (*)(void))dlsym(h, "plugin_probe"))();
        probe("after");
        printf("done\n");
        return 0;
    }
    malloc_fn early = late ? cudaMalloc : NULL;
    void *p = NULL;
    if (late) {
        if (early)
            printf("early=%d\n", early(&p, 64));
        else
            printf("early=none\n");
    }
    void *h = load_plugin("libcudaplugin.so");
    if (!h)
        return 1;
    int (*run)(void) = (int (*)(void))dlsym(h, "plugin_run");
    run();
    if (!late)
        run();
    if (late) {
        if (early) {
            int r = early(&p, 64);
            printf("late=%d\n", r);
            free_fn f = cudaFree;
            if (r == 0 && f)
                f(p);
        } else {
            printf("late=none\n");
        }
    }
    printf("done\n");
    return 0;
}
