"""The Python side of scripts/bench/memory: the folders it trains, and Transformers' Trainer on them.

  memory_transformers.py build OUT_DIR [FORTUNES_DIR]
      lm_transformers.py's build: OUT_DIR/fortunes.txt and its byte-level BPE of 512 ids (in the
      folders OUT_DIR/gpt2, llama and small, which this script only takes the tokenizer from).
  memory_transformers.py model OUT_DIR TOKENIZER_DIR --layers L [--hidden 2048]
                         [--intermediate 8192] [--heads 32] [--kv-heads 8] [--vocab 128256]
      A Llama shaped like Llama 3.2 1B in vocabulary and width (tied embeddings, rope_theta
      500000, no rope scaling) with L layers, random weights (LlamaConfig's init, seed 0), saved by
      save_pretrained in fp32 with TOKENIZER_DIR's tokenizer; prints "PARAMS n".
  memory_transformers.py trainer MODEL_DIR TRAIN_FILE --steps N --batch B --block T [--threads N]
                         [--bf16] [--gradient-checkpointing] [--optim NAME] [--lr X]
      Transformers' Trainer (use_cpu, fp32 weights, bf16 = CPU autocast, optim as
      TrainingArguments names it) on run_clm.py's data (lm_transformers.clm_dataset); prints
      "STEP k seconds" at the end of each step (time.perf_counter) and "STEADY seconds/step" for
      the steps after the first.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_transformers import build, clm_dataset  # noqa: E402


def make_model(a):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    tok = AutoTokenizer.from_pretrained(a.tokenizer_dir)
    eos = tok.eos_token_id
    config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                         num_hidden_layers=a.layers, num_attention_heads=a.heads,
                         num_key_value_heads=a.kv_heads, max_position_embeddings=131072,
                         rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=eos,
                         eos_token_id=eos, pad_token_id=None)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(a.out_dir)
    tok.save_pretrained(a.out_dir)
    print(f"PARAMS {sum(p.numel() for p in model.parameters())}")


def train(a):
    import tempfile
    from transformers import (AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback,
                              TrainingArguments, default_data_collator)
    torch.set_num_threads(a.threads)
    tokenizer = AutoTokenizer.from_pretrained(a.model_dir)
    data = clm_dataset(tokenizer, a.train_file, a.block)
    if len(data) < a.steps * a.batch:
        sys.exit(f"memory_transformers: {len(data)} blocks of {a.block} tokens, fewer than "
                 f"{a.steps} steps x batch {a.batch}")
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32)
    stamps = {}

    class Stamp(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps[state.global_step] = time.perf_counter()
            print(f"STEP {state.global_step} {stamps[state.global_step]:.3f}", flush=True)

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=a.steps, per_device_train_batch_size=a.batch,
                                 learning_rate=a.lr, logging_steps=1, save_strategy="no",
                                 report_to=[], disable_tqdm=True, use_cpu=True, bf16=a.bf16,
                                 gradient_checkpointing=a.gradient_checkpointing, optim=a.optim,
                                 dataloader_num_workers=0)
        trainer = Trainer(model=model, args=args, train_dataset=data,
                          data_collator=default_data_collator, callbacks=[Stamp()])
        trainer.train()
    if a.steps >= 2:
        print(f"STEADY {(stamps[a.steps] - stamps[1]) / (a.steps - 1):.4f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "/usr/share/games/fortunes")
        return
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("model")
    m.add_argument("out_dir")
    m.add_argument("tokenizer_dir")
    m.add_argument("--layers", type=int, required=True)
    m.add_argument("--hidden", type=int, default=2048)
    m.add_argument("--intermediate", type=int, default=8192)
    m.add_argument("--heads", type=int, default=32)
    m.add_argument("--kv-heads", type=int, default=8)
    m.add_argument("--vocab", type=int, default=128256)
    t = sub.add_parser("trainer")
    t.add_argument("model_dir")
    t.add_argument("train_file")
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--batch", type=int, required=True)
    t.add_argument("--block", type=int, required=True)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--bf16", action="store_true")
    t.add_argument("--gradient-checkpointing", action="store_true")
    t.add_argument("--optim", default="adamw_torch_fused")
    a = p.parse_args()
    if a.command == "model":
        make_model(a)
    else:
        train(a)


if __name__ == "__main__":
    main()
