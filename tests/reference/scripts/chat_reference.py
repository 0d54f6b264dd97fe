"""Transformers' side of `trainer chat` and `trainer generate --chat`: a tiny Qwen3 folder of
hf_fixtures.py with a ChatML chat template, and what Transformers answers through it.

Usage: chat_reference.py HF_FIXTURES OUT. Writes OUT/model (the qwen3 fixture with
chat_template.jinja), and OUT/reference.json: for the turns below, each answer of greedy
generate(max_new_tokens=MAX_NEW) on apply_chat_template(add_generation_prompt=True) of the
conversation so far (the answers appended as assistant turns), decoded without special tokens;
and the text generate --chat prints for the first turn alone (prompt and answer, decoded).
"""
import json
import os
import shutil
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

MAX_NEW = 12
SYSTEM = "You answer briefly."
TURNS = ["Hello there", "What is a fortune?", "Tell me one more thing"]
TEMPLATE = """{%- for message in messages %}
{{- '<|begin_of_text|>' + message['role'] + '\\n' + message['content'] | trim + '<|end_of_text|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|begin_of_text|>assistant\\n' }}
{%- endif %}
"""


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    folder = os.path.join(out, "model")
    shutil.copytree(os.path.join(fixtures, "qwen3"), folder)
    with open(os.path.join(folder, "chat_template.jinja"), "w") as f:
        f.write(TEMPLATE)
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    # The tokens `trainer chat` stops at: generation_config.json's EOS and the tokenizer's.
    eos = model.generation_config.eos_token_id
    eos = ([] if eos is None else [eos] if isinstance(eos, int) else list(eos)) + [tok.eos_token_id]

    def answer(messages):
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                      return_dict=True, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            full = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                  max_new_tokens=MAX_NEW, eos_token_id=eos, pad_token_id=eos[0])
        new = full[0, ids.shape[1]:].tolist()
        return full[0].tolist(), (new[:-1] if new and new[-1] in eos else new)

    messages = [{"role": "system", "content": SYSTEM}]
    answers = []
    for turn in TURNS:
        messages.append({"role": "user", "content": turn})
        _, new = answer(messages)
        text = tok.decode(new, skip_special_tokens=True)
        answers.append(text)
        messages.append({"role": "assistant", "content": text})
    full, _ = answer([{"role": "user", "content": TURNS[0]}])
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"system": SYSTEM, "turns": TURNS, "answers": answers, "max_new_tokens": MAX_NEW,
                   "generate_chat": tok.decode(full, skip_special_tokens=True)}, f)


if __name__ == "__main__":
    main()
