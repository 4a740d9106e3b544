/* tests/unit/test_agg.c — the export's per-event structures: the report set's
 * string ids (id 0 is "", equal text one id, a million distinct strings each
 * back to its text, ids ordered by text where the canonical order compares
 * them), the collapsed stacks summed per (stack, name) pair against a naive
 * sum, and a window's CUPTI records taken in place (the window's in order in
 * the old array, later windows' in a new one, earlier ones dropped), and the
 * key-average rows' top-k order against a full sort (ties included), the
 * in-place permutation, the id-indexed map, two threads interning into one
 * shared set while reading texts, events' lanes (pid, tid and device back
 * through a 32-bit number, one lane per distinct triple), the 48-byte event's
 * packed fields (each kept apart from its neighbours, clamped at 48 bits, copy
 * directions numbered up to 2047), and the analysis's nesting (one stack per
 * thread, 70 threads interleaved, one 200 deep): every host event's parent,
 * self CPU time and CUDA total against the tree they were generated from. */
#include "../../collectors/cupti_window.h"
#include "../../exporters/agg.h"
#include "../../exporters/agg_int.h"
#include "../../exporters/stacks_out.h"
#include "check.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_ids(void)
{
    sp_rep_set_t s;
    sp_rep_init(&s);
    CHECK(sp_rep_intern_id(&s, "") == 0 && strcmp(sp_rep_str(&s, 0), "") == 0, "\"\" is id 0");
    CHECK(sp_rep_intern_id(&s, NULL) == 0, "NULL interns as \"\"");
    sp_rep_str_t a = sp_rep_intern_id(&s, "aten::mm"), b = sp_rep_intern_id(&s, "aten::add");
    CHECK(a != b && a && b, "distinct texts, distinct ids");
    CHECK(sp_rep_intern_id_n(&s, "aten::mm(x)", 8) == a, "a prefix by length is the same string");
    CHECK(sp_rep_intern_n(&s, "aten::mm", 8) == sp_rep_str(&s, a), "the pointer form is the id's text");
    enum { N = 1000000 };
    sp_rep_str_t *ids = malloc(N * sizeof *ids);
    char buf[32];
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "name %d", i);
        ids[i] = sp_rep_intern_id(&s, buf);
    }
    size_t bad = 0, again = 0;
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "name %d", i);
        bad += strcmp(sp_rep_str(&s, ids[i]), buf) != 0;
        again += sp_rep_intern_id(&s, buf) != ids[i];
    }
    CHECK(!s.oom && bad == 0, "1M distinct strings: %zu not back to their text", bad);
    CHECK(again == 0, "1M strings interned again: %zu got another id", again);
    CHECK(sp_rep_intern_id(&s, "aten::mm") == a, "an early id survives the table's growth");
    free(ids);

    /* In batches: new names, names seen before, and repeats inside one group. */
    enum { M = 100000 };
    static char text[M][32];
    static const char *str[M];
    static size_t len[M];
    static sp_rep_str_t many[M];
    for (int i = 0; i < M; i++) {
        snprintf(text[i], sizeof text[i], i % 3 ? "batch %d" : "name %d", i % 3 == 2 ? i - 1 : i);
        str[i] = text[i];
        len[i] = strlen(text[i]);
    }
    sp_rep_intern_many(&s, str, len, many, M);
    size_t differ = 0;
    for (int i = 0; i < M; i++)
        differ += many[i] != sp_rep_intern_id(&s, text[i]) || strcmp(sp_rep_str(&s, many[i]), text[i]) != 0;
    CHECK(!s.oom && differ == 0, "batched interning: %zu of %d differ from one at a time", differ, M);

    /* The canonical order compares text, not ids (ids follow input order). */
    sp_rep_event_t x, y;
    sp_rep_reset(&s, &x);
    sp_rep_reset(&s, &y);
    x.name = sp_rep_intern_id(&s, "zzz");
    y.name = sp_rep_intern_id(&s, "aaa");
    CHECK(x.name < y.name && sp_rep_cmp(&s, &x, &y) > 0 && sp_rep_cmp(&s, &y, &x) < 0,
          "events equal but for the name order by its text");
    sp_rep_free(&s);
}

