"""The Transformers side of the fine-tuning parity checks: run_clm.py's data preparation (the
`datasets` text/json loader, the percent split, tokenize, group_texts) and Transformers' Trainer,
with the training order of trainer's RandomSampler (torch.randperm seeded by seed + epoch), so that
both see the same blocks in the same order.

With --steps 0, only evaluates MODEL_DIR (the round trip of a folder trainer saved) and reports
the keys from_pretrained found missing or unexpected.

With --adapter DIR, MODEL_DIR is the base and PEFT's PeftModel.from_pretrained puts the LoRA
adapter folder DIR on it (trainable when --steps > 0): PEFT + Transformers' Trainer.

With --extra JSON, more TrainingArguments (label_smoothing_factor, neftune_noise_alpha,
include_num_input_tokens_seen, ...) join the run's; "logs" then holds every training log entry.

usage: hf_finetune.py MODEL_DIR TRAIN_FILE OUT_JSON [--block_size N] [--batch N] [--steps N]
                      [--lr X] [--seed N] [--validation_split_percentage P] [--grad_accum N]
                      [--adapter DIR] [--extra JSON]
Writes {"train_blocks", "eval_blocks", "losses": [per-step loss], "grad_norms": [...],
"eval_loss": eval loss of the trained model, "first_block": ids of train block 0}.
"""
import argparse
import json
import os
import tempfile
from itertools import chain

import torch
from datasets import load_dataset
from transformers import (AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback,
                          TrainingArguments, default_data_collator)


class TrainerOrder(torch.utils.data.Sampler):
    """trainer's RandomSampler: epoch e is torch.randperm(n) from a generator seeded seed + e."""

    def __init__(self, n, seed):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())


class OrderedTrainer(Trainer):
    def _get_train_sampler(self, *args, **kwargs):
        return TrainerOrder(len(self.train_dataset), self.args.seed)


class Record(TrainerCallback):
    def __init__(self):
        self.losses, self.norms, self.logs = [], [], []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.logs.append({k: v for k, v in logs.items() if "runtime" not in k and "per_second" not in k})
            self.losses.append(logs["loss"])
            self.norms.append(logs.get("grad_norm"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("train_file")
    p.add_argument("out")
    p.add_argument("--block_size", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--grad_accum", type=int, default=1)
    p.add_argument("--validation_split_percentage", type=int, default=5)
    p.add_argument("--count_all_labels", action="store_true")
    p.add_argument("--adapter")
    p.add_argument("--extra", default="{}")
    a = p.parse_args()

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(a.model_dir)
    # A name without an extension (fortunes' files) is text, as trainer reads it.
    ext = os.path.splitext(os.path.basename(a.train_file))[1]
    ext = "text" if ext in ("", ".txt") else "json"
    kwargs = {"keep_linebreaks": True} if ext == "text" else {}
    files = {"train": a.train_file}
    pct = a.validation_split_percentage
    raw_eval = load_dataset(ext, data_files=files, split=f"train[:{pct}%]", **kwargs)
    raw_train = load_dataset(ext, data_files=files, split=f"train[{pct}%:]", **kwargs)

    def tokenize(examples):
        return tokenizer(examples["text"])

    def group_texts(examples):
        concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
        total = (len(concatenated[list(examples.keys())[0]]) // a.block_size) * a.block_size
        result = {k: [t[i:i + a.block_size] for i in range(0, total, a.block_size)]
                  for k, t in concatenated.items()}
        result["labels"] = result["input_ids"].copy()
        return result

    def prepare(ds):
        ds = ds.map(tokenize, batched=True, remove_columns=ds.column_names)
        return ds.map(group_texts, batched=True)

    train, evaluation = prepare(raw_train), prepare(raw_eval)
    model, info = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32,
                                                       output_loading_info=True)
    trainable = None
    if a.adapter:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, a.adapter, is_trainable=a.steps > 0)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    record = Record()
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=a.steps, per_device_train_batch_size=a.batch,
                                 per_device_eval_batch_size=a.batch, learning_rate=a.lr, seed=a.seed,
                                 logging_steps=1, save_strategy="no", report_to=[],
                                 gradient_accumulation_steps=a.grad_accum, disable_tqdm=True,
                                 dataloader_drop_last=False, use_cpu=True, **json.loads(a.extra))
        trainer = OrderedTrainer(model=model, args=args, train_dataset=train, eval_dataset=evaluation,
                                 data_collator=default_data_collator, callbacks=[record])
        # Transformers 5.24 divides a causal LM's summed loss by the label count of labels[..., 1:]
        # only where the model's loss_type is ForCausalLM: GPT2LMHeadModel's is None, so it counts
        # every label (B x T for B x (T - 1) predictions) and logs (T - 1) / T of the mean loss
        # that the model's own forward computes. trainer counts the shifted labels for every
        # causal LM; the reference does the same here (--count_all_labels keeps Transformers').
        if not a.count_all_labels and hasattr(trainer, "_loss_shifts_labels"):
            trainer._loss_shifts_labels = True
        if a.steps > 0:
            trainer.train()
        eval_loss = trainer.evaluate()["eval_loss"]
    with open(a.out, "w") as f:
        json.dump({"train_blocks": len(train), "eval_blocks": len(evaluation), "losses": record.losses,
                   "grad_norms": record.norms, "eval_loss": eval_loss, "logs": record.logs,
                   "first_block": train[0]["input_ids"], "trainable_parameters": trainable,
                   "missing_keys": sorted(info["missing_keys"]),
                   "unexpected_keys": sorted(info["unexpected_keys"])}, f)


if __name__ == "__main__":
    main()
