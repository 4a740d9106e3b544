/* exporters/ops_trace.c — how an operator record (collectors/ops.c) reads in
 * the trace, as Kineto writes cpu_op events: "Sequence number" and "Fwd
 * thread id" when the op has a sequence number, "Input Dims" with
 * record_shapes (torch's NVTX text is already the JSON list Kineto writes). */
#include "ops_trace.h"

#include "../collectors/ranges.h"
#include "../collectors/strings.h"

#include <inttypes.h>

const char *sp_ops_trace_cat(const sp_event_t *e)
{
    return e->flags & SP_RANGE_OP ? "cpu_op" : "user_annotation";
}

void sp_ops_trace_args(sp_jw_t *w, const sp_event_t *e)
{
    if (!(e->flags & SP_RANGE_OP))
        return;
    if (e->a[1])
        sp_jw_printf(w, ", \"Sequence number\": %" PRIu64 ", \"Fwd thread id\": 0", e->a[1] - 1);
    if (e->a[2]) {
        sp_jw_puts(w, ", \"Input Dims\": ");
        sp_jw_puts(w, sp_str_get((uint32_t)e->a[2]));
    }
}
