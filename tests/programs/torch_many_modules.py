# An unmodified CPU training loop whose model has more nn.Module instances
# than stepprof's first module table holds (collectors/pyname.c: it grows):
# a ModuleList of N tiny Linear layers (default 3000), each called once per
# iteration, so with with_stack each recorded step has N + 1 nn.Module events.
# Arguments: iterations (default 7), N.
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


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    torch.manual_seed(0)
    model = Net(n)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.ones(2, 1)
    for _ in range(iters):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
    print("loss %.4f" % loss.item())


if __name__ == "__main__":
    main()
