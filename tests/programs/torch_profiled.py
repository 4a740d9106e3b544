# The reference for tests/test_torch.py: runs the train() of one of the
# torch_*.py loops under torch.profiler itself, the way its recipe says
# (prof.step() after optimizer.step()), with the schedule stepprof gets from
# PROF_* and record_shapes, and writes beside the trace what key_averages()
# says: {"calls": {name: count}, "shapes": [[name, input shapes, count]] (grouped
# by input shape), "loss": ...} in OUT/key_averages.json.
# Usage: torch_profiled.py PROGRAM.py ITERS OUT WAIT WARMUP ACTIVE
import importlib.util
import json
import os
import sys

import torch


def main():
    path, iters, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    wait, warmup, active = (int(a) for a in sys.argv[4:7])
    spec = importlib.util.spec_from_file_location("loop", path)
    loop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loop)
    os.makedirs(out, exist_ok=True)
    done = {}

    def ready(prof):
        prof.export_chrome_trace(os.path.join(out, "torch.pt.trace.json"))
        done["calls"] = {e.key: e.count for e in prof.key_averages()}
        done["shapes"] = [[e.key, str(e.input_shapes), e.count] for e in prof.key_averages(group_by_input_shape=True)]

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                                on_trace_ready=ready) as prof:
        loss = loop.train(iters, on_step=prof.step)
    with open(os.path.join(out, "key_averages.json"), "w") as f:
        json.dump({"calls": done.get("calls", {}), "shapes": done.get("shapes", []), "loss": loss}, f)
    print("loss %.4f" % loss)


if __name__ == "__main__":
    main()
