/*
 * short_threads.c — many short-lived CUDA threads, the way a data loader or a thread pool that is
 * torn down each epoch makes them: ROUNDS rounds (argv[1], default 20), each a cudaProfilerStart ..
 * cudaProfilerStop range in which PER_ROUND threads (argv[2], default 500) are started one after
 * another, each making one cudaMemsetAsync on the default stream and exiting before the next starts.
 * With the cudaProfilerApi marker each round is one recorded cycle, so a profiler that keeps an
 * exited thread's buffer runs out of buffers after a few rounds.
 *
 * Stdout: `short_threads rounds R per_round N`, then `threads R*N`. Exit 0, also when the CUDA calls
 * fail (one warning line on stderr); 2 on bad arguments or when a thread cannot be started.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

static void *dev;
static int failed;

static void *one_call(void *arg)
{
    (void)arg;
    if (cudaMemsetAsync(dev, 0, 256, 0) != cudaSuccess)
        __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 20, per_round = argc > 2 ? atol(argv[2]) : 500;
    if (rounds < 1 || per_round < 1) {
        fprintf(stderr, "usage: short_threads [ROUNDS] [PER_ROUND]\n");
        return 2;
    }
    printf("short_threads rounds %ld per_round %ld\n", rounds, per_round);
    if (cudaMalloc(&dev, 256) != cudaSuccess)
        failed++;
    long made = 0;
    for (long r = 0; r < rounds; r++) {
        cudaProfilerStart();
        for (long i = 0; i < per_round; i++, made++) {
            pthread_t th;
            if (pthread_create(&th, NULL, one_call, NULL) != 0) {
                fprintf(stderr, "short_threads: cannot start thread %ld\n", made);
                return 2;
            }
            pthread_join(th, NULL);
        }
        cudaDeviceSynchronize();
        cudaProfilerStop();
    }
    cudaFree(dev);
    if (failed)
        fprintf(stderr, "short_threads: %d CUDA calls failed\n", failed);
    printf("threads %ld\n", made);
    return 0;
}
