"""Builds the policy of `trainer grpo`'s checks from sft_fixtures.py's tiny Qwen3: the same model and
chat tokenizer, with three rows of its LM head moved so that a completion ends early often enough.

sft_fixtures.py's Qwen3 (vocabulary 517, random weights) is nearly uniform over its vocabulary
(entropy 6.24 nats, ln 517 = 6.25): it samples <|im_end|> once in about 500 tokens, so every
completion of 12 tokens runs to the end, never repeats a token pair, and the completion-only
rewards of TRL (soft overlong punishment, repetition penalty) are the same for every completion
of a group (no advantage, nothing to learn). Its last hidden state (after the final norm) is
nearly the same vector mu at every position (|mu| 7.94, its spread along mu 0.04): adding
d * mu / |mu|^2 to a token's row of lm_head raises that token's logit by d almost everywhere.
This script raises <|im_end|> by 4.4 (about 1 token in 10 ends the completion) and "Ġthe" and
"." by 5.3 each (so that completions repeat token pairs now and then); every other weight is
sft_fixtures.py's.

usage: grpo_fixtures.py SFT_FIXTURES OUT
Writes OUT/qwen3_eos/ (config.json, generation_config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, chat_template.jinja: TRL's qwen3_training.jinja), OUT/qwen3_eos/boost.json
(the mean direction's norm, the boosted token ids and their logit offsets) and OUT/done last.
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

EOS_BOOST = 4.4
REPEAT_BOOST = 5.3
REPEAT_TOKENS = ("Ġthe", ".")


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    source = os.path.join(fixtures, "qwen3")
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(source)

    # The mean last hidden state over the plain prompt/completion texts of sft_fixtures.py.
    with open(os.path.join(fixtures, "data", "prompt_completion.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    states = []
    with torch.no_grad():
        for row in rows:
            ids = tok(row["prompt"] + row["completion"])["input_ids"]
            states.append(model.model(torch.tensor([ids])).last_hidden_state[0])
    states = torch.cat(states)
    mu = states.mean(0)
    unit = mu / mu.norm() ** 2
    along = states @ (mu / mu.norm())

    repeat_ids = tok.convert_tokens_to_ids(list(REPEAT_TOKENS))
    assert all(i is not None and i != tok.unk_token_id for i in repeat_ids), repeat_ids
    boosts = {tok.eos_token_id: EOS_BOOST, **{i: REPEAT_BOOST for i in repeat_ids}}
    with torch.no_grad():
        for token, boost in boosts.items():
            model.lm_head.weight[token] += boost * unit

    folder = os.path.join(out, "qwen3_eos")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    with open(os.path.join(folder, "boost.json"), "w") as f:
        json.dump({"source": "sft_fixtures/qwen3", "mean_norm": mu.norm().item(),
                   "spread_along_mean": along.std().item(),
                   "boosts": [{"id": t, "token": tok.convert_ids_to_tokens(t), "logit_offset": b}
                              for t, b in boosts.items()]}, f, indent=1)
    with open(os.path.join(out, "done"), "w") as f:
        json.dump({"transformers": __import__("transformers").__version__}, f)


if __name__ == "__main__":
    main()
