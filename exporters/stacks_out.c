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
    const char *stack, *name;
    int64_t ns;
} line_t;

static int cmp_line(const void *a, const void *b)
{
    const line_t *x = a, *y = b;
    int c = strcmp(x->stack, y->stack);
    return c ? c : strcmp(x->name, y->name);
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
    line_t *v = malloc((s->n ? s->n : 1) * sizeof *v);
    if (!v)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        int64_t ns = cuda ? s->time[i].cuda_total : s->time[i].self_cpu;
        if (e->stack && sp_rep_is_host(e->cat) && ns > 0)
            v[n++] = (line_t){e->stack, e->name, ns};
    }
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
        if (s->ev[i].stack)
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
