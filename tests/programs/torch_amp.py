# An unmodified CPU training loop with mixed-precision loss scaling
# (torch.amp.GradScaler): GradScaler.step skips optimizer.step() when the
# gradients overflowed, as fp16 training does in its first iterations while
# the scale settles. Iterations 1 and 3 overflow here (their loss is scaled
# by inf), so their optimizer step never runs; torch.profiler's prof.step()
# still ends them. train() takes an optional on_step, called where the recipe
# puts prof.step(), for tests/programs/torch_profiled.py. Argument: iterations
# (default 8). Prints the final loss and the scale.
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlp import mlp  # noqa: E402

OVERFLOW = (1, 3)


def train(iters, on_step=None):
    model, x, y = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu")
    for it in range(iters):
        torch.ones(it + 1).sum()  # steps differ: a step counted one iteration off shows in its ops
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss * (float("inf") if it in OVERFLOW else 1.0)).backward()
        scaler.step(opt)
        scaler.update()
        if on_step:
            on_step()
    print("scale %.0f" % scaler.get_scale())
    return loss.item()


if __name__ == "__main__":
    print("loss %.4f" % train(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
