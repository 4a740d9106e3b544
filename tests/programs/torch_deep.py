# An unmodified CPU training loop that also recurses deeper than stepprof's
# shadow stack keeps (collectors/pystack.c: 256 frames): each iteration,
# deep(300) calls itself down to 300 frames, calls a C function (len) at
# each level, and then after() runs at the loop's own depth. Arguments:
# iterations (default 7), recursion depth (default 300).
import sys

import torch


def deep(n):
    len(())
    return deep(n - 1) if n > 1 else 0


def after():
    return len(())


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    sys.setrecursionlimit(depth + 200)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.ones(2, 4)
    for _ in range(iters):
        opt.zero_grad()
        deep(depth)
        after()
        loss = model(x).sum()
        loss.backward()
        opt.step()
    print("loss %.4f" % loss.item())


if __name__ == "__main__":
    main()
