/* collectors/ops.h — PyTorch operators arriving as NVTX ranges from the
 * autograd profiler's NVTX mode (inject/python/ turns it on in windows). */
#ifndef SP_OPS_H
#define SP_OPS_H

#include <stdint.h>

/* If `msg` is a range torch's NVTX observer pushed ("aten::mm, seq = 5,
 * op_id = 28, sizes = [[3, 2], [2, 4]], input_op_ids = [...]"), pushes it as
 * an operator (or, for a record_function scope, a plain user range named
 * without torch's suffixes) and returns 1; else 0 and nothing is pushed. */
int sp_ops_push(const char *msg);

/* The operators with tensor-list arguments (torch's schemas), once, as lines
 * "aten::cat\tL.\tL.T\n": name, then per overload one letter per argument:
 * L a Tensor[], O a Tensor?[], T a Tensor (or Tensor?), . no tensor, the
 * letters of an out= overload after a "!". A second call is ignored. */
void sp_ops_set_lists(const char *table);
/* The overloads of operator `name` (an interned id): "L.\tL.T", NULL when
 * it has no tensor-list argument (or no table was set). */
const char *sp_ops_list_kinds(uint32_t name);

#endif
