"""The Python sides of scripts/bench/lm_vs_transformers, and the folders it trains.

  lm_transformers.py build OUT_DIR [FORTUNES_DIR]
      OUT_DIR/fortunes.txt (the fortunes text files, concatenated), a byte-level BPE of 512 ids
      trained on them (tests/reference/scripts/hf_fixtures.py train_tokenizer, GPT-2's layout), and
      four Hugging Face folders with that tokenizer, randomly initialised, dropout 0:
        gpt2   GPT-2, 4 layers x width 128, 4 heads, 128 positions
        llama  Llama, 4 layers x width 256, 4 heads, 2 KV heads, MLP 688, 256 positions
        small  GPT-2 small's shape (GPT2Config() defaults: 12 x 768, 1024 positions, vocab 50257:
               124 M parameters)
        moe    Qwen3-MoE at Llama's width: 4 layers x 256, 8 experts of 344, 2 a token
  lm_transformers.py trainer|loop MODEL_DIR TRAIN_FILE --steps N --skip K --batch B --block T
                     [--threads N] [--bf16] [--lr X] [--lora R]
      trainer: Transformers' Trainer (use_cpu, bf16 = CPU autocast); loop: a plain PyTorch loop
      (AdamW, linear schedule, loss.backward, clip_grad_norm_ 1.0, step, zero_grad; bf16: autocast).
      Both on run_clm.py's data (datasets' text loader, train[5%:], tokenize, group_texts), both
      timing steps K+1..N themselves; they print "STEADY samples/s seconds/step". --lora R
      (trainer): PEFT's LoRA of rank R (lora_alpha 2R) on Llama's q/k/v/o_proj (GPT-2's c_attn
      and c_proj), printing "TRAINABLE n".
"""
import argparse
import glob
import os
import sys
import time
from itertools import chain

import torch


def build(out, fortunes):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                    "reference", "scripts"))
    from hf_fixtures import fortune_files, train_tokenizer
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                              Qwen3MoeConfig, Qwen3MoeForCausalLM)

    os.makedirs(out, exist_ok=True)
    files = fortune_files(fortunes)
    with open(os.path.join(out, "fortunes.txt"), "wb") as f:
        for path in files:
            with open(path, "rb") as g:
                f.write(g.read())
    tok = train_tokenizer(files, llama3=False)
    eos = tok.eos_token_id
    no_dropout = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    models = {
        "gpt2": lambda: GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=128,
                                                   n_layer=4, n_head=4, bos_token_id=eos,
                                                   eos_token_id=eos, **no_dropout)),
        "llama": lambda: LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=256,
                                                      intermediate_size=688, num_hidden_layers=4,
                                                      num_attention_heads=4, num_key_value_heads=2,
                                                      max_position_embeddings=256, bos_token_id=eos,
                                                      eos_token_id=eos, tie_word_embeddings=False)),
        "small": lambda: GPT2LMHeadModel(GPT2Config(bos_token_id=eos, eos_token_id=eos, **no_dropout)),
        # Qwen3-MoE's layout at Llama's width: 8 experts of 344, 2 a token (the active MLP width of
        # llama's 688), every layer sparse.
        "moe": lambda: Qwen3MoeForCausalLM(Qwen3MoeConfig(
            vocab_size=len(tok), hidden_size=256, intermediate_size=688, moe_intermediate_size=344,
            num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=256,
            bos_token_id=eos, eos_token_id=eos, tie_word_embeddings=False)),
    }
    for name, make in models.items():
        torch.manual_seed(0)
        model = make()
        folder = os.path.join(out, name)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        n = sum(p.numel() for p in model.parameters())
        print(f"{name}: {n / 1e6:.1f} M parameters", file=sys.stderr)


def clm_dataset(tokenizer, train_file, block_size, pct=5):
    """run_clm.py's training blocks of a .txt file (no validation_file: train[pct%:])."""
    from datasets import load_dataset
    raw = load_dataset("text", data_files={"train": train_file}, split=f"train[{pct}%:]",
                       keep_linebreaks=True)

    def tokenize(examples):
        return tokenizer(examples["text"])

    def group_texts(examples):
        concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
        total = (len(concatenated[list(examples.keys())[0]]) // block_size) * block_size
        result = {k: [t[i:i + block_size] for i in range(0, total, block_size)]
                  for k, t in concatenated.items()}
        result["labels"] = result["input_ids"].copy()
        return result

    ds = raw.map(tokenize, batched=True, remove_columns=raw.column_names)
    return ds.map(group_texts, batched=True)


def train(a):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(a.threads)
    tokenizer = AutoTokenizer.from_pretrained(a.model_dir)
    data = clm_dataset(tokenizer, a.train_file, a.block)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32)
    if a.lora:
        from peft import LoraConfig, get_peft_model
        targets = ["c_attn", "c_proj"] if model.config.model_type == "gpt2" else \
            ["q_proj", "k_proj", "v_proj", "o_proj"]
        model = get_peft_model(model, LoraConfig(r=a.lora, lora_alpha=2 * a.lora,
                                                 target_modules=targets, task_type="CAUSAL_LM"))
        print(f"TRAINABLE {sum(p.numel() for p in model.parameters() if p.requires_grad)}")
    stamps = {}
    if a.side == "trainer":
        import tempfile
        from transformers import Trainer, TrainerCallback, TrainingArguments, default_data_collator

        class Stamp(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step in (a.skip, a.steps):
                    stamps[state.global_step] = time.perf_counter()

        with tempfile.TemporaryDirectory() as out:
            args = TrainingArguments(output_dir=out, max_steps=a.steps, per_device_train_batch_size=a.batch,
                                     learning_rate=a.lr, logging_steps=a.steps, save_strategy="no",
                                     report_to=[], disable_tqdm=True, use_cpu=True, bf16=a.bf16,
                                     dataloader_num_workers=0)
            trainer = Trainer(model=model, args=args, train_dataset=data,
                              data_collator=default_data_collator, callbacks=[Stamp()])
            trainer.train()
    else:
        from transformers import default_data_collator, get_linear_schedule_with_warmup
        data = data.with_format("torch")
        loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True,
                                             collate_fn=default_data_collator)
        optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
        schedule = get_linear_schedule_with_warmup(optimizer, 0, a.steps)
        model.train()
        step = 0
        while step < a.steps:
            for batch in loader:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                    loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad()
                step += 1
                if step in (a.skip, a.steps):
                    loss.item()
                    stamps[step] = time.perf_counter()
                if step == a.steps:
                    break
    took = stamps[a.steps] - stamps[a.skip]
    n = a.steps - a.skip
    print(f"STEADY {n * a.batch / took:.3f} {took / n:.4f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "/usr/share/games/fortunes")
        return
    p = argparse.ArgumentParser()
    p.add_argument("side", choices=["trainer", "loop"])
    p.add_argument("model_dir")
    p.add_argument("train_file")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--skip", type=int, required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--lora", type=int, default=0)
    a = p.parse_args()
    assert 0 < a.skip < a.steps
    train(a)


if __name__ == "__main__":
    main()
