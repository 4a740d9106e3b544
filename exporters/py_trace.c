/* exporters/py_trace.c — the python_function events of a cycle, as
 * torch.profiler(with_stack=True) writes them: one X event per Python
 * function call on its thread, named "file.py(42): fn", with args
 * {"Python parent id": P, "Python id": I} (no parent id for an outermost
 * frame). The records (collectors/pystack.h) carry a frame's start, end and
 * depth; a frame open when a step ended also left a cut record ending there,
 * which its own record (same thread, start and depth, later end) supersedes
 * when it returned inside the cycle; one that stays (the frame was running
 * when the window closed) ends with the cycle's last ProfilerStep, which
 * closed after it, so it encloses the steps as torch's does. Ids number a thread's frames in start
 * order (outer before inner), threads in registration order; a frame's
 * parent is the thread's latest frame one level up that encloses it.
 * nn.Module calls (SP_PYF_MODULE) are named "nn.Module: <class>_<k>" with
 * "Python module id": k, where k numbers the instances of each class (told
 * apart by address, as torch does) in the order the cycle's events first
 * show them, all threads together, as torch's tracer numbers them per
 * profiling session. C function calls ("<built-in method ...>") are
 * records like the others. "CallFrom": "file.py:42", the caller's file (from
 * its frame name) and the line it called from, when the call was seen in a
 * record window. Not written (torch 2.15 writes it): torch's event index
 * ("Ev Idx"). */
#define _GNU_SOURCE
#include "py_trace.h"

#include "../collectors/pystack.h"
#include "../collectors/strings.h"
#include "gpu_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 256   /* collectors/pystack.c's PY_MAX: deeper frames have no record */

struct sp_py_trace {
    uint32_t *id;       /* by event index: Python id, 0 = not written */
    uint32_t *parent;   /* by event index: the parent's Python id, 0 = none */
    uint32_t *module;   /* by event index: an nn.Module call's k + 1, 0 = none; NULL when no module call */
};

typedef struct mod_key {
    uint64_t self, cls;   /* self 0: the class's count of instances */
    uint32_t n;
} mod_key_t;

