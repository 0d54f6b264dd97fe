"""The families the one decoder takes beyond Llama, made by Transformers itself: tiny Phi3 (fused
projections, longrope with partial_rotary_factor 0.75 past original_max_position_embeddings, a
sliding window), Gemma2 (attention and final soft-capping, alternating windows), Olmo2 (norms
after the blocks, q/k norms over the whole projection), SmolLM3 (layers without rotary, a
window on those), Granite (its four multipliers), and the mixtures of experts Mixtral and
Qwen3-MoE (a dense layer among the sparse, renormalised top-k, the router loss on), each saved
with save_pretrained (the Hub's per-expert layout) and then its
config.json spelt as the Hub's folders spell it (rope_theta and rope_scaling, no rope_parameters),
with the fixtures' Llama-3-style tokenizer. Their 1-D tensors (norms), which Transformers
initialises to constants, are perturbed so that they matter, and their query and key projections
scaled up so that the attention scores are of order 1 (soft-capping and granite's attention
multiplier then show), and the routers' too, so that no token's choice of experts is a near tie
that float noise could turn.

Beside each: the logits of 20 tokens with and without a left-padding mask (the first 64 of the
vocabulary), the loss (and for the mixtures the router loss, with and without the mask, and the
loss with it added), 30 greedy steps with the KV cache from a 10-token prompt (their ids and
the first 64 logits of each), and the config.json that
Transformers writes back after loading the Hub spelling (its rope_parameters).

And defaults.json: each family's config defaults and parameter count, as Transformers has them.

usage: hf_families.py HF_FIXTURES OUT_DIR
Writes OUT_DIR/<family>/ folders, OUT_DIR/reference.safetensors, OUT_DIR/cases.json and
OUT_DIR/defaults.json.
"""
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import (AutoConfig, AutoModelForCausalLM, Gemma2Config, GraniteConfig,
                          MixtralConfig, Olmo2Config, Phi3Config, PreTrainedTokenizerFast,
                          Qwen3MoeConfig, SmolLM3Config)

SHARED = dict(vocab_size=512, hidden_size=32, intermediate_size=64, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)

# name: (config class, its arguments, the Hub's spelling of its rotary embedding).
FAMILIES = {
    "phi3": (Phi3Config, dict(num_hidden_layers=2, sliding_window=12,
                              original_max_position_embeddings=16, pad_token_id=None),
             {"rope_theta": 10000.0, "partial_rotary_factor": 0.75,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5, 2.5],
                               "long_factor": [2.0, 4.0, 7.0]}}),
    "gemma2": (Gemma2Config, dict(num_hidden_layers=3, head_dim=8, sliding_window=8,
                                  query_pre_attn_scalar=12, attn_logit_softcapping=1.0,
                                  final_logit_softcapping=3.0),
               {"rope_theta": 1000.0}),
    "olmo2": (Olmo2Config, dict(num_hidden_layers=2, rms_norm_eps=1e-6, pad_token_id=None),
              {"rope_theta": 500000.0, "rope_scaling": None}),
    "smollm3": (SmolLM3Config, dict(num_hidden_layers=4, use_sliding_window=True,
                                    sliding_window=8, pad_token_id=None),
                {"rope_theta": 5000000.0, "rope_scaling": None}),
    "granite": (GraniteConfig, dict(num_hidden_layers=2, embedding_multiplier=12.0,
                                    attention_multiplier=0.0625, residual_multiplier=0.22,
                                    logits_scaling=8.0, tie_word_embeddings=True),
                {"rope_theta": 10000.0, "rope_scaling": None}),
    # Mixtral-8x7B's layout shrunk: 4 experts, 2 a token, its router loss off as on the Hub.
    "mixtral": (MixtralConfig, dict(num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                                    router_aux_loss_coef=0.02),
                {"rope_theta": 1000000.0}),
    # Qwen3-30B-A3B's: renormalised top-k, a dense layer (mlp_only_layers), the router loss on.
    "qwen3_moe": (Qwen3MoeConfig, dict(num_hidden_layers=3, head_dim=16, num_experts=4,
                                       num_experts_per_tok=2, moe_intermediate_size=16,
                                       norm_topk_prob=True, mlp_only_layers=[1],
                                       output_router_logits=True, router_aux_loss_coef=0.01),
                  {"rope_theta": 1000000.0, "rope_scaling": None}),
}


