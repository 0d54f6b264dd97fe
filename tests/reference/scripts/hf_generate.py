"""Transformers' greedy generate on the fixtures of hf_fixtures.py, for `trainer generate`'s
checks (tests/apps/hf_finetune_test.cpp): model.generate(do_sample=False, max_new_tokens=24) of
"The meaning of life" on every causal-LM fixture, and of "the the the the" on the GPT-2 and Llama
fixtures with generation_config.json's logits processors set (repetition_penalty 1.3,
no_repeat_ngram_size 2, bad_words_ids [[5], [264, 72]]), one thread.

usage: hf_generate.py HF_FIXTURES OUT
Writes OUT/greedy.json: {"<fixture>": "ids", "<fixture>_processors": "ids"}, the ids (prompt and
new tokens) space-separated as `trainer generate --output_ids` prints them.
"""
import json
import os
import shutil
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

MODELS = ["gpt2", "llama", "qwen2", "qwen2_tied", "qwen3", "mistral", "gemma3_text"]
PROCESSORS = {"repetition_penalty": 1.3, "no_repeat_ngram_size": 2, "bad_words_ids": [[5], [264, 72]]}


def greedy(folder, prompt):
    model = AutoModelForCausalLM.from_pretrained(folder)
    ids = AutoTokenizer.from_pretrained(folder)(prompt, return_tensors="pt").input_ids
    return " ".join(map(str, model.generate(ids, do_sample=False, max_new_tokens=24)[0].tolist()))


def main(fixtures, out):
    torch.set_num_threads(1)
    result = {name: greedy(os.path.join(fixtures, name), "The meaning of life") for name in MODELS}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ["gpt2", "llama"]:
            folder = os.path.join(tmp, name)
            shutil.copytree(os.path.join(fixtures, name), folder)
            path = os.path.join(folder, "generation_config.json")
            with open(path) as f:
                config = json.load(f)
            config.update(PROCESSORS)
            with open(path, "w") as f:
                json.dump(config, f, indent=2)
            result[name + "_processors"] = greedy(folder, "the the the the")
    with open(os.path.join(out, "greedy.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
