# An unmodified CPU training loop fed by a DataLoader with two worker
# processes (argument: the multiprocessing start method, fork or spawn). The
# workers must stay inert under stepprof. Prints the final loss.
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    method = sys.argv[1] if len(sys.argv) > 1 else "fork"
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 8), torch.randint(0, 2, (96,)))
    loader = DataLoader(data, batch_size=16, num_workers=2, multiprocessing_context=method)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    print("loss %.4f" % loss.item())


if __name__ == "__main__":
    main()