/* Host calls one after another on one thread (no nesting: self time is the
 * duration), 40 stacks x 7 names, some calls under 1 us. */
static void check_stacks(void)
{
    enum { N = 20000, STACKS = 40, NAMES = 7 };
    sp_rep_set_t s;
    sp_rep_init(&s);
    static int64_t want[STACKS][NAMES];
    char buf[64];
    int64_t t = 0;
    for (int i = 0; i < N; i++) {
        int k = (int)(check_rnd() % STACKS), m = (int)(check_rnd() % NAMES);
        int64_t dur = (int64_t)(check_rnd() % 3000);
        sp_rep_event_t *e = sp_rep_add(&s);
        e->cat = SP_REP_RUNTIME;
        sp_rep_set_ts(e, t);
        e->dur = dur;
        sp_rep_set_lane(&s, e, 1, 1, 0);
        snprintf(buf, sizeof buf, "main;f%02d;g%d", k, k % 3);
        sp_rep_detail_t d = sp_rep_no_detail(&s);
        d.stack = sp_rep_intern_id(&s, buf);
        sp_rep_set_detail(&s, e, &d);
        snprintf(buf, sizeof buf, "cudaCall%d", m);
        e->name = sp_rep_intern_id(&s, buf);
        want[k][m] += dur;
        t += dur + 10;
    }
    CHECK(sp_rep_analyze(&s) == 0, "analyze");
    sp_rb_t got, exp;
    sp_rb_init(&got);
    sp_rb_init(&exp);
    CHECK(sp_rep_stacks(&s, "self_cpu_time_total", &got) == 0, "stacks written");
    for (int k = 0; k < STACKS; k++)   /* "main;fKK;gN" sorts by KK: the stacks' text order */
        for (int m = 0; m < NAMES; m++)
            if (want[k][m] >= 1000)
                sp_rb_printf(&exp, "main;f%02d;g%d;cudaCall%d %" PRId64 "\n", k, k % 3, m, want[k][m] / 1000);
    CHECK(got.n == exp.n && memcmp(got.s, exp.s, got.n) == 0, "stacks summed per pair, sorted:\n%.*s\nwant\n%.*s",
          (int)(got.n < 400 ? got.n : 400), got.s, (int)(exp.n < 400 ? exp.n : 400), exp.s);
    sp_rb_free(&got);
    sp_rb_free(&exp);
    sp_rep_free(&s);
}

static sp_gpu_event_t work(uint64_t start, uint32_t corr)
{
    sp_gpu_event_t e;
    memset(&e, 0, sizeof e);
    e.kind = SP_GPU_KERNEL;
    e.start = start;
    e.end = start + 5;
    e.correlation = corr;
    return e;
}

static sp_gpu_api_t call(uint64_t start, uint32_t corr)
{
    return (sp_gpu_api_t){start, start + 5, SP_GPU_RUNTIME, corr, 211, 7, 0};
}

