# An unmodified CPU training loop whose model code lives in this file, so
# Python stacks (with_stack) have frames of the program: Block.forward, Net.forward
# (through a generator, blocks_of) and loss_of call torch ops. No profiler code: train() takes an optional on_step,
# called where torch.profiler's recipe puts prof.step(), for
# tests/programs/torch_stack_profiled.py. Arguments: iterations (default 8).
# With STACK_PROBE=1 it also prints, per iteration, whether stepprof's Python
# profile function is on in this thread (stepprof_pystack(2): "-" when stepprof
# is not in the process). With STACK_CUDA=1 each iteration also makes a CUDA
# runtime call from Python (sync_device, through ctypes: the libcudart torch
# loaded; without a driver it fails, and the loop goes on). With STACK_FORK=1
# a child forked in step 2 prints whether the profile function is on there.
# With STACK_SETPROFILE=1 train() runs under a profile function of its own.
# With STACK_STEP_FN=1 each iteration is one call of one_step(), which steps
# the optimizer (and calls on_step) before it returns: a frame that begins in
# one step and returns in the next.
import ctypes
import os
import sys
import warnings

import torch


class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


def blocks_of(model):
    """model's blocks, one per resume: torch.profiler names a resumed generator's frame by the line it
    yielded at, its first call by its first line."""
    for b in model.blocks:
        yield b


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(32), Block(32)])
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        for b in blocks_of(self):
            x = b(x)
        return self.head(x)


def loss_of(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def probe():
    try:
        f = ctypes.PyDLL(None).stepprof_pystack
    except AttributeError:
        return "-"
    f.argtypes = [ctypes.c_int, ctypes.c_char_p]
    return str(f(2, None))


def sync_device():
    return ctypes.CDLL(None).cudaDeviceSynchronize()


def forked():
    """With STACK_FORK=1, in step 2: a forked child says whether the profile function is on there."""
    # Python 3.12+ warns on fork() in any multi-threaded process; torch's own threads make this one so,
    # with or without stepprof (its warning is not what the test looks at).
    warnings.filterwarnings("ignore", message="This process .* is multi-threaded", category=DeprecationWarning)
    pid = os.fork()
    if pid == 0:
        print("forked child: profile function on: " + probe(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)


def own_profile(frame, event, arg):
    pass


def train(iters, on_step=None):
    if os.environ.get("STACK_SETPROFILE") == "1":
        sys.setprofile(own_profile)
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,))
    seen = []
    step_fn = os.environ.get("STACK_STEP_FN") == "1"
    for _ in range(iters):
        if step_fn:
            loss = one_step(model, opt, x, y, on_step)
        else:
            opt.zero_grad()
            loss = loss_of(model, x, y)
            loss.backward()
            opt.step()
            if on_step:
                on_step()
        seen.append(probe())
        if os.environ.get("STACK_CUDA") == "1":
            sync_device()
        if os.environ.get("STACK_FORK") == "1" and len(seen) == 3:
            forked()
    if os.environ.get("STACK_PROBE") == "1":
        print("profile function on per step: " + "".join(seen))
    if os.environ.get("STACK_SETPROFILE") == "1":
        print("own profile function kept: %s" % (sys.getprofile() is own_profile))
        sys.setprofile(None)
    return loss.item()


def one_step(model, opt, x, y, on_step):
    # train()'s loop body again, on purpose: the other tests need those calls made from train() itself
    # (their parents and CallFrom lines), this one needs them one frame down.
    opt.zero_grad()
    loss = loss_of(model, x, y)
    loss.backward()
    opt.step()
    if on_step:
        on_step()
    return loss


if __name__ == "__main__":
    print("loss %.4f" % train(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
