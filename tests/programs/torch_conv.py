# An unmodified CPU training loop: a small conv net (conv, batch norm, pool,
# linear) trained with SGD and momentum and gradient accumulation (two
# micro-batches per optimizer step); the head reads the features joined with
# torch.cat and torch.stack (TensorList inputs: Input Dims). No profiler code; on_step as in
# torch_mlp.py, after the optimizer step. Argument: iterations (default 8). Prints the final loss.
import sys

import torch
from torch import nn


def train(iters, on_step=None):
    torch.manual_seed(0)
    body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    head = nn.Linear(32, 5)

    def model(xb):
        f = body(xb)
        return head(torch.cat([f, torch.stack([f, f.flip(1)]).mean(0)], dim=1))

    opt = torch.optim.SGD([*body.parameters(), *head.parameters()], lr=0.01, momentum=0.9)
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 5, (8,))
    for _ in range(iters):
        # Gradient accumulation: two micro-batches per optimizer step.
        for xb, yb in ((x[:4], y[:4]), (x[4:], y[4:])):
            loss = nn.functional.cross_entropy(model(xb), yb) / 2
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_step:
            on_step()
    return loss.item()


if __name__ == "__main__":
    print("loss %.4f" % train(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
