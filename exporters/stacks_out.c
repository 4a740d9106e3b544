/* exporters/stacks_out.c — see stacks_out.h. Like torch's export_stacks the
 * value is the integer part of the metric in microseconds and frame text has
 * space, ';', tab and newline turned into '_'. Unlike torch, the API call's
 * own name closes each stack: it stands in for the interposer frame that was
 * dropped, and tells a launch from a synchronize in the same function.
 * Identical stacks are not merged (flamegraph.pl and speedscope sum them). */
#include "stacks_out.h"

#include <inttypes.h>
#include <string.h>

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
    for (size_t i = 0; i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        if (!e->stack || !sp_rep_is_host(e->cat))
            continue;
        int64_t us = (cuda ? e->cuda_total : e->self_cpu) / 1000;
        if (us <= 0)
            continue;
        for (const char *p = e->stack; *p;) {
            size_t n = strcspn(p, ";");
            frame(out, p, n);
            sp_rb_add(out, ";", 1);
            p += n + (p[n] == ';');
        }
        frame(out, e->name, strlen(e->name));
        sp_rb_printf(out, " %" PRId64 "\n", us);
    }
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
