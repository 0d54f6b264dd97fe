"""Transformers' ForSequenceClassification on every causal family trainer has: each tiny causal
fixture (hf_fixtures.py's GPT-2, Llama, Qwen2, Qwen3, Mistral and Gemma 3; hf_families.py's Phi3,
Gemma2, Olmo2, SmolLM3, Mixtral and Qwen3-MoE) read by AutoModelForSequenceClassification's
from_pretrained with a fresh `score` head (torch.manual_seed fixed before it; the causal lm_head
left unread), a pad_token_id that is not the eos, and num_labels varied: 1 (a reward model:
regression), 2 or more with int labels (single-label cross-entropy, 3 of them named neg/neu/pos)
and a multi-label one (BCE on float labels). Each is saved with save_pretrained into
OUT_DIR/<family>/ with the fixture's tokenizer files copied beside it (as they are: no pad token
in them; config.json's pad_token_id is the one to pad with), then read back, and its pooled logits
and loss, in float32 and eval mode, computed for batches of 3 rows of different lengths:

  right      right-padded (pad_token_id), attention_mask given
  left       the same rows left-padded: Transformers' positions stay 0..T-1 whatever the mask
  single     row 0 alone, no padding, no mask
  pad_inside a row with the pad id in its middle (attention 1): the pooled token is the
             rightmost one that is not the pad id, so the middle one changes nothing
  pad_last   a row whose last real token (attention 1) is the pad id: pooled from the token
             before it, not from the last one the mask allows

The labels: float [B] for num_labels 1 (MSE of the squeezed logits), int [B] for single-label
(mean cross-entropy), float [B, K] of 0/1 for multi-label (mean BCE with logits).

usage: seq_cls_reference.py HF_FIXTURES HF_FAMILIES OUT_DIR
Writes OUT_DIR/<family>/ (config.json, model.safetensors, the tokenizer's files),
OUT_DIR/cases.json {family: {"fixture", "class", "num_labels", "problem_type" (config.json's),
"loss_problem_type" (the one the loss took), "pad_token_id", "eos_token_id", "seed",
"missing_keys", "unexpected_keys" (from_pretrained's on the causal fixture), "batches": [{"name",
"input_ids", "attention_mask" (null: none given), "pooled_index" (the position each row's logits
come from), "labels", "logits" [B][K], "loss"}]}} and OUT_DIR/names.json {family:
{"architectures", "model_type", "tie_word_embeddings", "id2label", "parameters": {name: shape}}}
(the names and shapes in the saved model.safetensors).
"""
import json
import os
import shutil
import sys

import torch
from safetensors import safe_open
from transformers import AutoModelForSequenceClassification, AutoTokenizer

NEG_NEU_POS = dict(id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})

# family: (fixture set, num_labels, from_pretrained's other keyword arguments). pad_token_id None:
# the tokenizer's byte 0 token (never in text); gemma3_text's fixture has 200 and gemma2's 0 (its
# bos) in config.json already, kept.
FAMILIES = {
    "gpt2": ("hf_fixtures", 3, NEG_NEU_POS),
    "llama": ("hf_fixtures", 3, NEG_NEU_POS),
    "qwen2": ("hf_fixtures", 1, {}),
    "qwen3": ("hf_fixtures", 3, NEG_NEU_POS),
    "mistral": ("hf_fixtures", 3, dict(problem_type="multi_label_classification", **NEG_NEU_POS)),
    "gemma3_text": ("hf_fixtures", 3, NEG_NEU_POS),
    "phi3": ("hf_families", 1, {}),
    "gemma2": ("hf_families", 3, NEG_NEU_POS),
    "olmo2": ("hf_families", 2, {}),
    "smollm3": ("hf_families", 1, {}),
    "mixtral": ("hf_families", 4, dict(problem_type="multi_label_classification")),
    "qwen3_moe": ("hf_families", 5, {}),
}
KEEP_PAD = {"gemma3_text", "gemma2"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "tokenizer.model")
LENGTHS = (17, 9, 5)


