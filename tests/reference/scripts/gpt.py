"""The PyTorch module equivalent to trainer's `gpt` model (nanoGPT's GPT-2 layout, the same
parameter names), and a check that our model.safetensors loads into it and gives our logits.

usage: gpt.py CONFIG.json MODEL.safetensors INPUTS.safetensors [CONFIG MODEL INPUTS ...]
  CONFIG.json: {"vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout", "bias"}
  INPUTS.safetensors: "input_ids" int64 [B, T] and "logits" float32 [B, T, vocab_size], what
  trainer computed; optionally "attention_mask" [B, T] and "logits_masked", trainer's logits
  with that mask.
Prints one JSON line per triple: {"max_abs_diff", "max_abs_logit", "tied", "num_parameters"}
(max_abs_diff over both sets of logits).
"""
import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        self.resid_dropout = nn.Dropout(c["dropout"])
        self.n_head = c["n_head"]
        self.dropout = c["dropout"]

    def forward(self, x, attn_mask=None):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        if attn_mask is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c["n_embd"], c["bias"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c["n_embd"], c["bias"])
        self.mlp = MLP(c)

    def forward(self, x, attn_mask=None):
        x = x + self.attn(self.ln_1(x), attn_mask)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            drop=nn.Dropout(c["dropout"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=LayerNorm(c["n_embd"], c["bias"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c["n_layer"]))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, attention_mask=None):
        B, T = idx.size()
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        attn_mask = None
        if attention_mask is not None:
            # Causal, to real keys only, each query always seeing itself (as trainer's Gpt does).
            causal = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
            eye = torch.eye(T, dtype=torch.bool, device=idx.device)
            attn_mask = (causal & attention_mask.bool().view(B, 1, 1, T)) | eye
        for block in self.transformer.h:
            x = block(x, attn_mask)
        return self.lm_head(self.transformer.ln_f(x))


def check(config_path, weights, inputs_path):
    with open(config_path) as f:
        config = json.load(f)
    model = GPT(config)
    state = load_file(weights)
    # Two equal tensors in the file (transformer.wte.weight, lm_head.weight) both load into the
    # one tied parameter; strict: every name of the state dict, no other.
    model.load_state_dict(state, strict=True)
    model.eval()
    inputs = load_file(inputs_path)
    with torch.no_grad():
        logits = model(inputs["input_ids"])
        diff = (logits - inputs["logits"]).abs().max().item()
        if "attention_mask" in inputs:
            masked = model(inputs["input_ids"], inputs["attention_mask"])
            diff = max(diff, (masked - inputs["logits_masked"]).abs().max().item())
    print(json.dumps({
        "max_abs_diff": diff,
        "max_abs_logit": logits.abs().max().item(),
        "tied": bool(torch.equal(state["lm_head.weight"], state["transformer.wte.weight"])),
        "num_parameters": sum(p.numel() for p in model.parameters()),
    }))


def main():
    args = sys.argv[1:]
    if not args or len(args) % 3:
        sys.exit(__doc__)
    for i in range(0, len(args), 3):
        check(*args[i:i + 3])


if __name__ == "__main__":
    main()
