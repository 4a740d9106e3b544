# An unmodified CPU training loop past the sizes stepprof first provides for
# with with_stack: a model of N tiny Linear layers in a ModuleList (more
# nn.Module instances than collectors/pyname.c's first table holds: it grows),
# each called once per iteration, and a recursion D frames deep (deeper than
# the 256 frames collectors/pystack.c keeps): deep(D) calls a C function (len)
# at each level, then after() runs at the loop's own depth.
# Arguments: iterations (default 7), N (default 1), D (default 0: no recursion).
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(1, 1) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def deep(n):
    len(())
    return deep(n - 1) if n > 1 else 0


def after():
    return len(())


def main():
    iters, n, depth = ([int(a) for a in sys.argv[1:]] + [7, 1, 0][len(sys.argv) - 1:])[:3]
    sys.setrecursionlimit(max(1000, depth + 200))
    torch.manual_seed(0)
    model = Net(n)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.ones(2, 1)
    for _ in range(iters):
        opt.zero_grad()
        if depth:
            deep(depth)
            after()
        loss = model(x).sum()
        loss.backward()
        opt.step()
    print("loss %.4f" % loss.item())


if __name__ == "__main__":
    main()
