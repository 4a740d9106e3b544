#!/usr/bin/env python3
"""scripts/gpu_torch_loop.py — the PyTorch side of gpu-validate.sh: a small CNN
(MODEL=cnn, SGD) or a small transformer encoder (MODEL=transformer, Adam)
trained on random data for STEPS steps. Unmodified in plain mode: no NVTX, no
profiler code; under stepprof the torch marker counts its optimizer steps.
WITH_STACK=1 adds with_stack to torch mode; NOSYNC=1 drops the per-step
synchronize (the step times then measure only the host side); BATCH sets
the batch size (64 / 32).
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


MODEL = os.environ.get("MODEL", "cnn")
SYNC = os.environ.get("NOSYNC") != "1"
DEV = os.environ.get("DEVICE", "cuda")  # DEVICE=cpu: a dry run of gpu-validate.sh without a GPU


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 256)
        layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)).mean(1))


def model():
    if MODEL == "transformer":
        return Encoder().to(DEV)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(64 * 64, 256), nn.ReLU(), nn.Linear(256, 10)).to(DEV)


def data():
    n = int(os.environ.get("BATCH", "32" if MODEL == "transformer" else "64"))
    if MODEL == "transformer":
        return torch.randint(0, 1000, (n, 128), device=DEV), torch.randint(0, 10, (n,), device=DEV)
    return torch.randn(n, 3, 32, 32, device=DEV), torch.randint(0, 10, (n,), device=DEV)


def main():
    mode, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    net = model()
    opt = (torch.optim.Adam(net.parameters(), lr=1e-4) if MODEL == "transformer"
           else torch.optim.SGD(net.parameters(), lr=0.01))
    x, y = data()
    prof = None
    if mode == "torch":
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
        prof = profile(activities=acts, record_shapes=True,
                       with_stack=os.environ.get("WITH_STACK") == "1",
                       schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                       on_trace_ready=tensorboard_trace_handler(os.environ["TORCH_TRACE_DIR"]))
        prof.start()
    times = []
    sync()
    for step in range(STEPS):
        if SYNC:
            sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        if SYNC:
            sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof:
            prof.step()
    if prof:
        prof.stop()
    sync()
    with open(out, "w") as f:
        json.dump({"step_ms": times}, f)


if __name__ == "__main__":
    main()
