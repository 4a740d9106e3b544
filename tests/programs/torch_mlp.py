# An unmodified training loop (on the CPU unless train() is given a device): an
# MLP trained with Adam. No profiler code: train() takes an optional on_step,
# called where torch.profiler's recipe puts prof.step() (after
# optimizer.step()), for tests/programs/torch_profiled.py.
# Argument: iterations (default 8; a --local_rank=N is ignored). Prints the final loss.
import sys

import torch


def mlp():
    """The seeded model and batch of every MLP loop here (torch_amp.py, torch_spawn.py, torch_deepspeed.py too)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    return model, torch.randn(16, 32), torch.randint(0, 10, (16,))


def train(iters, on_step=None, wrap=None, device=None):
    """wrap: what the model runs in (DistributedDataParallel for torch_spawn.py); device: where."""
    model, x, y = (t.to(device) for t in mlp()) if device else mlp()
    model = wrap(model) if wrap else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for it in range(iters):
        torch.ones(it + 1).sum()  # steps differ: a step counted one iteration off shows in its ops
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if on_step:
            on_step()
    return loss.item()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]   # DeepSpeed's launcher passes it
    print("loss %.4f" % train(int(args[0]) if args else 8))
