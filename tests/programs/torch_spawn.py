# An unmodified CPU DDP job started with torch.multiprocessing (the pattern of
# PyTorch's DDP tutorial): 2 ranks over gloo, each running torch_mlp.py's
# train() with the model in DistributedDataParallel (same data on each rank),
# so the same iteration marks (torch.ones(it + 1)). No launcher variable names the ranks:
# only init_process_group knows them. Arguments: iterations, start method
# (spawn, as mp.spawn, or fork), a scratch directory for the rendezvous file,
# then options: "own", each rank runs torch.profiler itself (wait 1, warmup
# 1, active 1, TensorBoard handler into <scratch>/own), as PyTorch's DDP
# profiling recipes do; "cuda", both ranks train on GPU 0 (gloo reduces CUDA
# tensors; scripts/gpu-validate.sh); "probe", each rank first calls
# cudaMalloc, a CUDA call that activates stepprof before the first optimizer
# step, as a GPU rank's model.to() does. Each rank prints its final loss.
import ctypes
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlp import train  # noqa: E402


def rank_main(rank, world, iters, scratch, opts):
    own = "own" in opts
    if "probe" in opts:   # through the process's symbols, as torch's own calls go (fails without a GPU)
        ctypes.CDLL(None).cudaMalloc(ctypes.byref(ctypes.c_void_p()), ctypes.c_size_t(16))
    rendezvous = os.path.join(os.path.abspath(scratch), "rendezvous")
    dist.init_process_group("gloo", init_method="file://" + rendezvous, rank=rank, world_size=world)
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                  schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=1),
                                  on_trace_ready=torch.profiler.tensorboard_trace_handler(
                                      os.path.join(scratch, "own"))) if own else None
    if prof:
        prof.start()
    loss = train(iters, on_step=prof.step if prof else None, wrap=torch.nn.parallel.DistributedDataParallel,
                 device="cuda" if "cuda" in opts else None)
    if prof:
        prof.stop()
    print("rank %d loss %.4f" % (rank, loss), flush=True)
    dist.barrier()   # no rank tears gloo down while the other still talks to it (aborts now and then)
    dist.destroy_process_group()


if __name__ == "__main__":
    iters, method, scratch = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)
    mp.start_processes(rank_main, args=(2, iters, scratch, sys.argv[4:]), nprocs=2, start_method=method)