static void check_take(void)
{
    /* Window [1000, 2000]: calls 1..3 in it, call 4 after; a kernel of call 2
     * that ran after the close is the window's; a record before it is no
     * window's and goes. GPU work and API calls in their own arrays. */
    sp_gpu_api_t calls[] = {call(500, 9) /* before: dropped */, call(1100, 1), call(1300, 2), call(1400, 3),
                            call(2500, 4)};
    sp_gpu_event_t kern[] = {work(1200, 1), work(2600, 2), work(2700, 4) /* the later window's */};
    sp_gpu_recs_t r = {.work = malloc(sizeof kern + 3 * sizeof *kern), .nwork = 3, .capwork = 6,
                       .calls = malloc(sizeof calls), .ncalls = 5, .capcalls = 5}, out;
    sp_gpu_event_t *oldw = r.work;
    sp_gpu_api_t *oldc = r.calls;
    memcpy(r.work, kern, sizeof kern);
    memcpy(r.calls, calls, sizeof calls);
    size_t got = sp_cupti_take_window(&r, 1000, 2000, &out);
    CHECK(got == 5 && out.work == oldw && out.calls == oldc, "the window's 5 records, in the old arrays (%zu)", got);
    CHECK(out.nwork == 2 && out.capwork == 2 && out.work[0].start == 1200 && out.work[1].start == 2600,
          "the window's GPU work in order (%zu)", out.nwork);
    CHECK(out.ncalls == 3 && out.capcalls == 3 && out.calls[0].start == 1100 && out.calls[2].start == 1400 &&
              out.calls[1].cbid == 211 && out.calls[1].tid == 7,
          "the window's calls in order, fields kept (%zu)", out.ncalls);
    CHECK(r.nwork == 1 && r.capwork == 1 && r.work && r.work != oldw && r.work[0].start == 2700,
          "later GPU work in a new array (%zu)", r.nwork);
    CHECK(r.ncalls == 1 && r.capcalls == 1 && r.calls && r.calls != oldc && r.calls[0].start == 2500,
          "later calls in a new array (%zu)", r.ncalls);
    free(out.work);
    free(out.calls);
    got = sp_cupti_take_window(&r, 2001, 3000, &out);
    CHECK(got == 2 && r.nwork == 0 && r.ncalls == 0 && !r.work && !r.calls, "the next window takes them all");
    free(out.work);
    free(out.calls);
    got = sp_cupti_take_window(&r, 0, 10, &out);
    CHECK(got == 0 && !out.work && !out.calls && !out.nwork && !out.ncalls, "an empty take");
}

/* stepprof's own sync found among the calls, removed, and every record of
 * both arrays shifted onto the span the host timed. */
static void check_marker_fix(void)
{
    sp_gpu_api_t calls[] = {call(100, 1), {200, 260, SP_GPU_RUNTIME, 2, 165, 9, 0}, call(300, 3)};
    sp_gpu_event_t kern[] = {work(150, 1)};
    kern[0].queued = 140;
    sp_gpu_recs_t r = {.work = kern, .nwork = 1, .capwork = 1, .calls = calls, .ncalls = 3, .capcalls = 3};
    int64_t offset = 0;
    CHECK(!sp_cupti_marker_fix(&r, 8, 165, 0, 0, &offset), "no sync record on that thread");
    CHECK(sp_cupti_marker_fix(&r, 9, 165, 210, 280, &offset) && offset == 10, "moved by 10 (%" PRId64 ")", offset);
    CHECK(r.ncalls == 2 && calls[0].start == 110 && calls[1].start == 310 && calls[1].correlation == 3,
          "the sync removed, the calls shifted");
    CHECK(kern[0].start == 160 && kern[0].end == 165 && kern[0].queued == 150, "the GPU work shifted");
    sp_cupti_drop_thread(&r, 7);
    CHECK(r.ncalls == 0 && r.nwork == 1, "thread 7's calls dropped, GPU work kept");
}

/* Rows with few distinct values (long runs of ties, whose order is first-seen). */
static void check_row_limit(void)
{
    enum { N = 5000 };
    static sp_rep_row_t full[N], part[N];
    static const char *names[N];
    static char text[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i], "row%d", i);
        names[i] = text[i];
        full[i] = (sp_rep_row_t){.name = names[i], .self_cpu = (int64_t)(check_rnd() % 37), .count = 1};
    }
    CHECK(sp_rep_sort_rows(full, N, "self_cpu_time_total", -1) == 0, "full sort");
    long limits[] = {0, 1, 10, 17, 100, N - 1, N, N + 5};
    for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
        for (int i = 0; i < N; i++)
            part[i] = (sp_rep_row_t){.name = names[i], .self_cpu = 0, .count = 1};
        for (int i = 0; i < N; i++) {   /* the same rows, in their first-seen order */
            int k = atoi(full[i].name + 3);
            part[k].self_cpu = full[i].self_cpu;
        }
        CHECK(sp_rep_sort_rows(part, N, "self_cpu_time_total", limits[l]) == 0, "limited sort");
        long top = limits[l] < N ? limits[l] : N, bad = 0;
        for (long i = 0; i < top; i++)
            bad += part[i].name != full[i].name;
        CHECK(bad == 0, "limit %ld: %ld of the first rows differ from the full sort's", limits[l], bad);
    }
}