/* The slot of (self, cls) in the table of cap (a power of two) slots, new ones zeroed with the key set. */
static mod_key_t *mod_find(mod_key_t *t, size_t cap, uint64_t self, uint64_t cls)
{
    size_t i = (size_t)(((self ^ cls * 31) * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
    for (; t[i].cls; i = (i + 1) & (cap - 1))
        if (t[i].self == self && t[i].cls == cls)
            return &t[i];
    t[i] = (mod_key_t){self, cls, 0};
    return &t[i];
}

/* k for each numbered module record, per class in event (start) order; 0 when none or no memory. */
static int number_modules(sp_py_trace_t *p, const sp_event_ref_t *ev, size_t n)
{
    size_t m = 0, cap = 4;
    for (size_t i = 0; i < n; i++)
        m += p->id[i] && (ev[i].ev->flags & SP_PYF_MODULE);
    if (!m)
        return 0;
    while (cap < 4 * m)
        cap *= 2;
    mod_key_t *t = calloc(cap, sizeof *t);
    if (!t || !(p->module = calloc(n, sizeof *p->module))) {
        free(t);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const sp_event_t *e = ev[i].ev;
        if (!p->id[i] || !(e->flags & SP_PYF_MODULE) || !e->a[1] || !e->a[2])
            continue;
        mod_key_t *inst = mod_find(t, cap, e->a[1], e->a[2]);
        if (!inst->n)
            inst->n = ++mod_find(t, cap, 0, e->a[2])->n;
        p->module[i] = inst->n;
    }
    free(t);
    return 0;
}

static int cmp_frame(const void *a, const void *b, void *events)
{
    const sp_event_ref_t *ev = events, *x = &ev[*(const size_t *)a], *y = &ev[*(const size_t *)b];
    if (sp_ev_owner(x->ev)->slot != sp_ev_owner(y->ev)->slot)
        return sp_ev_owner(x->ev)->slot < sp_ev_owner(y->ev)->slot ? -1 : 1;
    if (x->ev->t0 != y->ev->t0)
        return x->ev->t0 < y->ev->t0 ? -1 : 1;
    if (x->ev->a[0] != y->ev->a[0])
        return x->ev->a[0] < y->ev->a[0] ? -1 : 1;
    return (x->ev->t1 < y->ev->t1) - (x->ev->t1 > y->ev->t1);   /* the latest end first: the frame's own record */
}

static int same_frame(const sp_event_t *x, const sp_event_t *y)
{
    return x->t0 == y->t0 && x->a[0] == y->a[0];
}

/* Numbers the sorted records idx[0..k) (superseded cut records get none). */
static void number(sp_py_trace_t *p, const sp_event_ref_t *ev, const size_t *idx, size_t k)
{
    size_t open[DEPTH_MAX];   /* per depth: event index of the thread's latest frame there */
    int have[DEPTH_MAX] = {0};
    uint32_t next = 0;
    for (size_t j = 0; j < k; j++) {
        const sp_event_ref_t *r = &ev[idx[j]];
        if (j && sp_ev_owner(r->ev) != sp_ev_owner(ev[idx[j - 1]].ev))
            for (int d = 0; d < DEPTH_MAX; d++)
                have[d] = 0;
        else if (j && same_frame(r->ev, ev[idx[j - 1]].ev))
            continue;
        uint64_t d = r->ev->a[0];
        if (d >= DEPTH_MAX)
            continue;
        p->id[idx[j]] = ++next;
        if (d && have[d - 1]) {
            const sp_event_t *up = ev[open[d - 1]].ev;
            if (up->t0 <= r->ev->t0 && r->ev->t1 <= up->t1)
                p->parent[idx[j]] = p->id[open[d - 1]];
        }
        open[d] = idx[j];
        have[d] = 1;
    }
}

sp_py_trace_t *sp_py_trace_prepare(const sp_event_ref_t *ev, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ev[i].ev->kind == SP_EV_PYFUNC;
    if (!k)
        return NULL;
    sp_py_trace_t *p = malloc(sizeof *p);
    size_t *idx = malloc(k * sizeof *idx);
    if (p) {
        p->id = calloc(n, sizeof *p->id);
        p->parent = calloc(n, sizeof *p->parent);
        p->module = NULL;
    }
    if (!p || !idx || !p->id || !p->parent) {
        free(idx);
        sp_py_trace_free(p);
        return NULL;
    }
    k = 0;
    uint64_t steps_end = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].ev->kind == SP_EV_PYFUNC)
            idx[k++] = i;
        else if (ev[i].ev->kind == SP_EV_STEP && ev[i].ev->t1 > steps_end)
            steps_end = ev[i].ev->t1;
    }
    qsort_r(idx, k, sizeof *idx, cmp_frame, (void *)ev);
    number(p, ev, idx, k);
    if (number_modules(p, ev, n) < 0) {
        free(idx);
        sp_py_trace_free(p);
        return NULL;
    }
    for (size_t j = 0; j < k; j++) {   /* in place: the records are the exporter's until released */
        sp_event_t *e = ev[idx[j]].ev;
        if (p->id[idx[j]] && (e->flags & SP_PYF_CUT) && e->t1 < steps_end)
            e->t1 = steps_end;
    }
    free(idx);
    return p;
}

void sp_py_trace_free(sp_py_trace_t *p)
{
    if (!p)
        return;
    free(p->id);
    free(p->parent);
    free(p->module);
    free(p);
}

/* "CallFrom": the file of the frame name caller ("file(7): fn") and line. */
static void call_from(sp_jw_t *w, const char *caller, uint64_t line)
{
    const char *end = caller ? strstr(caller, "): ") : NULL, *p = end;
    while (p && p > caller && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (!p || p == end || p == caller || p[-1] != '(')
        return;
    char text[1100];
    snprintf(text, sizeof text, "%.*s:%llu", (int)(p - 1 - caller), caller, (unsigned long long)line);
    SP_JW_LIT(w, ",\"CallFrom\":");
    sp_jw_str(w, text, 0);
}

void sp_py_trace_write(sp_jw_t *w, const sp_py_trace_t *p, const sp_event_ref_t *ev, size_t i, int pid,
                       uint64_t base_ns)
{
    if (!p || !p->id[i])
        return;
    const sp_event_t *e = ev[i].ev;
    uint32_t k = p->module ? p->module[i] : 0;
    char name[600];
    if (k)
        snprintf(name, sizeof name, "%s_%u", sp_str_get(e->name), k - 1);
    sp_gpuv_slice(w, "python_function", k ? name : sp_str_get(e->name), pid, sp_ev_owner(ev[i].ev)->tid,
                  (int64_t)(e->t0 - base_ns), (int64_t)(e->t1 - e->t0));
    SP_JW_LIT(w, ",\"args\":{");
    if (p->parent[i])
        SP_JW_KU(w, "\"Python parent id\":", p->parent[i]), SP_JW_LIT(w, ",");
    SP_JW_KU(w, "\"Python id\":", p->id[i]);
    if (k)
        SP_JW_LIT(w, ","), SP_JW_KU(w, "\"Python module id\":", k - 1);
    if (e->a[3] && e->a[4])
        call_from(w, sp_str_get((uint32_t)e->a[3]), e->a[4]);
    SP_JW_LIT(w, "}},\n");
}
