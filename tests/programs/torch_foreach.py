# An unmodified training loop with the optimizer ops a GPU run gets by
# default, forced on the CPU: AdamW's foreach implementation (tensor lists
# of parameters, gradients and moments; the 0-dim step counts on the CPU
# are incremented through the Tensor overload of _foreach_add_) over three
# parameter groups: the two inner layers (four tensors whose sizes repeat
# halfway through the group), the outer layers' other three tensors, and the
# last bias alone (the step counts of a group of 3 read as those of one of 4
# with the Scalar overload); gradients clipped with foreach norms. No profiler code: train() takes an optional on_step, called where
# torch.profiler's recipe puts prof.step() (after optimizer.step()), for
# tests/programs/torch_profiled.py.
# Argument: iterations (default 8). Prints the final loss.
import sys

import torch


def train(iters, on_step=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
    inner = [*model[2].parameters(), *model[4].parameters()]   # [64, 64], [64], [64, 64], [64]
    groups = [{"params": inner, "weight_decay": 0.01},
              {"params": [*model[0].parameters(), model[6].weight], "weight_decay": 0.0},
              {"params": [model[6].bias], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, foreach=True)
    for it in range(iters):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        if on_step:
            on_step()
    return loss.item()


if __name__ == "__main__":
    print("loss %.4f" % train(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