/* sp_rep_permute against a copy made the plain way, on 100k 24-byte items. */
static void check_permute(void)
{
    enum { N = 100000 };
    typedef struct { uint64_t a, b, c; } item_t;
    item_t *v = malloc(N * sizeof *v), *want = malloc(N * sizeof *want);
    sp_rank_t *k = malloc(N * sizeof *k);
    size_t *p = malloc(N * sizeof *p);
    for (size_t i = 0; i < N; i++) {
        v[i] = (item_t){i, i * 3, ~i};
        p[i] = i;
    }
    for (size_t i = N - 1; i > 0; i--) {   /* a random permutation, with its fixed points */
        size_t j = check_rnd() % (i + 1), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    for (size_t i = 0; i < N; i++) {
        want[i] = v[p[i]];
        k[i] = (sp_rank_t){0, p[i]};
    }
    CHECK(sp_rep_permute(v, N, sizeof *v, k, N) == 0, "permute");
    CHECK(memcmp(v, want, N * sizeof *v) == 0, "in-place permutation equals the copy");

    /* The top form: the first `top` as ranked, every other item once after them. */
    static const size_t tops[] = {0, 1, 1000, N - 1};
    for (size_t t = 0; t < sizeof tops / sizeof *tops; t++) {
        size_t top = tops[t];
        for (size_t i = 0; i < N; i++) {
            v[i] = (item_t){i, i * 3, ~i};
            k[i] = (sp_rank_t){(double)(check_rnd() % 5000), i};
        }
        sp_rep_rank(k, N, top);
        for (size_t j = 0; j < top; j++)
            want[j] = v[k[j].i];
        CHECK(sp_rep_permute(v, N, sizeof *v, k, top) == 0, "permute the top %zu", top);
        CHECK(memcmp(v, want, top * sizeof *v) == 0, "top %zu: the first ones in ranked order", top);
        uint8_t *seen = calloc(N, 1);
        size_t bad = 0;
        for (size_t i = 0; i < N; i++) {
            bad += v[i].a >= N || seen[v[i].a] || v[i].b != v[i].a * 3 || v[i].c != ~v[i].a;
            if (v[i].a < N)
                seen[v[i].a] = 1;
        }
        CHECK(bad == 0, "top %zu: %zu items lost, repeated or torn", top, bad);
        free(seen);
    }
    free(v);
    free(want);
    free(k);
    free(p);
}

/* Ids asked for out of order, sparse and dense, against a plain array. */
static void check_idmap(void)
{
    enum { N = 3000000 };
    sp_rep_idmap_t m = {0};
    uint32_t *want = calloc(N, sizeof *want);
    size_t bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t id = (uint32_t)(check_rnd() % N);
        uint32_t *at = sp_rep_idmap_at(&m, id);
        bad += !at || *at != want[id];
        if (at)
            *at = want[id] = (uint32_t)i + 1;
    }
    for (uint32_t id = 0; id < N; id += 7) {
        uint32_t *at = sp_rep_idmap_at(&m, id);
        bad += !at || *at != want[id];
    }
    CHECK(bad == 0, "id map: %zu entries differ from a plain array", bad);
    sp_rep_idmap_free(&m);
    CHECK(m.page == NULL && m.npages == 0, "freed map is empty");
    free(want);
}

/* Two threads intern into a shared set (half the names in common) while one
 * reads back texts it interned before: every name one id, every id its text. */
typedef struct {
    sp_rep_set_t *s;
    int from;
    sp_rep_str_t ids[60000];
    size_t bad;
} intern_arg_t;

static void *intern_thread(void *p)
{
    intern_arg_t *a = p;
    char buf[32];
    for (int i = 0; i < 60000; i++) {
        snprintf(buf, sizeof buf, "shared %d", a->from + i);
        a->ids[i] = sp_rep_intern_id(a->s, buf);
        if (i % 3 == 0) {   /* a text interned earlier, read while the other thread interns */
            int j = i / 2;
            snprintf(buf, sizeof buf, "shared %d", a->from + j);
            a->bad += strcmp(sp_rep_str(a->s, a->ids[j]), buf) != 0;
        }
    }
    return NULL;
}