def hub_spelling(config_path, rope):
    """config.json as the Hub's folders spell it: rope_theta and rope_scaling at the top, no
    rope_parameters."""
    with open(config_path) as f:
        config = json.load(f)
    config.pop("rope_parameters", None)
    config.update(rope)
    if config["model_type"] == "qwen3_moe":  # the Hub's name of Qwen3-MoE's expert count
        config["num_experts"] = config.pop("num_local_experts")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)


def defaults():
    """Each family's config defaults and the parameter count of a model of them (built on the
    meta device: nothing allocated)."""
    out = {}
    for cls, _, _ in FAMILIES.values():
        config = cls()
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        d = config.to_dict()
        d.pop("layer_types", None)
        out[config.model_type] = {"config": d, "num_parameters": model.num_parameters(),
                                  "layer_types": getattr(config, "layer_types", None)}
    return out


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tok = PreTrainedTokenizerFast.from_pretrained(os.path.join(fixtures, "tokenizer_llama3"))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 512, (2, 20), generator=g)
    mask = torch.ones(2, 20, dtype=torch.long)
    mask[1, :5] = 0
    prompt = ids[:1, :10]
    tensors = {"input_ids": ids, "attention_mask": mask}
    cases = {}
    for seed, (name, (cls, args, rope)) in enumerate(FAMILIES.items()):
        config = cls(**SHARED, **args, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config).eval()
        with torch.no_grad():
            for key, p in model.named_parameters():
                if p.dim() == 1:
                    p.add_(torch.randn_like(p) * 0.1)
                elif any(part in key for part in ("q_proj", "k_proj", "qkv_proj")):
                    p.mul_(8.0)  # attention scores of order 1, where soft-capping and scales show
                elif key.endswith("mlp.gate.weight"):
                    p.mul_(30.0)  # routers with margins: no expert choice left to float noise
        folder = os.path.join(out, name)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        hub_spelling(os.path.join(folder, "config.json"), rope)
        # From the Hub's spelling, as a user's folder would be read.
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        with torch.no_grad():
            tensors[name + ".logits"] = model(input_ids=ids).logits[..., :64].contiguous()
            tensors[name + ".logits_masked"] = model(
                input_ids=ids, attention_mask=mask).logits[..., :64].contiguous()
            tensors[name + ".loss"] = model(input_ids=ids, labels=ids).loss.reshape(1)
            if hasattr(model.config, "output_router_logits"):
                # The routers' load-balancing loss, with and without the padding mask, and the
                # loss with it added.
                for suffix, kwargs in (("", {}), ("_masked", {"attention_mask": mask})):
                    routed = model(input_ids=ids, labels=ids, output_router_logits=True,
                                   **kwargs)
                    tensors[name + ".aux_loss" + suffix] = routed.aux_loss.float().reshape(1)
                    tensors[name + ".loss_with_aux" + suffix] = routed.loss.float().reshape(1)
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
            generated = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                       max_new_tokens=30, min_new_tokens=30, do_sample=False,
                                       pad_token_id=0, output_logits=True,
                                       return_dict_in_generate=True)
        tensors[name + ".generate_logits"] = torch.cat(generated.logits)[:, :64].contiguous()
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json")) as f:
                written = json.load(f)
        written.pop("transformers_version", None)
        cases[name] = {"generated": generated.sequences[0, 10:].tolist(), "config": written}
    save_file(tensors, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "defaults.json"), "w") as f:
        json.dump(defaults(), f)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"prompt": prompt[0].tolist(), "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
