/*
 * exitcode.c — uses CUDA a little, then exits with a distinctive code, to test that stepprof (its
 * exit-time export included) keeps the program's stdout, stderr and exit status intact.
 *
 * Calls cudaMalloc (4096 bytes), cudaMemcpy H2D and D2H, cudaFree. Failures only warn (stderr).
 * Stdout: `exitcode: hello from stdout`. Stderr: `exitcode: hello from stderr` (plus any CUDA
 * warnings before it). Exit code 7 in every case.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define PROG "exitcode"
#include "cuda_check.h"

int main(void)
{
    char host[4096];
    void *dev = NULL;
    memset(host, 0x11, sizeof host);
    CHECK(cudaMalloc(&dev, sizeof host));
    CHECK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(dev));
    printf("exitcode: hello from stdout\n");
    fprintf(stderr, "exitcode: hello from stderr\n");
    return 7;
}
