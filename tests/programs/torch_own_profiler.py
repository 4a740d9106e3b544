# A training loop that runs torch.profiler itself (schedule, record_shapes,
# TensorBoard trace handler into the directory given as argument). Under
# stepprof it must keep its profiler and its trace. Prints the final loss.
import sys

import torch


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(8, 16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(out)) as prof:
        for _ in range(6):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            prof.step()
    print("loss %.4f" % loss.item())


if __name__ == "__main__":
    main()
