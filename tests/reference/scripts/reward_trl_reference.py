"""Reference runs of TRL 1.16's RewardTrainer on reward_fixtures.py's sequence-classification models and
sft_fixtures.py's preference data, fp32 on the CPU, for `trainer reward`'s parity checks: the prepared
rows, the per-step logs, the batches each step took and a checksum of the trained parameters.

usage: reward_trl_reference.py --case NAME --fixtures SFT_FIXTURES --rm_fixtures REWARD_FIXTURES
                               [--out OUT.json] [--model DIR] [--train FILE] [--eval FILE]
                               [knobs: --max_length N --center_rewards_coefficient C --learning_rate LR
                               --per_device_train_batch_size B --gradient_accumulation_steps G
                               --max_steps S --eval_steps E --seed S --use_peft true|false --lora_r R
                               --lora_alpha A --target_modules all-linear|q_proj,v_proj]
       torchrun --standalone --nproc_per_node 2 reward_trl_reference.py ...   (gloo; rank 0 writes)
A case (CASES) names the reward model (a folder of REWARD_FIXTURES), the train (and eval) file (under
SFT_FIXTURES/data, or REWARD_FIXTURES/data for pref_margin) and RewardConfig keys beyond COMMON;
--model/--train/--eval and the knobs override it. Every process takes per_device_train_batch_size
rows a micro-batch (2 unless set), in the Trainer's own order (its RandomSampler, seeded by `seed`).
Prints one JSON object on stdout (the training's own output goes to stderr), and writes it to --out:
{"case", "world_size", "model", "train_file", "eval_file", "config" (the settings that differ from
RewardConfig's defaults, and "lora"), "rows": every prepared train row (chosen_ids, rejected_ids: TRL
1.16's column names, and margin where the data has one), "num_train_rows", "batches": the prepared
rows' indices of each micro-batch (with several processes, theirs joined in rank order), "logs":
every entry of state.log_history but the final summary (train steps: loss, grad_norm,
learning_rate, num_tokens, min_reward, mean_reward, max_reward, accuracy, margin, epoch, step;
eval entries: eval_loss, eval_num_tokens, eval_min_reward, ..., eval_runtime, ...), "train": the
final summary (runtime figures left out), "params": {name: [sum, sum of squares]} (float64) of
every tensor of the trained model's model.safetensors (or, with use_peft, adapter_model.safetensors:
the LoRA factors and the trained copy of `score`), named as that file names it}.
"""
import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
from datasets import Dataset
from safetensors.torch import load_file
from transformers import AutoTokenizer
from trl import RewardConfig, RewardTrainer

# CASE: (reward model, train file, eval file or None, RewardConfig keys beyond COMMON).
CASES = {
    "conv": ("qwen3_rm", "pref_conv", None, {}),
    "plain": ("llama_rm", "pref_plain", None, {}),
    "implicit": ("qwen3_rm", "pref_implicit", None, {}),
    "center": ("qwen3_rm", "pref_conv", None, {"center_rewards_coefficient": 0.01}),
    "margin": ("qwen3_rm", "pref_margin", None, {}),
    # TRL drops the rows whose chosen or rejected sequence is over max_length (7 of pref_conv's 24
    # under qwen3's template, of 108 to 139 tokens; 17 remain); it never cuts one.
    "max_length": ("qwen3_rm", "pref_conv", None, {"max_length": 100}),
    "eval": ("qwen3_rm", "pref_conv", "pref_eval", {"eval_strategy": "steps", "eval_steps": 3}),
    # LoRA's B starts at zero: a larger step makes the rewards move as visibly. SEQ_CLS: PEFT trains
    # a copy of `score` too (modules_to_save ["classifier", "score"]).
    "lora": ("qwen3_rm", "pref_conv", None, {"use_peft": True, "learning_rate": 5e-3}),
    # Accumulation over micro-batches of one: the loss divided by the accumulation steps
    # (loss_is_scaled_for_ga False), the metrics averaged over both micro-batches.
    "accum": ("qwen3_rm", "pref_conv", None, {"per_device_train_batch_size": 1,
                                              "gradient_accumulation_steps": 2}),
}
COMMON = dict(use_cpu=True, bf16=False, gradient_checkpointing=False, dataloader_drop_last=False,
              report_to="none", logging_steps=1, seed=42, learning_rate=1e-3, lr_scheduler_type="linear",
              warmup_steps=0, per_device_train_batch_size=2, per_device_eval_batch_size=4,
              gradient_accumulation_steps=1, max_steps=6, save_strategy="no", eval_strategy="no",
              disable_tqdm=True, disable_dropout=True, max_length=1024)
LORA = dict(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=None)  # PEFT's default targets: q_proj, v_proj
BOOL = {"true": True, "false": False}
# The data sets reward_fixtures.py writes (the others are sft_fixtures.py's).
RM_DATA = ("pref_margin",)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return Dataset.from_list([json.loads(line) for line in f if line.strip()])


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, choices=CASES)
    parser.add_argument("--fixtures", help="sft_fixtures.py's folder (the preference data)")
    parser.add_argument("--rm_fixtures", help="reward_fixtures.py's folder (the reward models, pref_margin)")
    parser.add_argument("--out")
    parser.add_argument("--model")
    parser.add_argument("--train")
    parser.add_argument("--eval")
    parser.add_argument("--attn", default="sdpa", choices=("sdpa", "eager"))
    for name in ("center_rewards_coefficient", "learning_rate"):
        parser.add_argument("--" + name, type=float)
    for name in ("max_length", "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps",
                 "eval_steps", "seed", "lora_r", "lora_alpha"):
        parser.add_argument("--" + name, type=int)
    parser.add_argument("--use_peft", type=BOOL.__getitem__)
    parser.add_argument("--target_modules")
    a = parser.parse_args()
    if not (a.fixtures and a.rm_fixtures) and not (a.model and a.train):
        parser.error("--fixtures and --rm_fixtures, or --model and --train")
    return a


