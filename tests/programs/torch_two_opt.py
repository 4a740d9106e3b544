# An unmodified CPU training loop with two optimizers per iteration (SGD for
# the encoder, Adam for the head, as per-module optimizers or a GAN's two).
# No profiler code; on_step as in torch_mlp.py, after both steps. Argument:
# iterations (default 8). Prints the final loss.
import sys

import torch
from torch import nn


def train(iters, on_step=None):
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(20, 40), nn.Tanh())
    head = nn.Linear(40, 3)
    opt_enc = torch.optim.SGD(enc.parameters(), lr=0.05)
    opt_head = torch.optim.Adam(head.parameters(), lr=1e-3)
    x = torch.randn(12, 20)
    y = torch.randint(0, 3, (12,))
    for it in range(iters):
        torch.ones(it + 1).sum()  # steps differ: a step counted one iteration off shows in its ops
        opt_enc.zero_grad()
        opt_head.zero_grad()
        loss = nn.functional.cross_entropy(head(enc(x)), y)
        loss.backward()
        opt_enc.step()
        opt_head.step()
        if on_step:
            on_step()
    return loss.item()


if __name__ == "__main__":
    print("loss %.4f" % train(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
