"""Reference runs of TRL 1.16's DPOTrainer on sft_fixtures.py's models and preference data, fp32 on
the CPU, for `trainer dpo`'s parity checks: the prepared rows, the per-step logs, the batches each
step took and a checksum of the trained parameters.

usage: dpo_trl_reference.py --case NAME --fixtures DIR [--out OUT.json] [--model DIR] [--train FILE]
                            [--eval FILE] [knobs: --loss_type sigmoid,ipo --loss_weights 1,0.5 --beta B
                            --label_smoothing X --max_length N --truncation_mode keep_start|keep_end
                            --precompute_ref_log_probs true|false --use_peft true|false --lora_r R
                            --lora_alpha A --target_modules all-linear|q_proj,v_proj
                            --per_device_train_batch_size B --gradient_accumulation_steps G
                            --max_steps S --learning_rate LR --eval_steps E --seed S]
       torchrun --standalone --nproc_per_node 2 dpo_trl_reference.py ...   (gloo; rank 0 writes)
A case (CASES) names the fixture model, the train (and eval) file under FIXTURES/data and DPOConfig
keys beyond COMMON; --model/--train/--eval and the knobs override it. Every process takes
per_device_train_batch_size rows a micro-batch (2 unless set), in the Trainer's own order (its
RandomSampler, seeded by `seed`).
Prints one JSON object on stdout (the training's own output goes to stderr), and writes it to --out:
{"case", "world_size", "config" (the settings that differ from DPOConfig's defaults), "rows": every
prepared train row (prompt_ids, chosen_ids, rejected_ids, and ref_chosen_logps/ref_rejected_logps
with precompute_ref_log_probs), "num_train_rows", "batches": the prepared rows' indices of each
micro-batch (with several processes, theirs joined in rank order), "logs": every entry of
state.log_history but the final summary (train steps: loss, grad_norm, learning_rate, rewards/*,
logps/*, logits/*, entropy, mean_token_accuracy, num_tokens, epoch, step; eval entries: eval_loss,
eval_rewards/chosen, ... eval_runtime), "train": the final summary (runtime figures left out),
"params": {name: [sum, sum of squares]} (float64) of every trainable tensor after training, named
as the saved model.safetensors (or, with use_peft, adapter_model.safetensors) names it}.
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
from datasets import Dataset, load_from_disk
from transformers import AutoTokenizer
from trl import DPOConfig, DPOTrainer

# CASE: (fixture model, train file, eval file or None, DPOConfig keys beyond COMMON).
CASES = {
    "sigmoid_conv": ("qwen3", "pref_conv", None, {}),
    "sigmoid_plain": ("llama", "pref_plain", None, {}),
    "implicit": ("qwen3", "pref_implicit", None, {}),
    "mixed": ("qwen3", "pref_conv", None, {"loss_type": ["sigmoid", "ipo"], "loss_weights": [1.0, 0.5]}),
    # LoRA's B starts at zero: a larger step makes its rewards move as visibly.
    "lora": ("qwen3", "pref_conv", None, {"use_peft": True, "learning_rate": 5e-3}),
    "precompute": ("qwen3", "pref_conv", None, {"precompute_ref_log_probs": True}),
    # Accumulation over micro-batches of one, with keep_end truncation: most pref_conv rows run
    # over 48 tokens (prompt + completion), and their starts are cut off.
    "accum_keep_end": ("qwen3", "pref_conv", None, {"per_device_train_batch_size": 1,
                                                    "gradient_accumulation_steps": 2, "max_length": 48,
                                                    "truncation_mode": "keep_end"}),
    "eval": ("qwen3", "pref_conv", "pref_eval", {"eval_strategy": "steps", "eval_steps": 3}),
    # Every other loss at once (their sum), and the f-divergences, LD-DPO and WPO's weights.
    "all_losses": ("qwen3", "pref_conv", None, {
        "loss_type": ["exo_pair", "nca_pair", "bco_pair", "sppo_hard", "aot", "aot_unpaired", "apo_zero",
                      "apo_down", "discopop", "sft", "sigmoid_norm"], "label_smoothing": 0.1}),
    "alpha_ld_wpo": ("qwen3", "pref_conv", None, {
        "loss_type": ["sigmoid", "sigmoid_norm"], "f_divergence_type": "alpha_divergence",
        "f_alpha_divergence_coef": 0.5, "ld_alpha": 0.5, "use_weighting": True}),
    "forward_kl": ("qwen3", "pref_conv", None, {
        "loss_type": ["robust", "exo_pair"], "label_smoothing": 0.1, "f_divergence_type": "forward_kl"}),
    "js_divergence": ("llama", "pref_plain", None, {"loss_type": ["ipo", "hinge"],
                                                    "f_divergence_type": "js_divergence"}),
}
COMMON = dict(use_cpu=True, bf16=False, gradient_checkpointing=False, dataloader_drop_last=False,
              report_to="none", logging_steps=1, seed=42, learning_rate=1e-3, lr_scheduler_type="linear",
              warmup_steps=0, per_device_train_batch_size=2, per_device_eval_batch_size=4,
              gradient_accumulation_steps=1, max_steps=6, save_strategy="no", eval_strategy="no",
              disable_tqdm=True, disable_dropout=True, beta=0.1, max_length=1024)
LORA = dict(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=None)  # PEFT's default targets: q_proj, v_proj
BOOL = {"true": True, "false": False}


def read_jsonl(path, shared=None):
    """The rows of `path`; with `shared` (a folder every process sees), a data set stored there.
    precompute_ref_log_probs writes the reference log-probs beside the data set's files for the
    other processes to read: an in-memory data set puts them in a temporary folder of each
    process's own, which the others do not find (FileNotFoundError on rank 1)."""
    with open(path, encoding="utf-8") as f:
        ds = Dataset.from_list([json.loads(line) for line in f if line.strip()])
    if shared is None:
        return ds
    folder = os.path.join(shared, os.path.basename(path))
    if int(os.environ.get("RANK", "0")) == 0:
        ds.save_to_disk(folder)
    dist.barrier()
    return load_from_disk(folder)


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, choices=CASES)
    parser.add_argument("--fixtures", help="sft_fixtures.py's folder (the case's model and data)")
    parser.add_argument("--out")
    parser.add_argument("--model")
    parser.add_argument("--train")
    parser.add_argument("--eval")
    parser.add_argument("--attn", default="sdpa", choices=("sdpa", "eager"))
    parser.add_argument("--loss_type", type=lambda s: s.split(","))
    parser.add_argument("--loss_weights", type=lambda s: [float(x) for x in s.split(",")])
    for name in ("beta", "label_smoothing", "learning_rate"):
        parser.add_argument("--" + name, type=float)
    for name in ("max_length", "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps",
                 "eval_steps", "seed", "lora_r", "lora_alpha"):
        parser.add_argument("--" + name, type=int)
    parser.add_argument("--truncation_mode", choices=("keep_start", "keep_end"))
    parser.add_argument("--precompute_ref_log_probs", type=BOOL.__getitem__)
    parser.add_argument("--use_peft", type=BOOL.__getitem__)
    parser.add_argument("--target_modules")
    a = parser.parse_args()
    if not a.fixtures and not (a.model and a.train):
        parser.error("--fixtures, or --model and --train")
    return a


