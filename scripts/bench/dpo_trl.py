"""The Python side of scripts/bench/dpo_vs_trl: its preference data, and TRL's run.

  dpo_trl.py data CHAT_JSONL OUT_JSONL
      Preference rows from the conversations of scripts/make_fortune_chat ({"messages": [user,
      assistant]}): prompt [user], chosen [its assistant], rejected [the next row's assistant]
      (conversational, TRL's explicit-prompt format).
  dpo_trl.py train MODEL_DIR TRAIN_FILE OUTPUT_DIR --max_length N --per_device_train_batch_size B
                   --max_steps S [--learning_rate X] [--beta B] [--loss_type T] [--threads N]
                   [--use_peft true|false --lora_r R --lora_alpha A]
      TRL 1.16's DPOTrainer with the settings `trainer dpo` gets on the command line (fp32 on the
      CPU, no gradient checkpointing, a reference model beside the policy (none with LoRA: the
      adapters disabled), logging every 10 steps, nothing saved), then OUTPUT_DIR/train_results.json
      as Transformers writes it (train_samples_per_second: pairs, max_steps x batch over
      train_runtime).
The model: scripts/bench/sft_trl.py build.
"""
import argparse
import json
import os
import shutil

import torch


def data(chat, out):
    with open(chat, encoding="utf-8") as f:
        rows = [json.loads(line)["messages"] for line in f if line.strip()]
    with open(out, "w", encoding="utf-8") as f:
        for i, messages in enumerate(rows):
            other = rows[(i + 1) % len(rows)]
            f.write(json.dumps({"prompt": messages[:-1], "chosen": messages[-1:], "rejected": other[-1:]},
                               ensure_ascii=False) + "\n")
    print(f"dpo_trl: {len(rows)} preference rows in {out}")


def train(a):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    torch.set_num_threads(a.threads)
    with open(a.train_file, encoding="utf-8") as f:
        rows = Dataset.from_list([json.loads(line) for line in f if line.strip()])
    peft_config = None
    if a.use_peft == "true":
        from peft import LoraConfig
        peft_config = LoraConfig(task_type="CAUSAL_LM", r=a.lora_r, lora_alpha=a.lora_alpha, lora_dropout=0.0)
    args = DPOConfig(output_dir=a.output_dir, use_cpu=True, bf16=a.bf16 == "true", gradient_checkpointing=False,
                     max_length=a.max_length, per_device_train_batch_size=a.per_device_train_batch_size,
                     max_steps=a.max_steps, learning_rate=a.learning_rate, beta=a.beta,
                     loss_type=a.loss_type.split(","), logging_steps=10, seed=42, report_to="none",
                     save_strategy="no", disable_tqdm=True, model_init_kwargs={"dtype": torch.float32})
    trainer = DPOTrainer(model=a.model_dir, processing_class=AutoTokenizer.from_pretrained(a.model_dir),
                         args=args, train_dataset=rows, peft_config=peft_config)
    metrics = trainer.train().metrics
    metrics["num_tokens"] = trainer._total_train_tokens
    trainer.save_metrics("train", metrics)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("data")
    d.add_argument("chat")
    d.add_argument("out")
    t = sub.add_parser("train")
    t.add_argument("model_dir")
    t.add_argument("train_file")
    t.add_argument("output_dir")
    t.add_argument("--max_length", type=int, default=256)
    t.add_argument("--per_device_train_batch_size", type=int, default=8)
    t.add_argument("--max_steps", type=int, default=10)
    t.add_argument("--learning_rate", type=float, default=1e-4)
    t.add_argument("--beta", type=float, default=0.1)
    t.add_argument("--loss_type", default="sigmoid")
    t.add_argument("--threads", type=int, default=torch.get_num_threads())
    t.add_argument("--use_peft", choices=("true", "false"), default="false")
    t.add_argument("--bf16", choices=("true", "false"), default="false")
    t.add_argument("--lora_r", type=int, default=8)
    t.add_argument("--lora_alpha", type=float, default=16)
    a = parser.parse_args()
    if a.command == "data":
        data(a.chat, a.out)
    else:
        shutil.rmtree(a.output_dir, ignore_errors=True)
        train(a)


if __name__ == "__main__":
    main()
