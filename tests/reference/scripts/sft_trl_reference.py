"""Reference runs of TRL 1.16's SFTTrainer on sft_fixtures.py's models and data, fp32 on the CPU,
for `trainer sft`'s parity checks: the per-step logs, the prepared rows and the batches each step
took.

usage: sft_trl_reference.py CASE FIXTURES OUT.json [--eval] [--gradient_checkpointing]
                            [--attn sdpa|eager]
       torchrun --nproc_per_node 2 sft_trl_reference.py ...   (gloo; 2 rows a process a micro-batch)
OUT.json: {"case", "world_size", "steps": [{step, loss, mean_token_accuracy, entropy, num_tokens,
grad_norm, learning_rate}], "rows": the first 12 prepared train rows (input_ids, labels,
seq_lengths when packed), "num_train_rows", "batches": the prepared rows' indices of each
micro-batch (with several processes, theirs joined in rank order), "eval": the last eval log and
"eval_history" (--eval: eval_strategy steps, every 3 steps), "train": the train summary (runtime
left out).
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from datasets import Dataset
from transformers import AutoTokenizer
from trl import SFTConfig, SFTTrainer

# CASE: the fixture model, the train and eval files in FIXTURES/data, SFTConfig keys beyond COMMON.
CASES = {
    "conv_assistant": ("qwen3", "conversations", "conversations_eval", {"assistant_only_loss": True}),
    # qwen3.jinja without generation blocks: TRL swaps in qwen3_training.jinja (conv_assistant's numbers).
    "conv_assistant_plain": ("qwen3_plain", "conversations", "conversations_eval", {"assistant_only_loss": True}),
    "conv_packed": ("qwen3", "conversations", "conversations_eval",
                    {"assistant_only_loss": True, "packing": True, "packing_strategy": "bfd"}),
    # At 128 nearly every conversation fills a row alone; at 256 most rows hold two or three.
    "conv_packed_256": ("qwen3", "conversations", "conversations_eval",
                        {"assistant_only_loss": True, "packing": True, "packing_strategy": "bfd",
                         "max_length": 256}),
    "prompt_completion": ("llama", "prompt_completion", "prompt_completion_eval", {}),
    # TrainingArguments' keys through SFT: the LabelSmoother, each process's own token count, and
    # Transformers' count of the inputs' non-padding tokens.
    "prompt_completion_keys": ("llama", "prompt_completion", "prompt_completion_eval",
                               {"label_smoothing_factor": 0.1, "average_tokens_across_devices": False,
                                "include_num_input_tokens_seen": "non_padding"}),
    "prompt_completion_conv": ("qwen3", "prompt_completion_conv", "conversations_eval", {}),
    "text": ("llama", "text", "text_eval", {}),
}
COMMON = dict(use_cpu=True, bf16=False, dataloader_drop_last=False, report_to="none", logging_steps=1,
              seed=42, learning_rate=1e-3, lr_scheduler_type="linear", warmup_steps=0,
              per_device_train_batch_size=4, per_device_eval_batch_size=4, gradient_accumulation_steps=2,
              max_steps=6, max_length=128, shuffle_dataset=False, save_strategy="no", eval_strategy="no",
              disable_tqdm=True)
STEP_KEYS = ("step", "loss", "mean_token_accuracy", "entropy", "num_tokens", "grad_norm", "learning_rate",
             "num_input_tokens_seen")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return Dataset.from_list([json.loads(line) for line in f if line.strip()])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=CASES)
    parser.add_argument("fixtures")
    parser.add_argument("out")
    parser.add_argument("--eval", action="store_true")
    parser.add_argument("--gradient_checkpointing", action="store_true")
    parser.add_argument("--attn", default="sdpa", choices=("sdpa", "eager"))
    a = parser.parse_args()
    model_name, train_name, eval_name, extra = CASES[a.case]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    model_dir = os.path.join(a.fixtures, model_name)
    data = os.path.join(a.fixtures, "data")

    kwargs = {**COMMON, **extra, "gradient_checkpointing": a.gradient_checkpointing,
              "per_device_train_batch_size": 4 // world, "ddp_backend": "gloo" if world > 1 else None,
              "model_init_kwargs": {"dtype": torch.float32, "attn_implementation": a.attn}}
    if a.eval:
        kwargs.update(eval_strategy="steps", eval_steps=3)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = SFTTrainer(
            model=model_dir, processing_class=AutoTokenizer.from_pretrained(model_dir),
            args=SFTConfig(output_dir=tmp, **kwargs),
            train_dataset=read_jsonl(os.path.join(data, train_name + ".jsonl")),
            eval_dataset=read_jsonl(os.path.join(data, eval_name + ".jsonl")) if a.eval else None)
        # Which prepared rows each train micro-batch holds (found by their input_ids).
        ds = trainer.train_dataset
        index = {tuple(ids): i for i, ids in enumerate(ds["input_ids"])}
        batches, collate, train_loader = [], trainer.data_collator, trainer.get_train_dataloader

        def recording_collator(examples):
            batches.append([index[tuple(e["input_ids"])] for e in examples])
            return collate(examples)

        def recording_train_loader(*args, **kwargs):
            trainer.data_collator = recording_collator
            try:
                return train_loader(*args, **kwargs)
            finally:
                trainer.data_collator = collate

        trainer.get_train_dataloader = recording_train_loader
        train = trainer.train().metrics

    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, batches)
        batches = [sum((g[i] for g in gathered), []) for i in range(len(batches))]
    if int(os.environ.get("RANK", "0")) == 0:
        write(a, trainer, ds, batches, train, world)
    if world > 1:
        # Every rank leaves the process group, then the process without the interpreter's
        # teardown: gloo's threads abort it now and then ("terminate called without an active
        # exception", exit -6) even after destroy_process_group, once the result is written.
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def write(a, trainer, ds, batches, train, world):
    logs = trainer.state.log_history
    rows = [{k: ds[i][k] for k in ("input_ids", "labels", "seq_lengths") if k in ds.column_names}
            for i in range(min(12, len(ds)))]
    evals = [e for e in logs if "eval_loss" in e]
    out = {"case": a.case, "world_size": world, "attn": a.attn,
           "gradient_checkpointing": a.gradient_checkpointing,
           "steps": [{k: e.get(k) for k in STEP_KEYS} for e in logs if "loss" in e],
           "rows": rows, "num_train_rows": len(ds), "batches": batches,
           "train": {k: v for k, v in train.items() if "runtime" not in k and "per_second" not in k}}
    if evals:
        out["eval"], out["eval_history"] = evals[-1], evals
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
