/*
 * nvtx_overlap.c — overlapping NVTX start/end ranges in a long run, for tests/test_scale.py: the
 * deferred-text log (collectors/strings_log.c) must get back the text of ranges whose records are
 * dropped, also when they end while a later range is still open.
 *
 * Usage: nvtx_overlap ROUNDS NAMELEN. One CUDA call first (stepprof activates there), then ROUNDS
 * rounds of: start "a<round>..." and "b<round>..." (distinct names, NAMELEN bytes, padded with '.'),
 * end the a range, then the b range. Stdout: `ranges <2 * ROUNDS>` and `maxrss_kb <peak RSS before
 * exit>` (VmHWM: getrusage's ru_maxrss keeps the peak of the process image before exec, the test
 * runner's), then `done`. Exit 0; 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

static long peak_rss_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static void name_of(char *buf, long len, char which, long round)
{
    int n = snprintf(buf, (size_t)len + 1, "%c%ld", which, round);
    if (n < len)
        memset(buf + n, '.', (size_t)(len - n));
    buf[len] = 0;
}

int main(int argc, char **argv)
{
    char *end1 = NULL, *end2 = NULL;
    long rounds = argc == 3 ? strtol(argv[1], &end1, 10) : 0;
    long len = argc == 3 ? strtol(argv[2], &end2, 10) : 0;
    if (argc != 3 || *end1 || *end2 || rounds < 1 || len < 16 || len > 4096) {
        fprintf(stderr, "usage: nvtx_overlap ROUNDS NAMELEN (16..4096)\n");
        return 2;
    }
    int devices = 0;
    (void)cudaGetDeviceCount(&devices);
    char *a = malloc((size_t)len + 1), *b = malloc((size_t)len + 1);
    if (!a || !b)
        return 1;
    for (long i = 0; i < rounds; i++) {
        name_of(a, len, 'a', i);
        name_of(b, len, 'b', i);
        nvtxRangeId_t ra = nvtxRangeStartA(a), rb = nvtxRangeStartA(b);
        nvtxRangeEnd(ra);
        nvtxRangeEnd(rb);
    }
    printf("ranges %ld\nmaxrss_kb %ld\ndone\n", 2 * rounds, peak_rss_kb());
    free(a);
    free(b);
    return 0;
}
