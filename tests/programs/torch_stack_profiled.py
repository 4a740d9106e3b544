# The reference for tests/test_pystack.py: runs train() of
# tests/programs/torch_stack.py under torch.profiler itself with with_stack=True
# and the given schedule (the recipe's prof.step() after optimizer.step()),
# and writes its trace to OUT/torch.pt.trace.json.
# Usage: torch_stack_profiled.py ITERS OUT WAIT WARMUP ACTIVE
import importlib.util
import os
import sys

import torch


def main():
    iters, out = int(sys.argv[1]), sys.argv[2]
    wait, warmup, active = (int(a) for a in sys.argv[3:6])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_stack.py")
    spec = importlib.util.spec_from_file_location("loop", path)
    loop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loop)
    os.makedirs(out, exist_ok=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True,
                                schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                                on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "torch.pt.trace.json"))) as prof:
        loss = loop.train(iters, on_step=prof.step)
    print("loss %.4f" % loss)


if __name__ == "__main__":
    main()
