/* exporters/gpu_pair.c — see gpu_trace.h (sp_gpuv_pair): each intercepted
 * call paired with CUPTI's record of the same call, same OS thread, domain
 * (runtime or driver: their cbids overlap, driver 20 cuModuleLoadDataEx runs
 * inside the first cudaMalloc, runtime 20, under lazy loading) and callback
 * id, in order (pair_group); a launch timed by its start only takes its end
 * from that record (end_from_cupti); driver calls CUPTI saw inside a paired
 * runtime call move onto the host's clock (nested_onto_host). Pairing at export costs nothing at run
 * time, where pushing an external correlation id around every call would
 * cost two CUPTI calls on the hot path. */
#include "gpu_trace.h"
#include "radix.h"

#include "../collectors/api.h"

#include <cupti_runtime_cbid.h>
#include <stdlib.h>
#include <string.h>

#define SLACK_NS 5000

/* The pairing key, in the order both sides are sorted: OS thread, domain,
 * callback id (CUPTI's are below 2^24). */
static uint64_t match_key(uint32_t tid, uint32_t domain, uint32_t cbid)
{
    return (uint64_t)tid << 32 | (uint64_t)(domain & 0xffu) << 24 | (cbid & 0xffffffu);
}

static uint32_t host_cbid(const sp_event_ref_t *r)
{
    return (uint32_t)sp_api_table[r->ev->name].cbid;
}

/* The CUPTI domain of an intercepted call: its row says whether its cbid is
 * a runtime or a driver cbid. */
static uint32_t host_domain(const sp_event_ref_t *r)
{
    return sp_api_table[r->ev->name].driver ? SP_GPU_DRIVER : SP_GPU_RUNTIME;
}

static uint64_t host_key(const sp_event_ref_t *r)
{
    return match_key((uint32_t)sp_ev_owner(r->ev)->tid, host_domain(r), host_cbid(r));
}

/* CUPTI 13.0 records the <<<>>> path's __cudaLaunchKernel(_ptsz) as
 * cudaLaunchKernel(_ptsz) (211 / 214; seen on an H200, docs/gpu-validation.md),
 * which is what collectors/api.h gives the intercepted call; a CUPTI that uses
 * the header's own 505 / 506 pairs the same way. */
static uint32_t gpu_cbid(const sp_gpu_api_t *g)
{
    if (g->kind == SP_GPU_RUNTIME && g->cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000)
        return CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    if (g->kind == SP_GPU_RUNTIME && g->cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000)
        return CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000;
    return g->cbid;
}

static uint64_t gpu_key(const sp_gpu_api_t *g)
{
    return match_key(g->tid, g->kind, gpu_cbid(g));
}

/* The host calls and CUPTI's records of one (thread, domain, cbid), each in time
 * order. Equal counts: every such call came through the interposer, so the
 * n-th is the n-th, whatever the two clocks' offset (calibration can be off
 * by more than a call lasts: ~17 us seen under valgrind). Otherwise CUPTI saw
 * calls we did not (inside a library): pair by time, each host call with the
 * first unused record that starts within its span (with slack). A call timed
 * by its start only (SP_EV_END_CUPTI) has no span. CUPTI's record of it
 * starts after it and before the thread's next call, so the group's calls cut
 * the time into cells, call j's from cell_begin(j) to cell_begin(j + 1), and
 * it takes the record of its cell that starts nearest to it. Cells do not
 * overlap: a call whose record is missing (lost, or outside the window) takes
 * none, where with overlapping spans every later call of the group took its
 * next one's. */
static uint64_t cell_begin(const sp_event_ref_t *ev, const sp_kv_t *h, size_t j)
{
    uint64_t t = ev[h[j].val].ev->t0, back = SLACK_NS;   /* CUPTI's clock may be a little behind */
    if (j > 0 && (t - ev[h[j - 1].val].ev->t0) / 2 < back)
        back = (t - ev[h[j - 1].val].ev->t0) / 2;
    return t > back ? t - back : 0;
}

static void pair_group(sp_gpu_view_t *v, const sp_event_ref_t *ev, const sp_kv_t *h, size_t nh, const sp_kv_t *c,
                       size_t nc)
{
    if (nh == nc) {
        for (size_t k = 0; k < nh; k++) {
            v->host_match[h[k].val] = (int32_t)c[k].val;
            v->api_used[c[k].val] = 1;
        }
        return;
    }
    for (size_t j = 0, k = 0; j < nh; j++) {
        const sp_event_t *e = ev[h[j].val].ev;
        if (e->flags & SP_EV_END_CUPTI) {
            uint64_t lo = cell_begin(ev, h, j), hi = j + 1 < nh ? cell_begin(ev, h, j + 1) : UINT64_MAX;
            size_t best = nc;
            uint64_t best_d = UINT64_MAX;
            for (; k < nc && v->api[c[k].val].start < hi; k++) {
                uint64_t s = v->api[c[k].val].start, d = s > e->t0 ? s - e->t0 : e->t0 - s;
                if (s >= lo && d < best_d)
                    best = k, best_d = d;
            }
            if (best < nc) {
                v->host_match[h[j].val] = (int32_t)c[best].val;
                v->api_used[c[best].val] = 1;
            }
            continue;
        }
        while (k < nc && v->api[c[k].val].start + SLACK_NS < e->t0)
            k++;
        if (k < nc && v->api[c[k].val].start <= e->t1 + SLACK_NS) {
            v->host_match[h[j].val] = (int32_t)c[k].val;
            v->api_used[c[k++].val] = 1;
        }
    }
}

/* A launch timed by its start only (SP_EV_END_CUPTI) ends as long after it
 * as CUPTI's record of it lasts (a difference: the clocks' offset drops
 * out), before any writer reads it; without a record it lasts 0. The sorted
 * order stands: by start, and among equal starts the longer first, which a
 * zero-length call already was. */