def settings(a):
    """(model dir, train file, eval file, DPOConfig kwargs, LoRA kwargs or None)."""
    model_name, train_name, eval_name, extra = CASES[a.case]
    extra = dict(extra)
    use_peft = extra.pop("use_peft", False)
    data = os.path.join(a.fixtures or "", "data")
    model = a.model or os.path.join(a.fixtures, model_name)
    train = a.train or os.path.join(data, train_name + ".jsonl")
    evalf = a.eval or (os.path.join(data, eval_name + ".jsonl") if eval_name else None)
    kwargs = {**COMMON, **extra}
    for k in ("loss_type", "loss_weights", "beta", "label_smoothing", "learning_rate", "max_length",
              "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps", "seed",
              "truncation_mode", "precompute_ref_log_probs"):
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
        peft_config = LoraConfig(task_type="CAUSAL_LM", **lora)

    shared = None
    if world > 1:
        dist.init_process_group("gloo")
        shared = os.path.join(tempfile.gettempdir(), "dpo_trl_reference-" + os.environ["TORCHELASTIC_RUN_ID"])
    # stdout carries the JSON alone: the Trainer's printed logs go to stderr.
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory() as tmp:
        config = DPOConfig(output_dir=tmp, ddp_backend="gloo" if world > 1 else None,
                           model_init_kwargs={"dtype": torch.float32, "attn_implementation": a.attn}, **kwargs)
        trainer = DPOTrainer(
            model=model_dir, processing_class=AutoTokenizer.from_pretrained(model_dir), args=config,
            train_dataset=read_jsonl(train_file, shared),
            eval_dataset=read_jsonl(eval_file, shared) if eval_file else None, peft_config=peft_config)
        ds = trainer.train_dataset
        # Which prepared rows each train micro-batch holds (found by their ids).
        key = lambda e: (tuple(e["prompt_ids"]), tuple(e["chosen_ids"]), tuple(e["rejected_ids"]))
        index = {key(e): i for i, e in enumerate(ds)}
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
        params = checksums(trainer.model, lora is not None)

    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, batches)
        batches = [sum((g[i] for g in gathered), []) for i in range(len(batches))]
    if rank == 0:
        columns = [c for c in ("prompt_ids", "chosen_ids", "rejected_ids", "ref_chosen_logps", "ref_rejected_logps")
                   if c in ds.column_names]
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
        if rank == 0:
            shutil.rmtree(shared, ignore_errors=True)
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def checksums(model, peft):
    """{name: [sum, sum of squares]} of the trainable tensors, named as the saved files name them."""
    out = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if peft:
            name = name.replace(".default.", ".")
        t = p.detach().double()
        out[name] = [t.sum().item(), (t * t).sum().item()]
    return out


if __name__ == "__main__":
    main()
