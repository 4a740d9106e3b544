# An unmodified CPU training loop: a small conv net (conv, batch norm, pool,
# linear) trained with SGD and momentum. No profiler code; on_step as in
# torch_mlp.py. Argument: iterations (default 8). Prints the final loss.
import sys

import torch
from torch import nn


def train(iters, on_step=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 5))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 5, (8,))
    for _ in range(iters):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if on_step:
            on_step()
    return loss.item()


if __name__ == "__main__":
    print("loss %.4f" % train(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
