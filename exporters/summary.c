/* exporters/summary.c — measures what the step summary reports. Steps are
 * the ProfilerStep#N ranges (or the whole window when the run has no step
 * marker). Host calls belong to the step their start falls in; GPU work
 * belongs to the step of the API call that launched it (by correlation; its
 * own start when unlinked). GPU busy time is the union of the kernel / copy /
 * set intervals a step launched, per device (see measure_busy), and idle % is
 * the part of the step's wall time that union does not cover. */
#include "summary.h"

#include "summary_int.h"

#include <stdlib.h>
#include <string.h>

/* Newton's method: the library links no libm. */
static double root(double x)
{
    if (x <= 0)
        return 0;
    double r = x > 1 ? x : 1;
    for (int i = 0; i < 64; i++)
        r = 0.5 * (r + x / r);
    return r;
}

sum_stat_t sum_stat(const sp_summary_t *m, size_t off)
{
    sum_stat_t r = {0, 0, 0, 0};
    for (long i = 0; i < m->nsteps; i++) {
        double v = (double)*(const int64_t *)((const char *)&m->steps[i] + off);
        r.min = i == 0 || v < r.min ? v : r.min;
        r.max = i == 0 || v > r.max ? v : r.max;
        r.avg += v;
    }
    if (m->nsteps) {
        r.avg /= (double)m->nsteps;
        for (long i = 0; i < m->nsteps; i++) {
            double v = (double)*(const int64_t *)((const char *)&m->steps[i] + off) - r.avg;
            r.stddev += v * v;
        }
        r.stddev = root(r.stddev / (double)m->nsteps);
    }
    return r;
}

long sum_steps_with(const sp_summary_t *m, size_t off)
{
    long k = 0;
    for (long i = 0; i < m->nsteps; i++)
        k += *(const int64_t *)((const char *)&m->steps[i] + off) > 0;
    return k;
}

/* Floored at 0: a step whose GPU work outlasts it kept the GPU busy throughout. */
double sum_idle_pct(const sum_step_t *st, int d)
{
    if (st->wall <= 0 || st->busy[d] >= st->wall)
        return 0.0;
    return 100.0 * (double)(st->wall - st->busy[d]) / (double)st->wall;
}

/* O(1): the set's string id indexes the list (names are interned). */
static sum_tally_t *tally(sum_list_t *l, const sp_rep_set_t *s, sp_rep_str_t name)
{
    uint32_t *at = sp_rep_idmap_at(&l->idx, name);
    if (!at)
        return NULL;
    if (*at)
        return &l->t[*at - 1];
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        sum_tally_t *t = realloc(l->t, cap * sizeof *t);
        if (!t)
            return NULL;
        l->t = t;
        l->cap = cap;
    }
    memset(&l->t[l->n], 0, sizeof l->t[l->n]);
    l->t[l->n].name = sp_rep_str(s, name);
    *at = (uint32_t)(l->n + 1);
    return &l->t[l->n++];
}

static void count(sum_list_t *l, const sp_rep_set_t *s, sp_rep_str_t name, int64_t bytes, int64_t dur)
{
    sum_tally_t *t = tally(l, s, name);
    if (!t)
        return;
    t->count++;
    t->bytes += bytes > 0 ? bytes : 0;
    t->total += dur;
    t->max = dur > t->max ? dur : t->max;
}

/* The step ts falls in: the last one starting at or before ts, if it has not
 * ended. Events come mostly in time order, so the last answer (m->hint) is
 * tried first: it is that step when ts lies between its start and the next's. */
static sum_step_t *step_at(sp_summary_t *m, int64_t ts)
{
    long lo = 0, hi = m->nsteps, k = m->hint;
    if (k < hi && m->steps[k].t0 <= ts && (k + 1 == hi || m->steps[k + 1].t0 > ts))
        lo = hi = k + 1;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (m->steps[mid].t0 <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    m->hint = lo - 1;
    sum_step_t *st = &m->steps[lo - 1];
    return ts < st->t0 + st->wall || (st->wall == 0 && ts == st->t0) ? st : NULL;
}

/* One pass: the steps (canonical order: already by start) and the span of
 * the host events, the one "step" of a window without step markers. */
static int find_steps(const sp_rep_set_t *s, sp_summary_t *m)
{
    size_t cap = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        if (sp_rep_step(e) >= 0) {
            if ((size_t)m->nsteps == cap) {
                cap = cap ? cap * 2 : 64;
                sum_step_t *grown = realloc(m->steps, cap * sizeof *grown);
                if (!grown)
                    return -1;
                m->steps = grown;
            }
            m->steps[m->nsteps++] = (sum_step_t){.step = sp_rep_step(e), .t0 = e->ts, .wall = e->dur};
        }
        if (sp_rep_is_host(e->cat)) {
            lo = e->ts < lo ? e->ts : lo;
            hi = e->ts + e->dur > hi ? e->ts + e->dur : hi;
        }
    }
    if (m->nsteps || lo > hi)
        return 0;
    m->steps = calloc(1, sizeof *m->steps);   /* no step marker: the window is the one "step" */
    if (!m->steps)
        return -1;
    m->steps[0] = (sum_step_t){.step = -1, .t0 = lo, .wall = hi - lo};
    m->nsteps = 1;
    return 0;
}