def rows(pad, seed):
    """Three rows of random ids (never the pad id) of LENGTHS."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in LENGTHS:
        ids = torch.randint(2, 512, (n,), generator=g)
        ids[ids == pad] = pad + 1
        out.append(ids.tolist())
    return out


def padded(batch, pad, left):
    width = max(len(r) for r in batch)
    ids, mask = [], []
    for r in batch:
        fill = width - len(r)
        ids.append([pad] * fill + r if left else r + [pad] * fill)
        mask.append([0] * fill + [1] * len(r) if left else [1] * len(r) + [0] * fill)
    return ids, mask


def labels_for(num_labels, problem_type, count):
    if num_labels == 1:
        return [0.5, -1.25, 2.0][:count]
    if problem_type == "multi_label_classification":
        pattern = [[1.0, 0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 1.0, 0.0]]
        return [p[:num_labels] for p in pattern[:count]]
    return [2 % num_labels, 0, 1][:count]


def batches(pad, seed):
    r = rows(pad, seed)
    out = []
    ids, mask = padded(r, pad, left=False)
    out.append(("right", ids, mask))
    ids, mask = padded(r, pad, left=True)
    out.append(("left", ids, mask))
    out.append(("single", [r[0]], None))
    inside = [r[0][:6] + [pad] + r[0][6:], r[1], r[2][:3] + [pad] + r[2][3:]]
    ids, mask = padded(inside, pad, left=False)
    out.append(("pad_inside", ids, mask))
    last = [r[0], r[1] + [pad], r[2]]
    ids, mask = padded(last, pad, left=False)
    out.append(("pad_last", ids, mask))
    return out


def main():
    fixtures = {"hf_fixtures": sys.argv[1], "hf_families": sys.argv[2]}
    out = sys.argv[3]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    cases, names = {}, {}
    for i, (family, (fixture_set, num_labels, kwargs)) in enumerate(FAMILIES.items()):
        source = os.path.join(fixtures[fixture_set], family)
        tokenizer = AutoTokenizer.from_pretrained(source)
        with open(os.path.join(source, "config.json")) as f:
            source_config = json.load(f)
        pad = source_config["pad_token_id"] if family in KEEP_PAD else tokenizer.convert_tokens_to_ids("Ā")
        assert pad is not None and pad != source_config["eos_token_id"], family
        seed = 1000 + i
        torch.manual_seed(seed)
        model, info = AutoModelForSequenceClassification.from_pretrained(
            source, num_labels=num_labels, pad_token_id=pad, dtype=torch.float32,
            output_loading_info=True, **kwargs)
        folder = os.path.join(out, family)
        model.save_pretrained(folder)
        for name in TOKENIZER_FILES:
            if os.path.exists(os.path.join(source, name)):
                shutil.copy(os.path.join(source, name), os.path.join(folder, name))
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
            parameters = {k: list(f.get_slice(k).get_shape()) for k in sorted(f.keys())}
        names[family] = {"architectures": config["architectures"], "model_type": config["model_type"],
                         "tie_word_embeddings": config.get("tie_word_embeddings"),
                         "id2label": config.get("id2label"), "parameters": parameters}

        # From the saved folder, as a reader of it would.
        model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()
        problem_type = model.config.problem_type
        case = {"fixture": f"{fixture_set}/{family}", "class": type(model).__name__,
                "num_labels": num_labels, "problem_type": problem_type, "pad_token_id": pad,
                "eos_token_id": source_config["eos_token_id"], "seed": seed,
                "missing_keys": sorted(info["missing_keys"]),
                "unexpected_keys": sorted(info["unexpected_keys"]), "batches": []}
        for name, ids, mask in batches(pad, seed):
            input_ids = torch.tensor(ids)
            labels = labels_for(num_labels, problem_type, len(ids))
            dtype = torch.long if num_labels > 1 and problem_type is None or \
                problem_type == "single_label_classification" else torch.float32
            kw = {} if mask is None else {"attention_mask": torch.tensor(mask)}
            with torch.no_grad():
                result = model(input_ids=input_ids, labels=torch.tensor(labels, dtype=dtype), **kw)
            not_pad = (input_ids != pad).int() * torch.arange(input_ids.shape[1])
            case["batches"].append({
                "name": name, "input_ids": ids, "attention_mask": mask,
                "pooled_index": not_pad.argmax(-1).tolist(), "labels": labels,
                "logits": [[float(x) for x in row] for row in result.logits.tolist()],
                "loss": float(result.loss)})
        case["loss_problem_type"] = model.config.problem_type
        cases[family] = case
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    with open(os.path.join(out, "names.json"), "w") as f:
        json.dump(names, f, indent=1)


if __name__ == "__main__":
    main()
