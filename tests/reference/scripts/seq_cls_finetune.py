"""Transformers' Trainer fine-tuning a text classifier as run_glue.py does, from a folder that
seq_cls_reference.py saved (so that trainer starts from the same weights, its `score` head
included): the `datasets` CSV loader on DATA_DIR/train.csv and DATA_DIR/eval.csv (columns `text`
and `label`; string labels mapped to ids in sorted order, the model's label2id kept where its
names are those; a float `label` column would be a regression, num_labels 1), `text` tokenized
with the folder's tokenizer (truncation at 128, no padding), DataCollatorWithPadding (right
padding, with config.json's pad_token_id: the fixtures' tokenizers have no pad token, so it is
set from the config), Trainer on the CPU in float32: seed 42, learning rate 1e-3, batch 4, 8
steps, logging every step, the linear schedule, then the evaluation, accuracy as
np.argmax(predictions) == labels. The training order is trainer's RandomSampler (torch.randperm
seeded seed + epoch), as hf_finetune.py has it.

With --grad_accum N, Transformers' seq-cls models take **kwargs, so Trainer's
model_accepts_loss_kwargs is True: it counts num_items_in_batch and does not divide the loss by N,
while the model's loss (a mean over its micro-batch) never reads num_items_in_batch. Each
optimizer step's loss and gradient are then the SUM of its N micro-batch means. "ga_check" holds
that, computed by hand from the starting weights for the first step.

With --lora, PEFT's get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=16))
(the default targets, q_proj and v_proj for Llama; PEFT adds "classifier" and "score" to
modules_to_save) is trained; OUT_DIR/adapter_init/ is the adapter before training (LoRA's A from
torch.manual_seed(seed), B zero, score a copy of the folder's), OUT_DIR/adapter/ after it.
(PEFT writes adapter_config.json's target_modules from a set: its registry line fixes
PYTHONHASHSEED so that the file's order is the same on every run.)

usage: seq_cls_finetune.py MODEL_DIR DATA_DIR OUT_DIR [--grad_accum N] [--lora] [--steps N]
Writes OUT_DIR/reference.json: {"label_list", "label2id", "num_labels", "is_regression",
"pad_token_id", "model_accepts_loss_kwargs", "train" / "eval": {"input_ids", "labels"} (the
tokenized rows), "orders": [the permutation of each epoch begun], "logs": [every training log
entry: loss, grad_norm, learning_rate, epoch], "losses", "grad_norms", "learning_rates",
"eval_loss", "eval_accuracy", "eval_logits" [12][K], "eval_predictions", "parameters": {name:
[sum, sum of squares]} after training (for --lora: of the tensors in adapter/'s
adapter_model.safetensors, by their names there), "trainable": the names Trainer trained, and for
--lora "adapter_config" (adapter_config.json) and "adapter_tensors": {name: shape}; for
--grad_accum > 1 "ga_check"}.
"""
import argparse
import json
import os
import tempfile

import numpy as np
import torch
from datasets import ClassLabel, load_dataset
from safetensors.torch import load_file
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding,
                          Trainer, TrainerCallback, TrainingArguments)


class TrainerOrder(torch.utils.data.Sampler):
    """trainer's RandomSampler: epoch e is torch.randperm(n) from a generator seeded seed + e."""

    def __init__(self, n, seed):
        self.n, self.seed, self.epoch, self.orders = n, seed, 0, []

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.n, generator=g).tolist()
        self.orders.append(order)
        return iter(order)


class OrderedTrainer(Trainer):
    def _get_train_sampler(self, *args, **kwargs):
        if getattr(self, "order", None) is None:
            self.order = TrainerOrder(len(self.train_dataset), self.args.seed)
        return self.order


class Record(TrainerCallback):
    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.logs.append({k: v for k, v in logs.items() if "runtime" not in k and "per_second" not in k})


def stats(tensors):
    return {name: [float(t.double().sum()), float(t.double().pow(2).sum())]
            for name, t in sorted(tensors.items())}