static int device_index(sp_summary_t *m, long dev)
{
    for (int d = 0; d < m->ndev; d++)
        if (m->dev_id[d] == dev)
            return d;
    if (m->ndev == SUM_MAX_DEV)
        return -1;
    m->dev_id[m->ndev] = dev;
    return m->ndev++;
}

/* The busy time of a step is the union, per device, of the GPU work the step
 * launched, wherever on the GPU timeline it ran. Clipping the GPU timeline to
 * the step's span instead would call the GPU idle whenever it was still
 * working on what earlier steps queued: work launched before the window is
 * not in the trace, so every window would start "idle". The events are in
 * canonical order (sp_rep_analyze: by start), so each (step, device) sees its
 * work in start order and one open span per pair makes the union: memory per
 * step and device, none per GPU event. */
static int measure_busy(sp_rep_set_t *s, sp_summary_t *m)
{
    for (size_t i = 0; i < s->n; i++)
        if (sp_rep_is_gpu_work(s->ev[i].cat))
            device_index(m, sp_rep_pid(s, &s->ev[i]));
    size_t nopen = (size_t)m->nsteps * (size_t)m->ndev;
    struct open_span {
        int64_t a, b;
        int open;
    } *open = calloc(nopen ? nopen : 1, sizeof *open);
    if (!open)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        if (!sp_rep_is_gpu_work(e->cat))
            continue;
        sum_step_t *st = step_at(m, sp_rep_parent(e) >= 0 ? s->ev[sp_rep_parent(e)].ts : e->ts);
        int d = device_index(m, sp_rep_pid(s, e));
        if (!st || d < 0)
            continue;
        struct open_span *o = &open[(size_t)(st - m->steps) * (size_t)m->ndev + (size_t)d];
        int64_t a = e->ts, b = e->ts + e->dur;
        if (o->open && a <= o->b) {
            o->b = b > o->b ? b : o->b;
            continue;
        }
        if (o->open)
            st->busy[d] += o->b - o->a;
        *o = (struct open_span){a, b, 1};
    }
    for (size_t k = 0; k < nopen; k++)
        if (open[k].open)
            m->steps[k / (size_t)m->ndev].busy[k % (size_t)m->ndev] += open[k].b - open[k].a;
    free(open);
    int64_t best = -1;
    for (int d = 0; d < m->ndev; d++) {
        int64_t tot = 0;
        for (long k = 0; k < m->nsteps; k++)
            tot += m->steps[k].busy[d];
        if (tot > best) {
            best = tot;
            m->primary = d;
        }
    }
    return 0;
}

static int is_sync_call(const char *name)
{
    static const char *const names[] = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaStreamSynchronize_ptsz",
                                        "cudaEventSynchronize",  "cuCtxSynchronize",      "cuCtxSynchronize_v2",
                                        "cuStreamSynchronize",   "cuStreamSynchronize_ptsz", "cuEventSynchronize"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return 1;
    return 0;
}

/* cudaMemcpy / cudaMemcpy2D / cuMemcpyDtoH...: no "Async" in the name. */
static int is_blocking_d2h(const sp_rep_set_t *s, const sp_rep_event_t *e)
{
    const char *name = sp_rep_str(s, e->name);
    if (!strstr(name, "Memcpy") || strstr(name, "Async"))
        return 0;
    return strcmp(sp_rep_str(s, sp_rep_kind(s, e)), "DtoH") == 0 || strstr(name, "DtoH") != NULL;
}

enum { CALL_OTHER = 1, CALL_SYNC, CALL_BLOCKING_D2H };

/* A call's kind by its interned name and copy direction: a window has few
 * distinct ones, each tested by text once (direct-mapped; a clash tests again). */
