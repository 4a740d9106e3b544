/* exporters/ops_trace.h — the Kineto args of PyTorch operators in the trace. */
#ifndef SP_OPS_TRACE_H
#define SP_OPS_TRACE_H

#include "../collectors/events.h"
#include "jsonw.h"

/* The category of a range record: "cpu_op" for an operator, else "user_annotation". */
const char *sp_ops_trace_cat(const sp_event_t *e);

/* Regroups, in place, the Input Dims of operators with tensor-list
 * arguments as Kineto writes them (ops_lists.c). export.c calls it before the
 * trace's writer and the reports' thread read the records, so both read the
 * same dims (done inside the trace's writer, it raced the reports' reads). */
void sp_ops_regroup(const sp_event_ref_t *ev, size_t n);

/* Forward-to-backward links of one cycle's events (sorted by start); NULL
 * when there is no backward op (or no memory: then no links). */
typedef struct sp_ops_links sp_ops_links_t;
sp_ops_links_t *sp_ops_trace_link(const sp_event_ref_t *ev, size_t n);
void sp_ops_trace_free(sp_ops_links_t *l);

/* Operator args of ev[i] after "External id" (nothing for plain ranges). */
void sp_ops_trace_args(sp_jw_t *w, const sp_ops_links_t *l, const sp_event_ref_t *ev, size_t i);
/* Kineto's "fwdbwd" flow pairs linking forward ops to their backward nodes. */
void sp_ops_trace_flows(sp_jw_t *w, const sp_ops_links_t *l, const sp_event_ref_t *ev, int pid, uint64_t base_ns);

#endif
