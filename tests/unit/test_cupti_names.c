/* tests/unit/test_cupti_names.c — CUPTI callback names (collectors/cupti_names.c) are
 * process-lifetime strings: many held at once keep their text (a returned buffer would be
 * overwritten by the next lookup), the same id gives the same pointer from 8 threads at once
 * (a recording thread and exporters), the runtime's "_v7000" suffix goes and a driver "_v2"
 * stays, ids past the cache work too; after sp_cupti_names_prefetch (run before the hand-over to a
 * program's torch.profiler) no id of the cache goes to CUPTI again. Which ids are queries
 * (sp_cupti_api_is_query): by name for driver ids, never an id collectors/api.h has a row for.
 * CUPTI's own lookup is replaced by a table here. */
#include "../../collectors/cupti.h"
#include "../../collectors/cupti_window.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

enum { IDS = 3000, THREADS = 8, CACHED = 2048 /* collectors/cupti_names.c */ };

static char cupti_names[2][IDS][48];
static atomic_int prefetched, cached_asked;   /* lookups of cached ids after the prefetch */

const char *sp_cupti_callback_name(int driver, uint32_t cbid)
{
    if (atomic_load(&prefetched) && cbid < CACHED)
        atomic_fetch_add(&cached_asked, 1);
    return cbid < IDS && cupti_names[driver][cbid][0] ? cupti_names[driver][cbid] : NULL;
}

static const char *got[THREADS][2][IDS];

static void *worker(void *arg)
{
    long t = (long)arg;
    for (uint32_t i = 1; i < IDS; i++) {
        uint32_t k = (uint32_t)((i * 7919u + (uint32_t)t * 104729u) % (IDS - 1)) + 1;
        got[t][t & 1][k] = sp_cupti_api_name((int)(t & 1), k);
        got[t][!(t & 1)][k] = sp_cupti_api_name((int)!(t & 1), k);
    }
    return NULL;
}

int main(void)
{
    for (uint32_t i = 1; i < IDS; i++) {
        snprintf(cupti_names[0][i], sizeof cupti_names[0][i], "cudaCall%u_v7000", i);
        snprintf(cupti_names[1][i], sizeof cupti_names[1][i], "cuCall%u_v2", i);
    }
    sp_cupti_names_prefetch();
    atomic_store(&prefetched, 1);
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    for (long t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    int same = 1, text = 1;
    char want[48];
    for (int d = 0; d < 2; d++)
        for (uint32_t i = 1; i < IDS; i++) {
            snprintf(want, sizeof want, d ? "cuCall%u_v2" : "cudaCall%u", i);
            for (int t = 0; t < THREADS; t++) {
                same &= got[t][d][i] == got[0][d][i];
                text &= got[t][d][i] && strcmp(got[t][d][i], want) == 0;
            }
        }
    CHECK(same, "threads got different pointers for one id");
    CHECK(text, "a name lost its text or kept the wrong suffix");
    CHECK(atomic_load(&cached_asked) == 0, "an id of the cache went to CUPTI after the prefetch");
    CHECK(sp_cupti_api_name(0, 0) == NULL, "unknown id");
    CHECK(sp_cupti_api_name(0, IDS + 5) == NULL, "unknown id past the cache");
    /* two names held at once */
    const char *a = sp_cupti_api_name(0, 7), *b = sp_cupti_api_name(0, 2500);
    CHECK(a && b && strcmp(a, "cudaCall7") == 0 && strcmp(b, "cudaCall2500") == 0, "two names held at once");
    /* queries: ids past the cache are named anew at each lookup, so they can be renamed here */
    static const struct {
        int driver;
        uint32_t cbid;
        const char *name;
        int query;
    } q[] = {{1, 2600, "cuCtxGetCurrent", 1}, {1, 2601, "cuDevicePrimaryCtxGetState", 1},
             {1, 2602, "cuKernelGetName", 1}, {1, 2603, "cuLaunchKernel", 0}, {1, 2604, "cuMemcpyAsync", 0},
             {1, 2605, "cuModuleLoadDataEx", 0}, {1, 2606, "cuLibraryLoadData", 0}, {1, 2607, "cuInit", 0},
             {1, 2608, "cuStreamSynchronize", 0}, {1, 2609, "cuMemAllocHost_v2", 0}, {1, 2610, "", 0}};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        snprintf(cupti_names[q[i].driver][q[i].cbid], sizeof cupti_names[0][0], "%s", q[i].name);
        CHECK(sp_cupti_api_is_query(q[i].driver, q[i].cbid) == q[i].query, q[i].name[0] ? q[i].name : "no name");
    }
    /* runtime: cudaGetDevice 17, cudaSetDevice 16, cudaGetLastError 10 (cupti_runtime_cbid.h) */
    CHECK(sp_cupti_api_is_query(0, 17) && sp_cupti_api_is_query(0, 16) && sp_cupti_api_is_query(0, 10),
          "runtime queries");
    CHECK(!sp_cupti_api_is_query(0, 211) && !sp_cupti_api_is_query(0, 9), "other runtime calls kept");
    /* driver 307 (cuLaunchKernel) and 126 (cuStreamSynchronize) have rows: kept whatever their name here */
    CHECK(!sp_cupti_api_is_query(1, 307) && !sp_cupti_api_is_query(1, 126), "rows of collectors/api.h kept");
    CHECK(sp_cupti_api_is_query(1, 300), "a driver call with no row and a query's name");
    CHECK(sp_cupti_api_is_query(1, 300), "the verdict, cached");
    printf("test_cupti_names: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
