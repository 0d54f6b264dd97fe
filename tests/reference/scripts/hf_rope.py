"""Transformers' rotary embeddings of every rope type, on the tiny Llama and Gemma 3 fixtures'
weights (hf_fixtures.py) with their config.json edited as the Hub spells it (rope_scaling beside
rope_theta, "type" for "rope_type") or as Transformers 5 does (rope_parameters): the logits of 40
tokens with and without a left-padding mask (the first 64 of the vocabulary: what the rotary
embedding changes shows in every one), a greedy generation of 30 tokens with the KV cache (its ids, and each step's logits, past
original_max_position_embeddings, and for dynamic past max_position_embeddings), and the
rope_parameters that save_pretrained writes.

usage: hf_rope.py HF_FIXTURES OUT_DIR
Writes OUT_DIR/cases.json (name: fixture, config edits, generated ids, rope_parameters written)
and OUT_DIR/logits.safetensors (input_ids, attention_mask, <name>.logits, <name>.logits_masked,
<name>.generate_logits: [30, 64]).
"""
import json
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

FACTORS = [1.0, 1.1, 1.3, 1.6, 2.0, 2.6, 3.3, 4.0]  # one per frequency (head_dim 16)

# name: (fixture, edits to config.json: a key set to None is removed).
CASES = {
    # Llama 3.1's rope_scaling as the Hub's config.json spells it.
    "llama3": ("llama", {"rope_theta": 500000.0, "rope_parameters": None,
                         "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 16,
                                          "rope_type": "llama3"}}),
    "linear": ("llama", {"rope_parameters": {"rope_type": "linear", "factor": 4.0,
                                             "rope_theta": 10000.0}}),
    # The old "type" key; positions up to 40 where max_position_embeddings is 16.
    "dynamic": ("llama", {"max_position_embeddings": 16, "rope_parameters": None,
                          "rope_scaling": {"type": "dynamic", "factor": 2.0}}),
    # Qwen2.5's YaRN block as its model card asks for it.
    "yarn": ("llama", {"rope_parameters": None, "rope_theta": 1000000.0,
                       "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 16,
                                        "type": "yarn"}}),
    "yarn_mscale": ("llama", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0,
                                                  "factor": 4.0,
                                                  "original_max_position_embeddings": 16,
                                                  "mscale": 1.0, "mscale_all_dim": 0.5,
                                                  "beta_fast": 16, "beta_slow": 2,
                                                  "truncate": False}}),
    "yarn_attention_factor": ("llama", {"rope_parameters": {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": None,
        "original_max_position_embeddings": 32, "attention_factor": 0.8}}),
    # Phi-3's longrope: the short factors up to 16 positions, the long ones past them.
    "longrope": ("llama", {"rope_parameters": None,
                           "rope_scaling": {"type": "longrope", "short_factor": FACTORS,
                                            "long_factor": [f * 2 for f in FACTORS],
                                            "original_max_position_embeddings": 16}}),
    "proportional": ("llama", {"rope_parameters": {"rope_type": "proportional",
                                                   "rope_theta": 10000.0,
                                                   "partial_rotary_factor": 0.5}}),
    # Gemma 3 4B's text config before Transformers 5: linear scaling on the full-attention
    # layers, the sliding ones' own base.
    "gemma3_linear": ("gemma3_text", {"rope_parameters": None, "rope_theta": 1000000.0,
                                      "rope_local_base_freq": 100.0,
                                      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}),
    "gemma3_yarn_sliding": ("gemma3_text", {"rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "sliding_attention": {"rope_type": "yarn", "rope_theta": 1000.0, "factor": 2.0,
                              "original_max_position_embeddings": 16}}}),
}


def edited(config, edits):
    config = dict(config)
    for key, value in edits.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 512, (2, 40), generator=g)
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[1, :5] = 0
    prompt = ids[:1, :10]
    tensors = {"input_ids": ids, "attention_mask": mask}
    cases = {}
    for name, (fixture, edits) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            folder = os.path.join(tmp, "model")
            shutil.copytree(os.path.join(fixtures, fixture), folder)
            with open(os.path.join(folder, "config.json")) as f:
                config = edited(json.load(f), edits)
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump(config, f)
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
            with torch.no_grad():
                tensors[name + ".logits"] = model(input_ids=ids).logits[..., :64].contiguous()
                tensors[name + ".logits_masked"] = model(
                    input_ids=ids, attention_mask=mask).logits[..., :64].contiguous()
                # A fresh model: dynamic's frequencies follow what the model has seen.
                model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
                generated = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                           max_new_tokens=30, min_new_tokens=30, do_sample=False,
                                           pad_token_id=0, output_logits=True,
                                           return_dict_in_generate=True)
                tensors[name + ".generate_logits"] = torch.cat(generated.logits)[:, :64].contiguous()
            model.save_pretrained(os.path.join(tmp, "saved"))
            with open(os.path.join(tmp, "saved", "config.json")) as f:
                saved = json.load(f)
            cases[name] = {
                "fixture": fixture,
                "edits": edits,
                "generated": generated.sequences[0, 10:].tolist(),
                "rope_parameters": saved.get("rope_parameters"),
                "saved_keys": sorted(k for k in ("rope_scaling", "rope_theta",
                                                 "rope_local_base_freq", "partial_rotary_factor")
                                     if k in saved),
            }
    save_file(tensors, os.path.join(out, "logits.safetensors"))
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"prompt": prompt[0].tolist(), "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