def settings(a):
    """(model dir, train file, eval file, RewardConfig kwargs, LoRA kwargs or None)."""
    model_name, train_name, eval_name, extra = CASES[a.case]
    extra = dict(extra)
    use_peft = extra.pop("use_peft", False)

    def data(name):
        return os.path.join((a.rm_fixtures if name in RM_DATA else a.fixtures) or "", "data", name + ".jsonl")

    model = a.model or os.path.join(a.rm_fixtures, model_name)
    train = a.train or data(train_name)
    evalf = a.eval or (data(eval_name) if eval_name else None)
    kwargs = {**COMMON, **extra}
    for k in ("center_rewards_coefficient", "learning_rate", "max_length", "per_device_train_batch_size",
              "gradient_accumulation_steps", "max_steps", "seed"):
        if getattr(a, k) is not None:
            kwargs[k] = getattr(a, k)
    if a.eval_steps is not None:
        kwargs["eval_steps"] = a.eval_steps
    if evalf and kwargs["eval_strategy"] == "no":
        kwargs.update(eval_strategy="steps", eval_steps=kwargs.get("eval_steps", 3))
    if a.use_peft is not None:
        use_peft = a.use_peft
    lora = None
    if use_peft:
        lora = dict(LORA)
        if a.lora_r is not None:
            lora["r"] = a.lora_r
        if a.lora_alpha is not None:
            lora["lora_alpha"] = a.lora_alpha
        if a.target_modules:
            lora["target_modules"] = a.target_modules if a.target_modules == "all-linear" else \
                a.target_modules.split(",")
    return model, train, evalf, kwargs, lora


def main():
    a = parse()
    model_dir, train_file, eval_file, kwargs, lora = settings(a)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    peft_config = None
    if lora:
        from peft import LoraConfig
        peft_config = LoraConfig(task_type="SEQ_CLS", **lora)

    if world > 1:
        dist.init_process_group("gloo")
    # stdout carries the JSON alone: the Trainer's printed logs go to stderr.
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory() as tmp:
        config = RewardConfig(output_dir=tmp, ddp_backend="gloo" if world > 1 else None,
                              model_init_kwargs={"dtype": torch.float32, "attn_implementation": a.attn}, **kwargs)
        trainer = RewardTrainer(
            model=model_dir, processing_class=AutoTokenizer.from_pretrained(model_dir), args=config,
            train_dataset=read_jsonl(train_file),
            eval_dataset=read_jsonl(eval_file) if eval_file else None, peft_config=peft_config)
        ds = trainer.train_dataset
        # Which prepared rows each train micro-batch holds (found by their ids).
        key = lambda e: (tuple(e["chosen_ids"]), tuple(e["rejected_ids"]))
        index = {key(e): i for i, e in enumerate(ds)}
        assert len(index) == len(ds), "two prepared rows alike: the batches would be ambiguous"
        batches, collate, train_loader = [], trainer.data_collator, trainer.get_train_dataloader

        def recording_collator(examples):
            batches.append([index[key(e)] for e in examples])
            return collate(examples)

        def recording_train_loader(*args, **kw):
            trainer.data_collator = recording_collator
            try:
                return train_loader(*args, **kw)
            finally:
                trainer.data_collator = collate

        trainer.get_train_dataloader = recording_train_loader
        train = trainer.train().metrics
        # Accelerate's loader fetches a batch ahead (to know the last): the batches the steps took.
        batches = batches[:trainer.state.global_step * config.gradient_accumulation_steps]
        params = checksums(trainer.model, lora is not None, tmp) if rank == 0 else None

    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, batches)
        batches = [sum((g[i] for g in gathered), []) for i in range(len(batches))]
    if rank == 0:
        columns = [c for c in ("chosen_ids", "rejected_ids", "margin") if c in ds.column_names]
        logs = trainer.state.log_history
        out = {"case": a.case, "world_size": world, "model": model_dir, "train_file": train_file,
               "eval_file": eval_file,
               "config": {**{k: v for k, v in kwargs.items() if k not in ("use_cpu", "disable_tqdm", "report_to")},
                          "lora": lora},
               "rows": [{c: ds[i][c] for c in columns} for i in range(len(ds))], "num_train_rows": len(ds),
               "batches": batches,
               "logs": [e for e in logs if "train_runtime" not in e],
               "train": {k: v for k, v in train.items() if "runtime" not in k and "per_second" not in k},
               "params": params}
        text = json.dumps(out)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
        print(text)
    if world > 1:
        # Every rank leaves the process group, then the process without the interpreter's
        # teardown: gloo's threads abort it now and then ("terminate called without an active
        # exception", exit -6) even after destroy_process_group, once the result is written.
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def checksums(model, peft, tmp):
    """{name: [sum, sum of squares]} of every tensor of the saved model.safetensors (or, with PEFT,
    adapter_model.safetensors): the trainable tensors, named as the saved file names them."""
    folder = os.path.join(tmp, "saved")
    model.save_pretrained(folder)
    tensors = load_file(os.path.join(folder, "adapter_model.safetensors" if peft else "model.safetensors"))
    trainable = sum(1 for p in model.parameters() if p.requires_grad)
    assert len(tensors) == trainable, (sorted(tensors), trainable)
    shutil.rmtree(folder)
    out = {}
    for name in sorted(tensors):
        t = tensors[name].double()
        out[name] = [t.sum().item(), (t * t).sum().item()]
    return out


if __name__ == "__main__":
    main()