static void check_shared_intern(void)
{
    sp_rep_set_t s;
    sp_rep_init(&s);
    sp_rep_share(&s);
    static intern_arg_t a[2];
    a[0] = (intern_arg_t){.s = &s, .from = 0};
    a[1] = (intern_arg_t){.s = &s, .from = 30000};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, intern_thread, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    size_t differ = 0;
    for (int i = 0; i < 30000; i++)   /* "shared 30000".. "shared 59999": interned by both */
        differ += a[0].ids[30000 + i] != a[1].ids[i];
    CHECK(!s.oom && a[0].bad == 0 && a[1].bad == 0, "texts read while interning: %zu, %zu wrong", a[0].bad, a[1].bad);
    CHECK(differ == 0, "a name both threads interned: %zu got two ids", differ);
    sp_rep_free(&s);
}

/* ---- nesting: parents, self CPU and CUDA totals against the generated tree ---- */

enum { NEST_MAX = 60000 };
static struct nest_truth {
    long parent;         /* generation index, -1 none */
    int64_t children;    /* direct children's time */
    int64_t cuda;        /* kernels launched by it or below */
    int64_t dur;
} truth[NEST_MAX];
static long ntruth;

/* Host event `gen` on lane (pid, tid) spanning [t0, t0 + dur); children fill
 * it with gaps, `depth` levels down. */
static long gen_host(sp_rep_set_t *s, int pid, int tid, int64_t t0, int64_t dur, long parent, int depth, int with_gpu)
{
    if (ntruth >= NEST_MAX - 2)
        return -1;
    long me = ntruth++;
    truth[me] = (struct nest_truth){parent, 0, 0, dur};
    sp_rep_event_t *e = sp_rep_add(s);
    e->cat = SP_REP_RUNTIME;
    e->ts = t0;
    e->dur = dur;
    sp_rep_set_lane(s, e, pid, tid, 0);
    e->name = sp_rep_intern_id(s, depth % 2 ? "cudaLaunchKernel" : "outer");
    e->bytes = me;   /* the event's generation index, read back after the sort */
    e->correlation = (uint64_t)me + 1;
    if (parent >= 0)
        truth[parent].children += dur;
    if (with_gpu && check_rnd() % 3 == 0) {   /* a kernel it launched, later on the GPU */
        long k = ntruth++;
        int64_t kd = 1 + (int64_t)(check_rnd() % 500);
        truth[k] = (struct nest_truth){-2, 0, 0, kd};
        sp_rep_event_t *g = sp_rep_add(s);
        g->cat = SP_REP_KERNEL;
        g->ts = t0 + dur + (int64_t)(check_rnd() % 1000);
        g->dur = kd;
        sp_rep_set_lane(s, g, 0, 7, 0);
        g->name = sp_rep_intern_id(s, "kernel");
        g->bytes = k;
        g->correlation = (uint64_t)me + 1;
        for (long p = me; p >= 0; p = truth[p].parent)
            truth[p].cuda += kd;
    }
    int64_t t = t0 + 1;
    while (depth > 0 && ntruth < NEST_MAX - 2) {
        int64_t d = 2 + (int64_t)(check_rnd() % (uint64_t)(dur / 3 + 1));
        if (t + d >= t0 + dur)
            break;
        gen_host(s, pid, tid, t, d, me, depth - 1, with_gpu);
        t += d + (int64_t)(check_rnd() % 5);
    }
    return me;
}

