# An unmodified Hugging Face Trainer run on the CPU: a small BERT classifier
# built from a config (nothing downloaded), AdamW through accelerate's
# optimizer wrapper, gradient accumulation 2 (each step is two forward and
# backward passes, then one optimizer step). No profiler code: train() takes
# an optional on_step, called where the Trainer ends a step (a callback's
# on_step_end, which is where torch.profiler's recipe for the Trainer puts
# prof.step()), for tests/programs/torch_profiled.py.
# Argument: steps (default 8). Prints the final loss.
import sys
import tempfile

import torch
from transformers import (BertConfig, BertForSequenceClassification, PrinterCallback, Trainer, TrainerCallback,
                          TrainingArguments)


class Batches(torch.utils.data.Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, 100, (16,), generator=g), "labels": torch.tensor(i % 2)}


class OnStep(TrainerCallback):
    def __init__(self, fn):
        self.fn = fn

    def on_step_end(self, args, state, control, **kwargs):
        self.fn()


def train(steps, on_step=None):
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=32, num_labels=2))
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=steps, per_device_train_batch_size=4,
                                 gradient_accumulation_steps=2, save_strategy="no", report_to=[], use_cpu=True,
                                 dataloader_num_workers=0, disable_tqdm=True, seed=0)
        trainer = Trainer(model=model, args=args, train_dataset=Batches(),
                          callbacks=[OnStep(on_step)] if on_step else None)
        trainer.remove_callback(PrinterCallback)   # its metrics line has timings: the output would differ run to run
        return trainer.train().training_loss


if __name__ == "__main__":
    print("loss %.4f" % train(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
