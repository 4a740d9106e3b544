/* collectors/ops.h — PyTorch operators arriving as NVTX ranges from the
 * autograd profiler's NVTX mode (inject/python/ turns it on in windows). */
#ifndef SP_OPS_H
#define SP_OPS_H

/* If `msg` is a range torch's NVTX observer pushed ("aten::mm, seq = 5,
 * op_id = 28, sizes = [[3, 2], [2, 4]], input_op_ids = [...]"), pushes it as
 * an operator (or, for a record_function scope, a plain user range named
 * without torch's suffixes) and returns 1; else 0 and nothing is pushed. */
int sp_ops_push(const char *msg);

#endif
