/* inject/torch_lists.c — the entry point inject/python/_stepprof_torch.py
 * calls once, with record_shapes, to hand over which operators take tensor
 * lists (from torch's schemas): torch's NVTX text flattens those lists, and
 * the exporter regroups them as Kineto writes them (collectors/ops.h). */
#include "hook.h"

#include "../collectors/ops.h"

SP_EXPORT void stepprof_torch_lists(const char *table)
{
    sp_ops_set_lists(table);
}
