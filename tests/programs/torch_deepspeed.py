# An unmodified CPU training loop on DeepSpeed's engine (ZeRO stage 3, SGD,
# fp32; one process, no launcher): torch_mlp.py's model and batch. ZeRO-3
# steps its inner torch optimizer once per parameter sub-group, and a
# sub_group_size of 1000 splits the model's 2762 parameters, so one
# engine.step() makes several optimizer steps. Arguments: iterations, a
# scratch directory (the rendezvous file). Prints the final loss, the
# engine's global steps and how often the inner optimizer stepped. Needs
# LOCAL_RANK (DeepSpeed asks for it).
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlp import mlp  # noqa: E402

import deepspeed  # noqa: E402


def main():
    iters, scratch = int(sys.argv[1]), sys.argv[2]
    rendezvous = "file://" + os.path.join(os.path.abspath(scratch), "rendezvous")
    deepspeed.init_distributed(dist_backend="gloo", init_method=rendezvous, rank=0, world_size=1,
                               auto_mpi_discovery=False, verbose=False)
    model, x, y = mlp()
    config = {"train_micro_batch_size_per_gpu": 16, "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
              "zero_optimization": {"stage": 3, "sub_group_size": 1000}, "zero_allow_untested_optimizer": True}
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    inner = []
    optimizer.optimizer.register_step_post_hook(lambda *a: inner.append(1))
    for it in range(iters):
        torch.ones(it + 1, 7).sum()  # steps differ (7: DeepSpeed sums 1-D tensors of its own)
        loss = torch.nn.functional.cross_entropy(engine(x), y)
        engine.backward(loss)
        engine.step()
    print("loss %.4f global steps %d inner optimizer steps %d" % (loss.item(), engine.global_steps, len(inner)))


if __name__ == "__main__":
    main()
