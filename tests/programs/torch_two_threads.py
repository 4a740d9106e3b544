# A CPU training loop whose forward passes run on two Python threads at once
# (each thread its own model and optimizer, Hogwild style): torch's sequence
# numbers are per thread, so both threads' autograd nodes reuse the same
# numbers. The threads run in lockstep: b's forward pass, then a's, then a's
# backward, then b's (so for a number both threads have, the forward that ran
# last is a's and the backward that ran last is b's), then thread "a" steps
# its optimizer, then thread "b" (so with the torch marker a step ends at b's
# optimizer step). Before the loop b creates OFFSET autograd nodes, so the
# threads share only some numbers in a step. The models differ in size, so an
# operator's Input Dims say which thread ran it.
# Usage: torch_two_threads.py ITERS            (unmodified; prints the losses)
#        torch_two_threads.py ITERS OUT WAIT WARMUP ACTIVE
#            the same loop under torch.profiler (every thread profiled,
#            prof.step() after b's step), its trace written to OUT/torch.pt.trace.json
import os
import sys
import threading

import torch

SIZES = {"a": (8, 16, 4), "b": (6, 12, 3)}
OFFSET = 3


def train(iters, on_step=None):
    torch.manual_seed(0)
    models = {k: torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.ReLU(), torch.nn.Linear(h, o))
              for k, (i, h, o) in SIZES.items()}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01) for k, m in models.items()}
    data = {k: (torch.randn(5, SIZES[k][0]), torch.randn(5, SIZES[k][2])) for k in SIZES}
    go, b_fwd, a_fwd, a_back, b_back, a_stepped, b_stepped = (threading.Barrier(2) for _ in range(7))
    losses = {}

    def forward(k):
        opts[k].zero_grad()
        x, y = data[k]
        return ((models[k](x) - y) ** 2).mean()   # not mse_loss: NVTX flattens its TensorList Input Dims

    def worker(k):
        if k == "b":
            w = torch.ones(1, requires_grad=True)
            for _ in range(OFFSET):
                w = w * 2   # one autograd node each
        for _ in range(iters):
            go.wait()
            if k == "b":
                loss = forward(k)
            b_fwd.wait()
            if k == "a":
                loss = forward(k)
            a_fwd.wait()
            if k == "a":
                loss.backward()
            a_back.wait()
            if k == "b":
                loss.backward()
            b_back.wait()
            losses[k] = loss.item()
            if k == "a":
                opts[k].step()
            a_stepped.wait()
            if k == "b":
                opts[k].step()
                if on_step:
                    on_step()
            b_stepped.wait()

    threads = [threading.Thread(target=worker, args=(k,), name=k) for k in SIZES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return losses


def main():
    iters = int(sys.argv[1])
    if len(sys.argv) == 2:
        losses = train(iters)
    else:
        out = sys.argv[2]
        wait, warmup, active = (int(a) for a in sys.argv[3:6])
        os.makedirs(out, exist_ok=True)
        with torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                experimental_config=torch._C._profiler._ExperimentalConfig(profile_all_threads=True),
                on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "torch.pt.trace.json"))) as prof:
            losses = train(iters, on_step=prof.step)
    print("loss a %.4f b %.4f" % (losses["a"], losses["b"]))


if __name__ == "__main__":
    main()
