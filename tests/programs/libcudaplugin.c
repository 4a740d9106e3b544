/*
 * libcudaplugin.c — a plugin that links libcudart, as JAX, CuPy and TensorFlow load their CUDA pieces:
 * the host (plugin_host.c) does not link CUDA and loads this with dlopen(RTLD_LOCAL), so libcudart is
 * outside the global scope. plugin_run() makes a fixed sequence of runtime calls and prints each one's
 * result as `NAME=RESULT`, so the same run with and without stepprof can be compared line by line.
 * cudaGetDeviceCount is not interposed by stepprof: the control that shows what the runtime says.
 * plugin_probe() looks cudaMalloc up with dlsym(RTLD_DEFAULT) from inside the plugin (glibc finds it in
 * the plugin's own dependencies) and calls it, printing `plugin_probe=RESULT` (or `=none`).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

volatile int plugin_marks;
void plugin_kernel(void) { plugin_marks = 1; } /* only its address is used, as in train_c.c */

__attribute__((visibility("default"))) int plugin_run(void)
{
    int n = -1;
    void *d = NULL;
    char host[256] = {0};
    dim3 g = {2, 1, 1}, b = {64, 1, 1};
    printf("cudaGetDeviceCount=%d\n", (int)cudaGetDeviceCount(&n));
    printf("cudaMalloc=%d\n", (int)cudaMalloc(&d, sizeof host));
    printf("cudaMemset=%d\n", (int)cudaMemset(d, 0, sizeof host));
    printf("cudaLaunchKernel=%d\n", (int)cudaLaunchKernel((const void *)plugin_kernel, g, b, NULL, 0, 0));
    printf("cudaMemcpy=%d\n", (int)cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost));
    printf("cudaDeviceSynchronize=%d\n", (int)cudaDeviceSynchronize());
    printf("cudaFree=%d\n", (int)cudaFree(d));
    return 0;
}

__attribute__((visibility("default"))) int plugin_probe(void)
{
    cudaError_t (*f)(void **, size_t) = (cudaError_t(*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
    void *d = NULL;
    if (f)
        printf("plugin_probe=%d\n", (int)f(&d, 64));
    else
        printf("plugin_probe=none\n");
    return 0;
}
