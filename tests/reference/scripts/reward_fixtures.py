"""Builds the reward models of `trainer reward`'s checks from sft_fixtures.py's tiny causal models, as TRL
users start from them: AutoModelForSequenceClassification.from_pretrained(causal folder, num_labels=1),
which keeps the decoder and draws a fresh `score` head (Linear(hidden, 1), no bias; the causal
`lm_head` is dropped), under a fixed torch.manual_seed so that the head is the same on every run.

usage: reward_fixtures.py SFT_FIXTURES OUT
Writes, then OUT/done last:
  OUT/qwen3_rm/  Qwen3ForSequenceClassification from SFT_FIXTURES/qwen3 (seed 11): config.json
                 (num_labels 1, pad_token_id 514: the tokenizer's pad <|endoftext|>), model.safetensors
                 (fp32), and the tokenizer files as saved (tokenizer.json, tokenizer_config.json,
                 chat_template.jinja: TRL's qwen3_training.jinja)
  OUT/llama_rm/  LlamaForSequenceClassification from SFT_FIXTURES/llama (seed 12); its tokenizer has no
                 pad token, and config.pad_token_id is its eos <|end_of_text|> (TRL pads with the eos
                 token then, and sets the config's pad_token_id to it); the tokenizer is saved as is
                 (no pad token: TRL's fallback is the reimplementation's to copy)
  OUT/data/pref_margin.jsonl  SFT_FIXTURES/data/pref_conv.jsonl's 24 rows, each with a `margin`
                 (MARGINS in turn: zero, positive and negative margins)
"""
import json
import os
import sys

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

MODELS = {"qwen3_rm": ("qwen3", 11), "llama_rm": ("llama", 12)}
MARGINS = (0.0, 0.5, 1.5, -0.25, 1.0, 0.25)


def reward_model(source, seed):
    tok = AutoTokenizer.from_pretrained(source)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=1, dtype=torch.float32)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    model.config.pad_token_id = pad
    return model.eval(), tok


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    for name, (source, seed) in MODELS.items():
        model, tok = reward_model(os.path.join(fixtures, source), seed)
        folder = os.path.join(out, name)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)

    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    with open(os.path.join(fixtures, "data", "pref_conv.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(out, "data", "pref_margin.jsonl"), "w", encoding="utf-8") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps({**row, "margin": MARGINS[i % len(MARGINS)]}, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "done"), "w") as f:
        json.dump({"transformers": __import__("transformers").__version__}, f)


if __name__ == "__main__":
    main()