static int call_class(const sp_rep_set_t *s, sp_summary_t *m, const sp_rep_event_t *e)
{
    sp_rep_str_t kind = sp_rep_kind(s, e);
    uint32_t h = e->name * 0x9e3779b1u ^ kind * 31;
    struct sum_call_memo *c = &m->call_memo[(h ^ h >> 7 ^ h >> 17) & (SUM_CALL_MEMO - 1)];
    if (c->name != e->name || c->kind != kind || !c->cls) {
        c->name = e->name;
        c->kind = kind;
        c->cls = is_sync_call(sp_rep_str(s, e->name)) ? CALL_SYNC : is_blocking_d2h(s, e) ? CALL_BLOCKING_D2H : CALL_OTHER;
    }
    return c->cls;
}

static void measure_host(sp_rep_set_t *s, sp_summary_t *m, const sp_rep_event_t *e)
{
    sum_step_t *st = step_at(m, e->ts);
    if (e->cat == SP_REP_ANNOTATION) {
        if (sp_rep_step(e) < 0 && !sp_rep_merged(e))   /* as the table counts it */
            count(&m->ranges, s, e->name, 0, e->dur);
        return;
    }
    if (!st)
        return;
    st->launches += sp_rep_launch(s, e);
    if (sp_rep_kind(s, e))
        count(&m->host_dirs, s, sp_rep_kind(s, e), e->bytes, e->dur);
    int cls = call_class(s, m, e);
    if (cls == CALL_SYNC) {
        st->host_syncs++;
        st->host_sync_time += e->dur;
        count(&m->sync_calls, s, e->name, 0, e->dur);
    } else if (cls == CALL_BLOCKING_D2H) {
        st->blocking_d2h++;
        st->blocking_d2h_bytes += e->bytes > 0 ? e->bytes : 0;
        st->blocking_d2h_time += e->dur;
        count(&m->sync_calls, s, m->blocking_d2h, e->bytes, e->dur);
    }
}

enum { COPY_OTHER, COPY_H2D, COPY_D2H, COPY_D2D };

static void per_direction(sum_step_t *st, const sp_rep_event_t *e, int which)
{
    int64_t bytes = e->bytes > 0 ? e->bytes : 0;
    if (which == COPY_H2D) {
        st->h2d_time += e->dur;
        st->h2d_bytes += bytes;
    } else if (which == COPY_D2H) {
        st->d2h_time += e->dur;
        st->d2h_bytes += bytes;
    } else if (which == COPY_D2D) {
        st->d2d_time += e->dur;
        st->d2d_bytes += bytes;
    }
}

static int64_t gbps_milli(int64_t bytes, int64_t ns)
{
    return ns > 0 ? (int64_t)((double)bytes * 1000.0 / (double)ns + 0.5) : 0;
}

/* A GPU copy's direction by its name ("Memcpy HtoD (Pageable -> Device)":
 * "HtoD", interned), as in call_class: each distinct name tested by text once,
 * not every copy (once shared, interning takes the set's lock). */
static const struct sum_copy_memo *copy_class(sp_rep_set_t *s, sp_summary_t *m, sp_rep_str_t name_id)
{
    uint32_t h = name_id * 0x9e3779b1u;
    struct sum_copy_memo *c = &m->copy_memo[(h ^ h >> 7 ^ h >> 17) & (SUM_CALL_MEMO - 1)];
    if (c->set && c->name == name_id)
        return c;
    const char *name = sp_rep_str(s, name_id);
    const char *p = strncmp(name, "Memcpy ", 7) == 0 ? name + 7 : "Unknown";
    size_t n = strcspn(p, " ");
    *c = (struct sum_copy_memo){name_id, sp_rep_intern_id_n(s, p, n), 1,
                                strncmp(name, "Memcpy HtoD", 11) == 0   ? COPY_H2D
                                : strncmp(name, "Memcpy DtoH", 11) == 0 ? COPY_D2H
                                : strncmp(name, "Memcpy DtoD", 11) == 0 ? COPY_D2D
                                                                        : COPY_OTHER,
                                strstr(name, "Pageable") != NULL};
    return c;
}

