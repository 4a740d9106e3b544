#!/usr/bin/env python3
"""scripts/gpu_torch_loop.py — the PyTorch side of gpu-validate.sh: a small CNN
trained on random data for STEPS steps. Unmodified in plain mode: no NVTX, no
profiler code; under stepprof the torch marker counts its optimizer steps.
  gpu_torch_loop.py plain    OUT.json   no profiler in the script (run bare or under LD_PRELOAD)
  gpu_torch_loop.py torch    OUT.json   torch.profiler with the same schedule and record_shapes,
                                        prof.step() after optimizer.step(), traces to $TORCH_TRACE_DIR
Writes {"step_ms": [...]} (per-step wall time, synchronized) to OUT.json."""
import json
import os
import sys
import time

import torch
import torch.nn as nn

STEPS = int(os.environ.get("STEPS", "30"))
WAIT, WARMUP, ACTIVE = (int(os.environ.get(k, d)) for k, d in (("WAIT", "5"), ("WARMUP", "2"), ("ACTIVE", "5")))


def model():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(64 * 64, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()


def main():
    mode, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    prof = None
    if mode == "torch":
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                       schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                       on_trace_ready=tensorboard_trace_handler(os.environ["TORCH_TRACE_DIR"]))
        prof.start()
    times = []
    for step in range(STEPS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof:
            prof.step()
    if prof:
        prof.stop()
    with open(out, "w") as f:
        json.dump({"step_ms": times}, f)


if __name__ == "__main__":
    main()
