"""The Python side of scripts/bench/gpu_epoch: one Fashion-MNIST epoch of the tutorial's BasicNet
at batch 64 on DEVICE (cuda or cpu), then its test accuracy, in one of two ways:
  loop:    the tutorial's plain PyTorch loop (torchvision's ToTensor + Normalize per sample,
           DataLoader(shuffle=True, batch_size=64), each batch copied to the device, AdamW lr 1e-3);
  trainer: Transformers' Trainer with the tutorial's MyTrainer, collate_fn and arguments (lr 1e-3,
           no evaluation or saving while training, use_cpu on cpu), scored as the loop is.
ROOT/FashionMNIST/raw holds the four uncompressed IDX files. MAX_STEPS > 0 stops the epoch early
(a smoke test). Prints one line:
  EPOCH <seconds of training> SAMPLES <examples trained> ACCURACY <test accuracy>

usage: python gpu_reference.py loop|trainer DEVICE ROOT OUTPUT_DIR [MAX_STEPS]
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

from cpu_reference import BATCH, collate_fn, my_trainer_class, train_dset
from tutorial import BasicNet


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def test_accuracy(model, root, device):
    loader = torch.utils.data.DataLoader(train_dset(root, train=False), batch_size=1000)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            correct += (model(data).argmax(1) == target).sum().item()
            total += target.numel()
    return correct / total


def run_loop(device, root, max_steps):
    torch.manual_seed(42)
    train_loader = torch.utils.data.DataLoader(train_dset(root), shuffle=True, batch_size=BATCH)
    model = BasicNet().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    samples = 0
    sync(device)
    start = time.perf_counter()
    for step, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        samples += target.numel()
        if max_steps and step + 1 == max_steps:
            break
    sync(device)
    seconds = time.perf_counter() - start
    return seconds, samples, test_accuracy(model, root, device)


def run_trainer(device, root, output_dir, max_steps):
    from transformers import TrainingArguments

    training_args = TrainingArguments(
        output_dir,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH,
        num_train_epochs=1,
        max_steps=max_steps if max_steps else -1,
        learning_rate=1e-3,
        eval_strategy="no",
        save_strategy="no",
        remove_unused_columns=False,
        use_cpu=device.type == "cpu",
        report_to="none",
        disable_tqdm=True,
    )

    trainer = my_trainer_class()(
        BasicNet(),
        training_args,
        train_dataset=train_dset(root),
        data_collator=collate_fn,
    )
    metrics = trainer.train().metrics
    samples = trainer.state.global_step * BATCH if max_steps else len(trainer.train_dataset)
    # Scored as the loop's model is: MyTrainer returns the outputs where Transformers'
    # prediction_step expects the model's output tuple (it would drop the first row of each batch).
    return metrics["train_runtime"], samples, test_accuracy(trainer.model, root, device)


if __name__ == "__main__":
    mode, device, root, output_dir = sys.argv[1], torch.device(sys.argv[2]), sys.argv[3], sys.argv[4]
    max_steps = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))))
    if mode == "loop":
        seconds, samples, accuracy = run_loop(device, root, max_steps)
    elif mode == "trainer":
        seconds, samples, accuracy = run_trainer(device, root, output_dir, max_steps)
    else:
        sys.exit(f"gpu_reference.py: unknown mode {mode} (loop or trainer)")
    print(f"EPOCH {seconds:.4f} SAMPLES {samples} ACCURACY {accuracy:.4f}", flush=True)