static void check_nesting(int with_gpu)
{
    sp_rep_set_t s;
    sp_rep_init(&s);
    ntruth = 0;
    for (int lane = 0; lane < 70; lane++)   /* two processes, 35 threads each: past the lanes' first 64 */
        for (int64_t t = 0; t < 400000; t += 60000)
            gen_host(&s, 100 + lane % 2, lane / 2, t + lane, 50000, -1, 4, with_gpu);
    long chain = -1;   /* one thread 200 deep: past a stack's first 16 */
    for (int d = 0; d < 200; d++)
        chain = gen_host(&s, 100, 99, 1000000 + d, 100000 - 2 * d, chain, 0, with_gpu);
    CHECK(sp_rep_analyze(&s) == 0, "analyze (%ld events)", ntruth);
    CHECK(s.n == (size_t)ntruth, "every event kept: %zu of %ld", s.n, ntruth);
    CHECK(with_gpu ? s.cuda != NULL : s.cuda == NULL, "CUDA totals kept only with GPU work");
    size_t bad_parent = 0, bad_self = 0, bad_cuda = 0, bad_launcher = 0;
    for (size_t i = 0; i < s.n; i++) {
        const sp_rep_event_t *e = &s.ev[i];
        const struct nest_truth *t = &truth[e->bytes];
        if (e->cat == SP_REP_KERNEL) {
            bad_launcher += sp_rep_parent(e) < 0 || s.ev[sp_rep_parent(e)].bytes + 1 != (int64_t)e->correlation;
            bad_cuda += sp_rep_cuda_total(&s, i) != e->dur;
            continue;
        }
        long parent = sp_rep_parent(e) >= 0 ? (long)s.ev[sp_rep_parent(e)].bytes : -1;
        bad_parent += parent != t->parent;
        bad_self += e->self_cpu != t->dur - t->children;
        bad_cuda += sp_rep_cuda_total(&s, i) != t->cuda;
    }
    CHECK(bad_parent == 0, "%s: %zu host events with the wrong parent", with_gpu ? "GPU" : "host only", bad_parent);
    CHECK(bad_self == 0, "%s: %zu host events with the wrong self CPU time", with_gpu ? "GPU" : "host only", bad_self);
    CHECK(bad_cuda == 0, "%s: %zu events with the wrong CUDA total", with_gpu ? "GPU" : "host only", bad_cuda);
    CHECK(bad_launcher == 0, "%zu kernels linked to the wrong call", bad_launcher);
    CHECK(sp_rep_analyze(&s) != 0, "a second analysis of the set fails (its correlation ids are spent)");
    sp_rep_free(&s);
}

/* torch's _remove_dup_nodes, as key_averages sees it: an annotation that is
 * the only child of one with the same name is merged into it (a chain of
 * three into one row with their self time); two children of the same name,
 * a child of another name and a same-name child beside a runtime call are
 * not. */
static void check_merge(void)
{
    static const struct {
        const char *name;
        int cat;
        int64_t ts, dur;
    } ev[] = {
        {"aten::add_", SP_REP_ANNOTATION, 0, 100},   /* <- add_ <- add_ <- cudaLaunchKernel */
        {"aten::add_", SP_REP_ANNOTATION, 10, 80},
        {"aten::add_", SP_REP_ANNOTATION, 20, 60},
        {"cudaLaunchKernel", SP_REP_RUNTIME, 30, 10},
        {"aten::mul", SP_REP_ANNOTATION, 200, 100},  /* two children of its name */
        {"aten::mul", SP_REP_ANNOTATION, 210, 30},
        {"aten::mul", SP_REP_ANNOTATION, 250, 30},
        {"x", SP_REP_ANNOTATION, 400, 100},          /* one child of another name */
        {"y", SP_REP_ANNOTATION, 410, 80},
        {"aten::copy_", SP_REP_ANNOTATION, 600, 100}, /* a same-name child and a runtime call */
        {"aten::copy_", SP_REP_ANNOTATION, 610, 40},
        {"cudaMemcpyAsync", SP_REP_RUNTIME, 660, 20},
    };
    static const struct {
        const char *name;
        long count;
        int64_t self_cpu;
    } want[] = {{"aten::add_", 1, 90}, {"cudaLaunchKernel", 1, 10}, {"aten::mul", 3, 100}, {"x", 1, 20},
                {"y", 1, 80}, {"aten::copy_", 2, 80}, {"cudaMemcpyAsync", 1, 20}};
    sp_rep_set_t s;
    sp_rep_init(&s);
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        sp_rep_event_t *e = sp_rep_add(&s);
        e->cat = ev[i].cat;
        e->ts = ev[i].ts;
        e->dur = ev[i].dur;
        e->name = sp_rep_intern_id(&s, ev[i].name);
        e->correlation = ev[i].cat == SP_REP_RUNTIME ? i + 1 : 0;
        sp_rep_set_lane(&s, e, 1, 1, 0);
    }
    CHECK(sp_rep_analyze(&s) == 0, "analyze");
    sp_rep_row_t *rows = NULL;
    long n = sp_rep_rows(&s, &(sp_rep_opts_t){NULL, -1, 0, 0}, &rows);
    CHECK(n == (long)(sizeof want / sizeof want[0]), "%ld rows", n);
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        const sp_rep_row_t *r = NULL;
        for (long i = 0; i < n; i++)
            r = strcmp(rows[i].name, want[w].name) == 0 ? &rows[i] : r;
        CHECK(r && r->count == want[w].count && r->self_cpu == want[w].self_cpu, "%s: %ld calls, self %lld", want[w].name,
              r ? r->count : -1, r ? (long long)r->self_cpu : -1);
    }
    free(rows);
    sp_rep_free(&s);
}

