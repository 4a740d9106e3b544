# An unmodified CPU training loop run in a thread other than the one that
# imported torch (the autograd profiler is per thread). Prints "ok".
import threading

import torch


def work():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(7):
        opt.zero_grad()
        m(torch.randn(3, 4)).sum().backward()
        opt.step()
    print("ok")


t = threading.Thread(target=work)
t.start()
t.join()