def accuracy(prediction):
    return {"accuracy": float((np.argmax(prediction.predictions, axis=1) == prediction.label_ids).mean())}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("data_dir")
    p.add_argument("out")
    p.add_argument("--grad_accum", type=int, default=1)
    p.add_argument("--lora", action="store_true")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)

    # run_glue.py: the CSV files, the label list, num_labels.
    raw = load_dataset("csv", data_files={"train": os.path.join(a.data_dir, "train.csv"),
                                          "validation": os.path.join(a.data_dir, "eval.csv")})
    is_regression = raw["train"].features["label"].dtype in ("float32", "float64")
    if is_regression:
        label_list, num_labels = None, 1
    else:
        label_list = sorted(raw["train"].unique("label"))
        num_labels = len(label_list)
    tokenizer = AutoTokenizer.from_pretrained(a.model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(a.model_dir, num_labels=num_labels,
                                                               dtype=torch.float32)
    label_to_id = None
    if not is_regression:
        own = {k.lower(): v for k, v in model.config.label2id.items()}
        if sorted(own) == sorted(label_list):
            label_to_id = {label: int(own[label]) for label in label_list}
        else:
            label_to_id = {v: i for i, v in enumerate(label_list)}
        model.config.label2id = label_to_id
        model.config.id2label = {i: label for label, i in label_to_id.items()}
    pad = model.config.pad_token_id
    tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad)
    assert tokenizer.pad_token_id == pad and tokenizer.padding_side == "right"

    def preprocess(examples):
        return tokenizer(examples["text"], padding=False, max_length=128, truncation=True)

    if label_to_id is not None:
        # run_glue.py maps the names to label_to_id's ids in its preprocess function; datasets 5.2's
        # map would keep the string column's type there (the ids as "2"), so the names become
        # ids here, by a ClassLabel of label_to_id's order.
        names = [label for label, _ in sorted(label_to_id.items(), key=lambda item: item[1])]
        raw = raw.cast_column("label", ClassLabel(names=names))
    data = raw.map(preprocess, batched=True)
    train, evaluation = data["train"], data["validation"]
    collator = DataCollatorWithPadding(tokenizer)

    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if a.lora:
        from peft import LoraConfig, get_peft_model
        torch.manual_seed(a.seed)
        model = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=16))
        model.save_pretrained(os.path.join(a.out, "adapter_init"))

    record = Record()
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, max_steps=a.steps, per_device_train_batch_size=a.batch,
                                 per_device_eval_batch_size=a.batch, learning_rate=a.lr, seed=a.seed,
                                 lr_scheduler_type="linear", logging_steps=1, save_strategy="no",
                                 eval_strategy="no", report_to=[], gradient_accumulation_steps=a.grad_accum,
                                 disable_tqdm=True, dataloader_drop_last=False, use_cpu=True)
        trainer = OrderedTrainer(model=model, args=args, train_dataset=train, eval_dataset=evaluation,
                                 processing_class=tokenizer, data_collator=collator,
                                 compute_metrics=accuracy, callbacks=[record])
        trainable = [n for n, q in model.named_parameters() if q.requires_grad]
        trainer.train()
        metrics = trainer.evaluate()
        predicted = trainer.predict(evaluation)
        accepts = trainer.model_accepts_loss_kwargs

    out = {"label_list": label_list, "label2id": label_to_id, "num_labels": num_labels,
           "is_regression": is_regression, "pad_token_id": pad, "model_accepts_loss_kwargs": accepts,
           "train": {k: train.to_dict()[c] for k, c in (("input_ids", "input_ids"), ("labels", "label"))},
           "eval": {k: evaluation.to_dict()[c] for k, c in (("input_ids", "input_ids"), ("labels", "label"))},
           "orders": trainer.order.orders, "logs": record.logs,
           "losses": [e["loss"] for e in record.logs],
           "grad_norms": [e.get("grad_norm") for e in record.logs],
           "learning_rates": [e.get("learning_rate") for e in record.logs],
           "eval_loss": metrics["eval_loss"], "eval_accuracy": metrics["eval_accuracy"],
           "eval_logits": [[float(x) for x in row] for row in predicted.predictions.tolist()],
           "eval_predictions": np.argmax(predicted.predictions, axis=1).tolist(),
           "trainable": trainable}
    if a.lora:
        folder = os.path.join(a.out, "adapter")
        model.save_pretrained(folder)
        tensors = load_file(os.path.join(folder, "adapter_model.safetensors"))
        out["parameters"] = stats(tensors)
        out["adapter_tensors"] = {k: list(v.shape) for k, v in sorted(tensors.items())}
        with open(os.path.join(folder, "adapter_config.json")) as f:
            out["adapter_config"] = json.load(f)
    else:
        out["parameters"] = stats(dict(model.named_parameters()))

    if a.grad_accum > 1:
        # The first optimizer step by hand, from the starting weights: its micro-batches' mean
        # losses and the norm of the gradient of their sum (what Trainer steps on) and of their mean.
        fresh = AutoModelForSequenceClassification.from_pretrained(a.model_dir, num_labels=num_labels,
                                                                   dtype=torch.float32)
        fresh.load_state_dict(start)
        fresh.train()
        order = trainer.order.orders[0]
        columns = ["input_ids", "attention_mask", "label"]
        means = []
        for k in range(a.grad_accum):
            rows = [{c: train[i][c] for c in columns} for i in order[k * a.batch:(k + 1) * a.batch]]
            loss = fresh(**collator(rows)).loss
            loss.backward()
            means.append(float(loss))
        norm = float(torch.nn.utils.get_total_norm([q.grad for q in fresh.parameters() if q.grad is not None]))
        out["ga_check"] = {"micro_batch_mean_losses": means, "sum_of_means": sum(means),
                           "mean_of_means": sum(means) / len(means), "grad_norm_of_sum": norm,
                           "grad_norm_of_mean": norm / len(means),
                           "logged_first_loss": record.logs[0]["loss"],
                           "logged_first_grad_norm": record.logs[0]["grad_norm"]}
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