/* The packed fields: each written at its extremes beside the others at theirs,
 * every one read back; self CPU time written over the correlation id leaves
 * the parent, category, detail and lane beside it. */
static void check_fields(void)
{
    sp_rep_set_t s;
    sp_rep_init(&s);
    const int64_t big[] = {0, 1, -1, 123456789, SP_REP_48_MAX, -SP_REP_48_MAX};
    const uint32_t lanes[] = {0, 1, 0xffff, 0x10000, 0x12345678, 0x7fffffff};
    const int32_t parents[] = {-1, 0, 0xffff, 0x10000, 0x12345678, INT32_MAX};
    size_t bad = 0;
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 6; j++) {
            sp_rep_event_t e;
            sp_rep_reset(&s, &e);
            sp_rep_set_ts(&e, big[5 - j]);
            sp_rep_set_dur(&e, big[i]);
            sp_rep_set_bytes(&e, big[j]);
            e.lane_lo = lanes[i] & 0xffffu;
            e.lane_hi = lanes[i] >> 16;
            sp_rep_set_parent(&e, parents[j]);
            e.correlation = ((uint64_t)1 << 48) - 1 - j;
            e.cat = SP_REP_MEMORY;
            e.detail = (1u << 28) - 1 - (uint32_t)i;
            bad += e.ts != big[5 - j] || e.dur != big[i] || e.bytes != big[j] || sp_rep_lane_of(&e) != lanes[i] ||
                   sp_rep_parent(&e) != parents[j] || e.correlation != ((uint64_t)1 << 48) - 1 - j ||
                   e.cat != SP_REP_MEMORY || e.detail != (1u << 28) - 1 - (uint32_t)i;
            e.self_cpu = -big[j];
            bad += e.self_cpu != -big[j] || e.cat != SP_REP_MEMORY || sp_rep_parent(&e) != parents[j] ||
                   e.detail != (1u << 28) - 1 - (uint32_t)i || e.dur != big[i] || sp_rep_lane_of(&e) != lanes[i];
        }
    CHECK(bad == 0, "packed fields: %zu of 72 read back wrong", bad);
    sp_rep_event_t e;
    sp_rep_reset(&s, &e);
    sp_rep_set_ts(&e, INT64_MIN);
    sp_rep_set_dur(&e, INT64_MAX);
    sp_rep_set_bytes(&e, INT64_MIN);
    CHECK(e.ts == -SP_REP_48_MAX && e.dur == SP_REP_48_MAX && e.bytes == -SP_REP_48_MAX && sp_rep_parent(&e) == -1,
          "48-bit fields clamp: ts %" PRId64 ", dur %" PRId64 ", bytes %" PRId64, (int64_t)e.ts, (int64_t)e.dur,
          (int64_t)e.bytes);
    /* Details: the default is number 0, each distinct one its own number, read back. */
    sp_rep_detail_t d = sp_rep_no_detail(&s);
    sp_rep_set_detail(&s, &e, &d);
    CHECK(e.detail == 0 && sp_rep_shape(&s, &e) == s.no_shape_id && !sp_rep_stack(&s, &e) && !sp_rep_kind(&s, &e) &&
              !sp_rep_launch(&s, &e),
          "a new event's detail is 0: shape \"[]\", no stack, direction or launch");
    enum { D = 5000 };
    static sp_rep_detail_t want[D];
    char text[32];
    size_t wrong = 0;
    for (int i = 0; i < D; i++) {
        snprintf(text, sizeof text, "s%d", i % 97);
        want[i] = (sp_rep_detail_t){sp_rep_intern_id(&s, text), (sp_rep_str_t)(i % 13), 0, (uint32_t)(i % 2)};
        sp_rep_detail_kind(&s, &want[i], (sp_rep_str_t)(i % 7));
        sp_rep_set_detail(&s, &e, &want[i]);
        uint32_t number = e.detail;
        sp_rep_set_detail(&s, &e, &want[i]);   /* the same one again: the same number */
        const sp_rep_detail_t *got = sp_rep_detail_of(&s, &e);
        wrong += e.detail != number || got->shape != want[i].shape || got->stack != want[i].stack ||
                 got->kind != want[i].kind || got->launch != want[i].launch;
    }
    CHECK(wrong == 0 && !s.oom, "%d details back: %zu wrong", D, wrong);
    s.detail_index->max = s.detail_index->n;   /* as if 2^28 were taken */
    d.stack = sp_rep_intern_id(&s, "one too many");
    sp_rep_set_detail(&s, &e, &d);
    CHECK(e.detail == 0 && s.oom, "a detail past the last number is the default and marks the set incomplete");
    s.oom = 0;
    sp_rep_detail_kind(&s, &d, (sp_rep_str_t)1 << 31);
    CHECK(d.kind == 0 && s.oom, "a copy direction id past 2^31 is none and marks the set incomplete");
    sp_rep_free(&s);
}

