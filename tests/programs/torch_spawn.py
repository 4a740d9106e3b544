# An unmodified CPU DDP job started with torch.multiprocessing (the pattern of
# PyTorch's DDP tutorial): 2 ranks over gloo, each training the MLP of
# torch_mlp.py (same data on each rank). No launcher variable names the ranks:
# only init_process_group knows them. Arguments: iterations, start method
# (spawn, as mp.spawn, or fork), a scratch directory for the rendezvous file,
# and optionally "own": each rank runs torch.profiler itself (wait 1, warmup
# 1, active 1, TensorBoard handler into <scratch>/own), as PyTorch's DDP
# profiling recipes do. Each rank prints its final loss.
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, iters, scratch, own):
    rendezvous = os.path.join(scratch, "rendezvous")
    dist.init_process_group("gloo", init_method="file://" + rendezvous, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,))
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                  schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=1),
                                  on_trace_ready=torch.profiler.tensorboard_trace_handler(
                                      os.path.join(scratch, "own"))) if own else None
    if prof:
        prof.start()
    for it in range(iters):
        torch.ones(it + 1).sum()  # steps differ: a step counted one iteration off shows in its ops
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if prof:
            prof.step()
    if prof:
        prof.stop()
    print("rank %d loss %.4f" % (rank, loss.item()), flush=True)
    dist.barrier()   # no rank tears gloo down while the other still talks to it (aborts now and then)
    dist.destroy_process_group()


if __name__ == "__main__":
    iters, method, scratch = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    own = sys.argv[4:] == ["own"]
    torch.set_num_threads(1)
    mp.start_processes(rank_main, args=(2, iters, scratch, own), nprocs=2, start_method=method)
