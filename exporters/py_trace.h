/* exporters/py_trace.h — with_stack's python_function events in the trace. */
#ifndef SP_PY_TRACE_H
#define SP_PY_TRACE_H

#include "../collectors/events.h"
#include "jsonw.h"

/* The Python ids and parents of one cycle's python_function records (events
 * sorted by start); NULL when there are none (or no memory: then none are
 * written). */
typedef struct sp_py_trace sp_py_trace_t;
sp_py_trace_t *sp_py_trace_prepare(const sp_event_ref_t *ev, size_t n);
void sp_py_trace_free(sp_py_trace_t *p);

/* ev[i], a python_function record, as Kineto writes it (nothing for a
 * superseded cut record). */
void sp_py_trace_write(sp_jw_t *w, const sp_py_trace_t *p, const sp_event_ref_t *ev, size_t i, int pid,
                       uint64_t base_ns);

#endif
