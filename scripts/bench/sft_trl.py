"""The Python side of scripts/bench/sft_vs_trl, and the model it trains.

  sft_trl.py build OUT_DIR FIXTURES
      OUT_DIR/qwen3: a Qwen3 of moderate size from config (4 layers x width 512, 8 heads, 4 KV
      heads, head_dim 64, MLP 1536, 512 positions, untied, random weights, fp32) with the chat
      tokenizer of sft_fixtures.py's qwen3 (TRL's qwen3_training.jinja).
  sft_trl.py build-1b OUT_DIR TOKENIZER_DIR
      OUT_DIR/llama1b: a Llama of Llama 3.2 1B's shape (16 layers x width 2,048, 32 heads, 8 KV
      heads, MLP 8,192, 128,256 ids, tied, rope_theta 500,000; random weights saved in bf16 as
      the Hub's) with TOKENIZER_DIR's tokenizer (Llama 3.1's, scripts/bench/speed_check's).
  sft_trl.py train MODEL_DIR TRAIN_FILE OUTPUT_DIR --max_length N --packing true|false
                   --per_device_train_batch_size B --max_steps S [--learning_rate X] [--threads N]
                   [--bf16 true] [--optim NAME] [--dtype float32|auto]
                   [--use_peft true --lora_r R --lora_alpha A --target_modules all-linear]
      TRL 1.16's SFTTrainer with the settings `trainer sft` gets on the command line (fp32 on the
      CPU unless --bf16, no gradient checkpointing, logging every 10 steps, nothing saved; the
      model loaded in --dtype, float32 by default; PEFT's LoRA with --use_peft), then
      OUTPUT_DIR/train_results.json as Transformers writes it (train_samples_per_second, ...).
"""
import argparse
import json
import os
import shutil

import torch


def build(out, fixtures):
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    tok = AutoTokenizer.from_pretrained(os.path.join(fixtures, "qwen3"))
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tok), hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=4, head_dim=64, max_position_embeddings=512,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id))
    folder = os.path.join(out, "qwen3")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    print(f"sft_trl: {model.num_parameters():,} parameters in {folder}")


def build_1b(out, tokenizer_dir):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
        rope_theta=500000.0, tie_word_embeddings=True, rms_norm_eps=1e-5, bos_token_id=128000,
        eos_token_id=128001)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    folder = os.path.join(out, "llama1b")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    print(f"sft_trl: {model.num_parameters():,} parameters in {folder}")


def train(a):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(a.threads)
    with open(a.train_file, encoding="utf-8") as f:
        data = Dataset.from_list([json.loads(line) for line in f if line.strip()])
    peft_config = None
    if a.use_peft == "true":
        from peft import LoraConfig
        peft_config = LoraConfig(task_type="CAUSAL_LM", r=a.lora_r, lora_alpha=a.lora_alpha, lora_dropout=0.0,
                                 target_modules=a.target_modules)
    dtype = torch.float32 if a.dtype == "float32" else "auto"
    args = SFTConfig(output_dir=a.output_dir, use_cpu=True, bf16=a.bf16 == "true", gradient_checkpointing=False,
                     optim=a.optim,
                     max_length=a.max_length, packing=a.packing == "true",
                     per_device_train_batch_size=a.per_device_train_batch_size, max_steps=a.max_steps,
                     learning_rate=a.learning_rate, logging_steps=10, report_to="none", save_strategy="no",
                     disable_tqdm=True, model_init_kwargs={"dtype": dtype})
    trainer = SFTTrainer(model=a.model_dir, processing_class=AutoTokenizer.from_pretrained(a.model_dir),
                         args=args, train_dataset=data, peft_config=peft_config)
    metrics = trainer.train().metrics
    metrics["num_tokens"] = trainer._total_train_tokens
    trainer.save_metrics("train", metrics)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("fixtures")
    t = sub.add_parser("train")
    t.add_argument("model_dir")
    t.add_argument("train_file")
    t.add_argument("output_dir")
    t.add_argument("--max_length", type=int, default=256)
    t.add_argument("--packing", choices=("true", "false"), default="false")
    t.add_argument("--per_device_train_batch_size", type=int, default=8)
    t.add_argument("--max_steps", type=int, default=20)
    t.add_argument("--learning_rate", type=float, default=1e-4)
    t.add_argument("--threads", type=int, default=torch.get_num_threads())
    t.add_argument("--bf16", choices=("true", "false"), default="false")
    t.add_argument("--optim", default="adamw_torch_fused")
    t.add_argument("--dtype", choices=("float32", "auto"), default="float32")
    t.add_argument("--use_peft", choices=("true", "false"), default="false")
    t.add_argument("--lora_r", type=int, default=16)
    t.add_argument("--lora_alpha", type=float, default=32)
    t.add_argument("--target_modules", default="all-linear")
    b1 = sub.add_parser("build-1b")
    b1.add_argument("out")
    b1.add_argument("tokenizer_dir")
    a = parser.parse_args()
    if a.command == "build":
        build(a.out, a.fixtures)
    elif a.command == "build-1b":
        build_1b(a.out, a.tokenizer_dir)
    else:
        shutil.rmtree(a.output_dir, ignore_errors=True)
        train(a)


if __name__ == "__main__":
    main()
