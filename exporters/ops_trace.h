/* exporters/ops_trace.h — the Kineto args of PyTorch operators in the trace. */
#ifndef SP_OPS_TRACE_H
#define SP_OPS_TRACE_H

#include "../collectors/events.h"
#include "jsonw.h"

/* The category of a range record: "cpu_op" for an operator, else "user_annotation". */
const char *sp_ops_trace_cat(const sp_event_t *e);
/* Operator args after "External id" (nothing for plain ranges). */
void sp_ops_trace_args(sp_jw_t *w, const sp_event_t *e);

/* Kineto's "fwdbwd" flow pairs linking forward ops to their backward nodes. */
void sp_ops_trace_flows(sp_jw_t *w, const sp_event_ref_t *ev, size_t n, int pid, uint64_t base_ns);

#endif