/* Lanes: an event's (pid, tid, device) back through its 32-bit lane, one lane per distinct triple. */
static void check_lanes(void)
{
    enum { N = 200000 };
    sp_rep_set_t s;
    sp_rep_init(&s);
    static int32_t want[N][3];
    for (size_t i = 0; i < N; i++) {
        int32_t pid = (int32_t)(check_rnd() % 3) - 1, tid = (int32_t)(check_rnd() % 20000), dev = (int32_t)(check_rnd() % 3);
        want[i][0] = pid, want[i][1] = tid, want[i][2] = dev;
        sp_rep_set_lane(&s, sp_rep_add(&s), pid, tid, dev);
    }
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
        bad += sp_rep_pid(&s, &s.ev[i]) != want[i][0] || sp_rep_tid(&s, &s.ev[i]) != want[i][1] ||
               sp_rep_device(&s, &s.ev[i]) != want[i][2];
    CHECK(!s.oom && bad == 0, "lanes: %zu of %d events not back to their pid, tid and device", bad, N);
    uint8_t *seen = calloc(3u * 20000u * 3u, 1);
    size_t distinct = 1;   /* lane 0, (0, 0, 0), is there from the start */
    for (size_t i = 0; i < N; i++) {
        size_t k = ((size_t)(want[i][0] + 1) * 20000u + (size_t)want[i][1]) * 3u + (size_t)want[i][2];
        distinct += !seen[k] && !(want[i][0] == 0 && want[i][1] == 0 && want[i][2] == 0);
        seen[k] = 1;
    }
    CHECK(s.lane_index->n == distinct && distinct > 0x10000, "one lane per distinct triple: %zu lanes, %zu triples (past 2^16)",
          s.lane_index->n, distinct);
    free(seen);
    sp_rep_free(&s);
}

int main(void)
{
    check_ids();
    check_permute();
    check_idmap();
    check_shared_intern();
    check_row_limit();
    check_stacks();
    check_lanes();
    check_fields();
    check_nesting(0);
    check_nesting(1);
    check_merge();
    check_take();
    check_marker_fix();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
