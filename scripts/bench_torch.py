#!/usr/bin/env python3
"""scripts/bench_torch.py — part of `make bench`: aten operators per second of a CPU training loop
(tests/programs/torch_mlp.py's model, many small steps) bare, under stepprof not recording (a
schedule whose window is never reached: the autograd profiler stays off), under stepprof recording
(the whole run, operators on; and with with_stack: Python frames on every operator; and with
record_shapes: torch's NVTX text then carries every input's sizes) and under torch.profiler (CPU
activity, recording every step; and with with_stack, and with record_shapes), all
in one run so the ratios compare like with like. Operators per step are counted once with
torch.profiler. Usage: bench_torch.py [STEPS] (default $BENCH_TORCH_STEPS or 1000)."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(os.environ.get("SP_BUILD") or os.path.join(ROOT, "build"), "libstepprof.so")

LOOP = r"""
import sys, time, torch
steps, mode = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
if mode == "count":
    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        step()
    print(sum(e.count for e in p.key_averages() if e.key.startswith("aten::")))
    sys.exit(0)
for _ in range(5):
    step()
prof = None
if mode.startswith("torch.profiler"):
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                  with_stack=mode.endswith("with_stack"), record_shapes=mode.endswith("record_shapes"))
    prof.start()
t0 = time.perf_counter()
for _ in range(steps):
    step()
dt = time.perf_counter() - t0
if prof:
    prof.stop()
print(dt)
"""


def run(mode, env, steps, out):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PROF_") and k != "LD_PRELOAD"}
    e.update(env, PROF_OUTPUT_DIR=out, PROF_LOG="quiet")
    p = subprocess.run([sys.executable, "-c", LOOP, str(steps), mode], env=e, capture_output=True, text=True,
                       check=True)
    return float(p.stdout.split()[-1])


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("BENCH_TORCH_STEPS", "1000"))
    with tempfile.TemporaryDirectory() as out:
        ops = run("count", {}, 1, out)
        modes = [("bare", "bare", {}),
                 ("stepprof, not recording", "plain", {"LD_PRELOAD": LIB, "PROF_WAIT": "1000000",
                                                       "PROF_ACTIVE": "1"}),
                 ("stepprof, recording", "plain", {"LD_PRELOAD": LIB, "PROF_BUFFER_MB": "1024"}),
                 ("stepprof, recording, with_stack", "plain", {"LD_PRELOAD": LIB, "PROF_BUFFER_MB": "1024",
                                                               "PROF_WITH_STACK": "1"}),
                 ("stepprof, recording, record_shapes", "plain", {"LD_PRELOAD": LIB, "PROF_BUFFER_MB": "1024",
                                                                  "PROF_RECORD_SHAPES": "1"}),
                 ("torch.profiler", "torch.profiler", {}),
                 ("torch.profiler, with_stack", "torch.profiler, with_stack", {}),
                 ("torch.profiler, record_shapes", "torch.profiler, record_shapes", {})]
        print(f"torch operator benchmark: {steps} steps of an MLP/Adam CPU loop, {ops:.0f} aten ops per step "
              f"(best of 3)")
        best = {}
        for _ in range(3):  # rounds of all modes, so a busy moment of the machine hits every mode alike
            for label, mode, env in modes:
                best[label] = min(best.get(label, float("inf")), run(mode, env, steps, out))
        for label, _, _ in modes:
            print(f"  {label:36s} {ops * steps / best[label]:12.0f} ops/s  {best[label] / steps * 1e6:9.1f} us/step")
        bare = best["bare"]
        for label, _, _ in modes[1:]:
            print(f"  {label + ':':36s} {(best[label] - bare) / (ops * steps) * 1e9:+9.0f} ns per op over bare")


if __name__ == "__main__":
    main()
