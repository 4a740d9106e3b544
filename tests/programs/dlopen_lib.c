/*
 * dlopen_lib.c — loads the library named by argv[1] with dlopen(RTLD_NOW | RTLD_LOCAL), as the CUDA
 * driver and NVTX load an injection library into a process that did not preload it, and prints
 * `loaded` (exit 0) or the loader's error (exit 1). Links nothing but libc.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_lib LIBRARY\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen_lib: %s\n", dlerror());
        return 1;
    }
    printf("loaded\n");
    return 0;
}