static void measure_gpu(sp_rep_set_t *s, sp_summary_t *m, const sp_rep_event_t *e)
{
    sum_step_t *st = step_at(m, sp_rep_parent(e) >= 0 ? s->ev[sp_rep_parent(e)].ts : e->ts);
    if (!st)
        return;
    switch (e->cat) {
    case SP_REP_KERNEL:
        st->kernels++;
        st->kernel_time += e->dur;
        m->kernel_total += e->dur;
        count(&m->kernels, s, e->name, 0, e->dur);
        break;
    case SP_REP_MEMCPY:
        st->copies++;
        st->copy_time += e->dur;
        st->copy_bytes += e->bytes > 0 ? e->bytes : 0;
        const struct sum_copy_memo *c = copy_class(s, m, e->name);
        count(&m->gpu_dirs, s, c->dir, e->bytes, e->dur);
        per_direction(st, e, c->which);
        if (c->pageable) {
            st->pageable++;
            st->pageable_bytes += e->bytes > 0 ? e->bytes : 0;
            st->pageable_time += e->dur;
        }
        break;
    case SP_REP_MEMSET:
        st->sets++;
        st->set_time += e->dur;
        break;
    case SP_REP_SYNC:
        st->gpu_syncs++;
        st->gpu_sync_time += e->dur;
        break;
    default:
        break;
    }
}

/* Ranges by CPU time, most first; equal totals keep first-seen order. Only
 * the SUM_JSON_RANGES the summary lists are ordered; the rest are counted
 * (summary_out.c). Totals rank as doubles: exact below 2^53 ns (104 days).
 * The index by name is not used after measuring and is dropped. */
static int rank_ranges(sum_list_t *l)
{
    if (l->n < 2)
        return 0;
    sp_rep_idmap_free(&l->idx);
    sp_rank_t *r = malloc(l->n * sizeof *r);
    if (!r)
        return -1;
    for (size_t i = 0; i < l->n; i++)
        r[i] = (sp_rank_t){(double)l->t[i].total, i};
    sp_rep_rank(r, l->n, SUM_JSON_RANGES);
    int rc = sp_rep_permute(l->t, l->n, sizeof *l->t, r, SUM_JSON_RANGES);
    free(r);
    return rc;
}

int sum_measure(sp_rep_set_t *s, sp_summary_t *m)
{
    memset(m, 0, sizeof *m);
    m->blocking_d2h = sp_rep_intern_id(s, "cudaMemcpy DtoH (blocking)");
    m->dropped = s->dropped;
    if (find_steps(s, m) != 0 || measure_busy(s, m) != 0)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        m->gpu |= sp_rep_is_gpu_work(e->cat);
        if (sp_rep_is_host(e->cat))
            measure_host(s, m, e);
        else if (sp_rep_is_gpu_work(e->cat) || e->cat == SP_REP_SYNC)
            measure_gpu(s, m, e);
    }
    for (long i = 0; i < m->nsteps; i++) {
        sum_step_t *st = &m->steps[i];
        st->busy_p = m->ndev ? st->busy[m->primary] : 0;
        st->idle_bp = m->ndev ? (int64_t)(sum_idle_pct(st, m->primary) * 100 + 0.5) : 0;
        st->mean_kernel = st->kernels ? st->kernel_time / st->kernels : 0;
        st->h2d_gbps_m = gbps_milli(st->h2d_bytes, st->h2d_time);
        st->d2h_gbps_m = gbps_milli(st->d2h_bytes, st->d2h_time);
        st->d2d_gbps_m = gbps_milli(st->d2d_bytes, st->d2d_time);
    }
    if (rank_ranges(&m->ranges) != 0)
        return -1;
    return s->oom ? -1 : 0;
}

void sum_free(sp_summary_t *m)
{
    free(m->steps);
    free(m->gpu_dirs.t);
    sp_rep_idmap_free(&m->gpu_dirs.idx);
    free(m->host_dirs.t);
    sp_rep_idmap_free(&m->host_dirs.idx);
    free(m->sync_calls.t);
    sp_rep_idmap_free(&m->sync_calls.idx);
    free(m->kernels.t);
    sp_rep_idmap_free(&m->kernels.idx);
    free(m->ranges.t);
    sp_rep_idmap_free(&m->ranges.idx);
}

int sp_rep_summary(sp_rep_set_t *s, sp_rb_t *text, sp_rb_t *json)
{
    sp_summary_t *m = malloc(sizeof *m);
    if (!m)
        return -1;
    int rc = sum_measure(s, m);
    if (rc == 0) {
        sum_rules(m);
        if (text)
            sum_print_text(m, text);
        if (json)
            sum_print_json(m, json);
        rc = (text && text->oom) || (json && json->oom) ? -1 : 0;
    }
    sum_free(m);
    free(m);
    return rc;
}