static void end_from_cupti(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev)
{
    for (size_t h = 0; h < nev; h++) {
        sp_event_t *e = ev[h].ev;
        if (e->kind != SP_EV_API || !(e->flags & SP_EV_END_CUPTI))
            continue;
        const sp_gpu_api_t *m = sp_gpuv_match(v, h);
        if (m && m->end > m->start)
            e->t1 = e->t0 + (m->end - m->start);
        v->ends_last = e->t1 > v->ends_last ? e->t1 : v->ends_last;
        v->ends_cupti += m != NULL;
        v->ends_none += m == NULL;
    }
}

/* A driver call CUPTI saw inside an intercepted runtime call (NVIDIA's
 * runtime launching through cuLaunchKernel: the runtime call's correlation
 * id, its thread) moves onto the host's clock, as far from the host call's
 * start as CUPTI's two records are apart: inside that call whatever the
 * clocks' offset, also where CUPTI's record ends it (end_from_cupti), for
 * the trace and the reports alike. The runtime calls paired and the driver
 * records left, each radix-sorted by (id, thread), then merged. Out of
 * memory the records keep CUPTI's times. */
static void nested_onto_host(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev)
{
    size_t na = 0, nb = 0;
    for (size_t h = 0; v->host_match && h < nev; h++)
        na += v->host_match[h] >= 0 && v->api[v->host_match[h]].kind == SP_GPU_RUNTIME;
    for (size_t i = 0; na && i < v->napi; i++)
        nb += !v->api_used[i] && v->api[i].kind == SP_GPU_DRIVER;
    sp_kv_t *a = nb ? malloc(2 * na * sizeof *a) : NULL, *b = a ? malloc(2 * nb * sizeof *b) : NULL;
    if (!b) {
        free(a);
        return;
    }
    na = nb = 0;
    for (size_t h = 0; h < nev; h++) {
        const sp_gpu_api_t *m = v->host_match[h] >= 0 ? &v->api[v->host_match[h]] : NULL;
        if (m && m->kind == SP_GPU_RUNTIME)
            a[na++] = (sp_kv_t){(uint64_t)m->correlation << 32 | m->tid, h};
    }
    for (size_t i = 0; i < v->napi; i++)
        if (!v->api_used[i] && v->api[i].kind == SP_GPU_DRIVER)
            b[nb++] = (sp_kv_t){(uint64_t)v->api[i].correlation << 32 | v->api[i].tid, i};
    sp_kv_t *as = sp_radix_sort(a, a + na, na), *bs = sp_radix_sort(b, b + nb, nb);
    for (size_t i = 0, j = 0; as && bs && j < nb; j++) {
        while (i < na && as[i].key < bs[j].key)
            i++;
        if (i == na)
            break;
        if (as[i].key != bs[j].key)
            continue;
        sp_gpu_api_t *d = &v->api[bs[j].val];
        uint64_t shift = ev[as[i].val].ev->t0 - v->api[v->host_match[as[i].val]].start;   /* modulo 2^64 */
        d->start += shift;
        d->end += shift;
    }
    free(a);
    free(b);
}

void sp_gpuv_pair(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev)
{
    size_t napi = v->host_match ? v->napi : 0, nh = 0;
    const sp_gpu_api_t *api = v->api;
    for (size_t h = 0; napi && h < nev; h++)
        v->host_match[h] = -1;
    for (size_t h = 0; napi && h < nev; h++)
        nh += ev[h].ev->kind == SP_EV_API && ev[h].ev->name < SP_API_COUNT;
    /* CUPTI's API records by (key, start) and the host calls by (key, start:
     * the order they come in), each a stable radix sort; then the two walked
     * side by side, one group of equal keys at a time. */
    sp_kv_t *c = napi ? malloc(2 * napi * sizeof *c) : NULL, *h = NULL;
    if (napi && !c) {
        sp_gpuv_free(v);
        end_from_cupti(v, ev, nev);
        return;
    }
    for (size_t i = 0; c && i < napi; i++)
        c[i] = (sp_kv_t){api[i].start, i};
    sp_kv_t *cs = c ? sp_radix_sort(c, c + napi, napi) : NULL;
    for (size_t i = 0; cs && i < napi; i++)
        cs[i].key = gpu_key(&api[cs[i].val]);
    cs = cs ? sp_radix_sort(cs, cs == c ? c + napi : c, napi) : NULL;
    if (cs) {   /* the sorting's spare half goes before the host side's is taken */
        memmove(c, cs, napi * sizeof *c);
        sp_kv_t *shrunk = realloc(c, napi * sizeof *c);
        cs = c = shrunk ? shrunk : c;
        h = malloc(2 * (nh ? nh : 1) * sizeof *h);
    }
    size_t k = 0;
    for (size_t j = 0; h && j < nev; j++)
        if (ev[j].ev->kind == SP_EV_API && ev[j].ev->name < SP_API_COUNT)
            h[k++] = (sp_kv_t){host_key(&ev[j]), j};
    sp_kv_t *hs = h ? sp_radix_sort(h, h + nh, nh) : NULL;
    for (size_t j = 0, i = 0; hs && j < nh;) {
        uint64_t key = hs[j].key;
        size_t jend = j, iend;
        while (jend < nh && hs[jend].key == key)
            jend++;
        while (i < napi && cs[i].key < key)
            i++;
        for (iend = i; iend < napi && cs[iend].key == key; iend++)
            ;
        pair_group(v, ev, hs + j, jend - j, cs + i, iend - i);
        i = iend;
        j = jend;
    }
    free(c);
    free(h);
    end_from_cupti(v, ev, nev);
    nested_onto_host(v, ev, nev);
}
