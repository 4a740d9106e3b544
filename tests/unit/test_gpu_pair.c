/* tests/unit/test_gpu_pair.c — exporters/gpu_pair.c's pairing of intercepted
 * calls with CUPTI's API records (sp_gpuv_build) for launches timed by their
 * start only (SP_EV_END_CUPTI, launch_durations: auto): each takes its own
 * record's duration; where counts differ (a record lost, a call only CUPTI
 * saw) a launch takes the record of its own cell, and one whose record is
 * missing takes none, where the group's later launches took their next one's
 * before. Events live in one chunk of a pool owned by one thread, as
 * sp_ev_owner reads them; CUPTI's names and devices are stood in for. */
#include "../../exporters/gpu_trace.h"
#include "../../collectors/api.h"
#include "../../collectors/cupti.h"
#include "../../collectors/kernels.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

unsigned char *sp_ev_pool_base;   /* collectors/events.c's, not linked */
static sp_thread_t thread = {.tid = 100};

const char *sp_cupti_api_name(int driver, uint32_t cbid)
{
    (void)driver, (void)cbid;
    return NULL;
}
int sp_cupti_context_device(uint32_t context)
{
    (void)context;
    return 0;
}
const sp_devprop_t *sp_cupti_device(uint32_t dev)
{
    (void)dev;
    return NULL;
}
const char *sp_kern_demangle(const char *mangled)
{
    return mangled;
}

#define NL 5
#define GAP 1000u
#define T0(j) (10000u + (uint64_t)(j) * GAP)

/* NL launches GAP ns apart, flagged when `flagged`, ending at t0 + 900
 * otherwise; CUPTI's records of those `has` says, each starting 50 ns after
 * its call and lasting 100 * (j + 1) ns, plus `extra` records of calls only
 * CUPTI saw (start, duration 7). Returns the view; ev[] the references. */
static void build(sp_gpu_view_t *v, sp_event_ref_t *ev, int flagged, const int *has, const uint64_t *extra,
                  size_t nextra)
{
    sp_chunk_t *c = (sp_chunk_t *)(void *)sp_ev_pool_base;
    memset(c, 0, SP_CHUNK_BYTES);
    atomic_store(&c->owner, &thread);
    sp_gpu_recs_t recs = {0};
    recs.calls = calloc(NL + nextra, sizeof *recs.calls);
    uint32_t cbid = (uint32_t)sp_api_table[SP_API_cudaLaunchKernel].cbid;
    for (size_t j = 0; j < NL; j++) {
        c->ev[j] = (sp_event_t){.t0 = T0(j), .t1 = flagged ? T0(j) : T0(j) + 900, .name = SP_API_cudaLaunchKernel,
                                .kind = SP_EV_API, .flags = flagged ? SP_EV_END_CUPTI : 0};
        ev[j].ev = &c->ev[j];
        if (has[j])
            recs.calls[recs.ncalls++] = (sp_gpu_api_t){T0(j) + 50, T0(j) + 50 + 100 * (j + 1), SP_GPU_RUNTIME,
                                                       (uint32_t)(j + 1), cbid, 100, 0};
    }
    for (size_t i = 0; i < nextra; i++)
        recs.calls[recs.ncalls++] = (sp_gpu_api_t){extra[i], extra[i] + 7, SP_GPU_RUNTIME, (uint32_t)(90 + i), cbid,
                                                   100, 0};
    sp_gpuv_build(v, ev, NL, &recs);
}

static uint32_t matched(const sp_gpu_view_t *v, size_t j)
{
    const sp_gpu_api_t *m = sp_gpuv_match(v, j);
    return m ? m->correlation : 0;
}

static void check_case(const char *what, int flagged, const int *has, const uint64_t *extra, size_t nextra,
                       const uint32_t *want)
{
    sp_gpu_view_t v;
    sp_event_ref_t ev[NL];
    build(&v, ev, flagged, has, extra, nextra);
    uint64_t cupti = 0;
    for (size_t j = 0; j < NL; j++) {
        CHECK(matched(&v, j) == want[j], "%s: launch %zu took record %u, not %u", what, j, matched(&v, j), want[j]);
        uint64_t dur = ev[j].ev->t1 - ev[j].ev->t0;
        uint64_t expect = !flagged ? 900 : want[j] ? 100 * (uint64_t)want[j] : 0;
        CHECK(dur == expect, "%s: launch %zu lasts %lu ns, not %lu", what, j, (unsigned long)dur, (unsigned long)expect);
        cupti += want[j] != 0;
    }
    CHECK(v.ends_cupti == (flagged ? cupti : 0) && v.ends_none == (flagged ? NL - cupti : 0),
          "%s: ends cupti %lu none %lu", what, (unsigned long)v.ends_cupti, (unsigned long)v.ends_none);
    if (flagged && cupti)
        CHECK(v.ends_last == T0(NL - 1) + (want[NL - 1] ? 100 * (uint64_t)want[NL - 1] : 0), "%s: ends_last %lu",
              what, (unsigned long)v.ends_last);
    sp_gpuv_free(&v);
}

int main(void)
{
    sp_ev_pool_base = aligned_alloc(SP_CHUNK_BYTES, SP_CHUNK_BYTES);
    static const int all[NL] = {1, 1, 1, 1, 1}, third_lost[NL] = {1, 1, 0, 1, 1}, first_lost[NL] = {0, 1, 1, 1, 1};
    static const uint32_t own[NL] = {1, 2, 3, 4, 5}, own_but_third[NL] = {1, 2, 0, 4, 5},
                          own_but_first[NL] = {0, 2, 3, 4, 5};
    /* Equal counts: the n-th with the n-th. */
    check_case("every record", 1, all, NULL, 0, own);
    /* A record lost: its launch takes none, the others their own (all shifted by one before). */
    check_case("third record lost", 1, third_lost, NULL, 0, own_but_third);
    check_case("first record lost", 1, first_lost, NULL, 0, own_but_first);
    /* A call only CUPTI saw, in the last launch's cell and before the first's: left alone. */
    static const uint64_t late[] = {T0(NL - 1) + 600, T0(0) - 3000};
    check_case("extra records", 1, all, late, 2, own);
    check_case("extra records, third lost", 1, third_lost, late, 2, own_but_third);
    /* Launches timed at both ends pair by their spans, as before. */
    check_case("two clock reads", 0, all, late, 1, own);
    free(sp_ev_pool_base);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
