/* exporters/memory_trace.c — see memory_trace.h. Kineto's conventions:
 * "Device Type" is c10's (0 CPU, 1 CUDA), pinned host memory is CPU memory
 * with "Device Id" -1, a free carries negative Bytes, and "Total Reserved"
 * equals "Total Allocated" because every byte stepprof counts came straight
 * from CUDA (there is no caching allocator in between to reserve more). Each
 * allocation or free also moves the slot's counter; the counter starts at the
 * window's opening level and ends at its closing one, so the curve spans the
 * whole window. Records only CUPTI saw have no thread: they go on the
 * process's main thread. */
#include "memory_trace.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct ctx {
    sp_jw_t *w;
    int pid;
    uint64_t base, end;
} ctx_t;

static void ts(const ctx_t *c, uint64_t t)
{
    t = t < c->base ? c->base : t > c->end ? c->end : t;
    sp_jw_us(c->w, (int64_t)(t - c->base));
}

static void counter(const ctx_t *c, int slot, uint64_t t, int64_t bytes)
{
    if (slot == SP_MEM_HOST)
        sp_jw_puts(c->w, "{\"ph\":\"C\",\"cat\":\"memory\",\"name\":\"pinned host memory allocated\"");
    else
        sp_jw_printf(c->w, "{\"ph\":\"C\",\"cat\":\"memory\",\"name\":\"GPU %d memory allocated\"", slot);
    sp_jw_printf(c->w, ",\"pid\":%d,\"ts\":", c->pid);
    ts(c, t);
    sp_jw_printf(c->w, ",\"args\":{\"bytes\":%" PRId64 "}},\n", bytes);
}

static void instant(const ctx_t *c, const sp_mem_op_t *op)
{
    int oom = op->type == SP_MOP_OOM, host = op->slot == SP_MEM_HOST;
    int64_t bytes = op->type == SP_MOP_FREE ? -(int64_t)op->bytes : (int64_t)op->bytes;
    sp_jw_printf(c->w, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":\"%s\","
                       "\"pid\":%d,\"tid\":%d,\"ts\":",
                 oom ? "[OutOfMemory]" : "[memory]", c->pid, op->tid ? op->tid : c->pid);
    ts(c, op->t);
    sp_jw_printf(c->w, ",\"args\":{\"Device Type\":%d,\"Device Id\":%d,", host ? 0 : 1, host ? -1 : op->slot);
    if (!oom)
        sp_jw_printf(c->w, "\"Addr\":%" PRIu64 ",", op->addr);
    sp_jw_printf(c->w, "\"Bytes\":%" PRId64 ",\"Total Allocated\":%" PRId64 ",\"Total Reserved\":%" PRId64
                       "}},\n", bytes, op->total, op->total);
}

void sp_memtrace_write(sp_jw_t *w, const sp_mem_cycle_t *m, int pid, uint64_t base_ns, uint64_t end_ns)
{
    if (!m)
        return;
    ctx_t c = {w, pid, base_ns, end_ns};
    int64_t last[SP_MEM_SLOTS];
    for (int s = 0; s < SP_MEM_SLOTS; s++) {
        last[s] = m->start[s];
        if (m->used_slots >> s & 1)
            counter(&c, s, m->t_open, m->start[s]);
    }
    for (size_t i = 0; i < m->nops && !w->err; i++) {
        const sp_mem_op_t *op = &m->ops[i];
        if (sp_mem_op_moves(op)) {
            instant(&c, op);
            counter(&c, op->slot, op->t, op->total);
            last[op->slot] = op->total;
        } else if (op->type == SP_MOP_OOM && op->slot >= 0) {
            instant(&c, op);
        }
    }
    for (int s = 0; s < SP_MEM_SLOTS; s++)
        if (m->used_slots >> s & 1)
            counter(&c, s, m->t_close, last[s]);
}
