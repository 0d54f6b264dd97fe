"""The Python side of scripts/bench/cpu_vs_pytorch, written from the tutorial's text:
  loop:    its plain PyTorch loop (BasicNet, ToTensor + Normalize through torchvision's dataset,
           DataLoader(shuffle=True, batch_size=64), AdamW lr 1e-3, nll_loss), optionally with
           torch.autocast("cpu", dtype=torch.bfloat16) around the forward and the loss;
  trainer: Transformers' Trainer with the tutorial's MyTrainer, collate_fn and TrainingArguments
           (lr 1e-3, no evaluation, no saving, use_cpu, max_steps).
Both train STEPS optimization steps on torchvision's FashionMNIST under ROOT (ROOT/FashionMNIST/raw
holds the four uncompressed IDX files), time every step, and print one line
  STEADY <samples/s over the steps after the first SKIP> LOOP <samples/s over all the steps>

usage: python cpu_reference.py loop|trainer STEPS SKIP ROOT OUTPUT_DIR [bf16]
"""
import os
import sys
import time

import torch
import torch.nn.functional as F
from torchvision import datasets, transforms

from tutorial import BasicNet

BATCH = 64


def report(times, start, skip):
    steps = len(times)
    steady = (steps - skip) * BATCH / (times[-1] - times[skip - 1])
    print(f"STEADY {steady:.2f} LOOP {steps * BATCH / (times[-1] - start):.2f}", flush=True)


def train_dset(root, train=True):
    transform = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.1307,), (0.3081,))
    ])
    return datasets.FashionMNIST(root, train=train, download=False, transform=transform)


def collate_fn(examples):
    pixel_values = torch.stack([example[0] for example in examples])
    labels = torch.tensor([example[1] for example in examples])
    return {"x": pixel_values, "labels": labels}


def my_trainer_class():
    """The tutorial's MyTrainer; Transformers 5 passes num_items_in_batch as well."""
    from transformers import Trainer

    class MyTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            outputs = model(inputs["x"])
            target = inputs["labels"]
            loss = F.nll_loss(outputs, target)
            return (loss, outputs) if return_outputs else loss

    return MyTrainer


def train_loop(steps, skip, root, bf16):
    torch.manual_seed(42)
    train_loader = torch.utils.data.DataLoader(train_dset(root), shuffle=True, batch_size=BATCH)
    model = BasicNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    times = []
    start = time.perf_counter()
    for batch_idx, (data, target) in enumerate(train_loader):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            output = model(data)
            loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter())
        if len(times) == steps:
            break
    report(times, start, skip)


def train_trainer(steps, skip, root, output_dir):
    from transformers import TrainerCallback, TrainingArguments

    model = BasicNet()
    training_args = TrainingArguments(
        output_dir,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH,
        num_train_epochs=1,
        max_steps=steps,
        learning_rate=1e-3,
        eval_strategy="no",
        save_strategy="no",
        logging_steps=skip,
        remove_unused_columns=False,
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
    )

    class StepTimes(TrainerCallback):  # measurement only: a timestamp at each step's end
        def __init__(self):
            self.start, self.times = None, []

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter())

    timer = StepTimes()
    trainer = my_trainer_class()(
        model,
        training_args,
        train_dataset=train_dset(root),
        data_collator=collate_fn,
        callbacks=[timer],
    )
    trainer.train()
    report(timer.times, timer.start, skip)


if __name__ == "__main__":
    mode, steps, skip, root, output_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    bf16 = len(sys.argv) > 6 and sys.argv[6] == "bf16"
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if mode == "loop":
        train_loop(steps, skip, root, bf16)
    elif mode == "trainer":
        train_trainer(steps, skip, root, output_dir)
    else:
        sys.exit(f"cpu_reference.py: unknown mode {mode} (loop or trainer)")
