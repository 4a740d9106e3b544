/* exporters/stacks_out.c — see stacks_out.h. Like torch's export_stacks the
 * value is the integer part of the metric in microseconds and frame text has
 * space, ';', tab and newline turned into '_'. Unlike torch, the API call's
 * own name closes each stack: it stands in for the interposer frame that was
 * dropped, and tells a launch from a synchronize in the same function.
 * Identical stacks are summed before the rounding, as stackcollapse does:
 * rounding each call alone would drop every call shorter than 1 us (most of
 * them, on a fast launch path). Lines come out sorted by stack text. */
#include "stacks_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct line {
    const char *stack, *name;   /* interned: one pointer per text */
    int64_t ns;
} line_t;

static int cmp_line(const void *a, const void *b)
{
    const line_t *x = a, *y = b;
    int c = strcmp(x->stack, y->stack);
    return c ? c : strcmp(x->name, y->name);
}

/* One line per distinct (stack, name) pair, summed as the events are read:
 * memory by pairs, not by events. Open addressing over the lines. */
typedef struct line_map {
    line_t *v;
    size_t n, cap;    /* lines; the index has 2 * cap slots */
    uint32_t *slot;   /* line + 1, 0 = empty */
} line_map_t;

static size_t line_hash(const char *stack, const char *name, size_t mask)
{
    uint64_t h = ((uint64_t)(uintptr_t)stack * 31 ^ (uint64_t)(uintptr_t)name) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & mask;
}

static int line_add(line_map_t *m, const char *stack, const char *name, int64_t ns)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        line_t *v = realloc(m->v, cap * sizeof *v);
        uint32_t *slot = calloc(cap * 2, sizeof *slot);
        if (v)
            m->v = v;
        if (!v || !slot || cap > UINT32_MAX / 2) {
            free(slot);
            return -1;
        }
        free(m->slot);
        m->slot = slot;
        m->cap = cap;
        for (size_t k = 0; k < m->n; k++) {
            size_t j = line_hash(m->v[k].stack, m->v[k].name, cap * 2 - 1);
            while (slot[j])
                j = (j + 1) & (cap * 2 - 1);
            slot[j] = (uint32_t)(k + 1);
        }
    }
    size_t mask = m->cap * 2 - 1, j = line_hash(stack, name, mask);
    for (; m->slot[j]; j = (j + 1) & mask) {
        line_t *l = &m->v[m->slot[j] - 1];
        if (l->stack == stack && l->name == name) {
            l->ns += ns;
            return 0;
        }
    }
    m->v[m->n] = (line_t){stack, name, ns};
    m->slot[j] = (uint32_t)++m->n;
    return 0;
}

static void frame(sp_rb_t *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        c = c == ' ' || c == ';' || c == '\t' || c == '\n' ? '_' : c;
        sp_rb_add(b, &c, 1);
    }
}

int sp_rep_stacks(const sp_rep_set_t *s, const char *metric, sp_rb_t *out)
{
    int cuda;
    if (strcmp(metric, "self_cpu_time_total") == 0)
        cuda = 0;
    else if (strcmp(metric, "self_cuda_time_total") == 0)
        cuda = 1;
    else
        return -1;
    line_map_t m = {0};
    for (size_t i = 0; i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        int64_t ns = cuda ? sp_rep_cuda_total(s, i) : e->self_cpu;   /* read for host events only */
        sp_rep_str_t stack = sp_rep_stack(s, e);
        if (stack && sp_rep_is_host(e->cat) && !sp_rep_merged(e) && ns > 0 && line_add(&m, sp_rep_str(s, stack), sp_rep_str(s, e->name), ns) != 0) {
            free(m.v);
            free(m.slot);
            return -1;
        }
    }
    free(m.slot);
    line_t *v = m.v;
    size_t n = m.n;
    if (n)
        qsort(v, n, sizeof *v, cmp_line);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int64_t ns = 0;
        while (j < n && cmp_line(&v[i], &v[j]) == 0)
            ns += v[j++].ns;
        if (ns >= 1000) {
            for (const char *p = v[i].stack; *p;) {
                size_t k = strcspn(p, ";");
                frame(out, p, k);
                sp_rb_add(out, ";", 1);
                p += k + (p[k] == ';');
            }
            frame(out, v[i].name, strlen(v[i].name));
            sp_rb_printf(out, " %" PRId64 "\n", ns / 1000);
        }
        i = j;
    }
    free(v);
    return out->oom ? -1 : 0;
}

int sp_rep_has_stacks(const sp_rep_set_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (sp_rep_stack(s, &s->ev[i]))
            return 1;
    return 0;
}

int sp_rep_has_gpu_time(const sp_rep_set_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (sp_rep_is_gpu_work(s->ev[i].cat) && s->ev[i].dur > 0)
            return 1;
    return 0;
}
