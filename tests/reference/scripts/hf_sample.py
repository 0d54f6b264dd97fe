"""Transformers' sampling generate on tiny fixtures, for `trainer grpo`'s sampler (and `trainer
generate --do_sample`): torch.manual_seed(seed) then model.generate(do_sample=True,
max_new_tokens=16, ...) in float32 on the CPU, one thread, for one prompt and for a left-padded
batch of three prompts of different lengths (attention_mask passed), under each of SETTINGS.

The models: hf_fixtures.py's Llama (BOS by its tokenizer) and GPT-2 (no BOS; eos = bos = id 0),
whose tokenizers have no pad token (the pad is their EOS, as TRL and most scripts set it), and
grpo_fixtures.py's Qwen3 (pad <|endoftext|> apart from EOS <|im_end|>), the only one of the three
that samples EOS often (hf_fixtures' models are nearly uniform over 512 ids): there rows end early
and Transformers writes pad ids after their EOS, and min_p and top_p cut the distribution.

usage: hf_sample.py HF_FIXTURES GRPO_FIXTURES OUT
Writes OUT/sample.json:
  transformers, torch: the versions,
  prompts: {single: the one prompt, batch: the three},
  models: {name: {fixture: {ref, model} (the folder, from the reference's), generation_config: the
    fixture's generation_config.json as saved (null if none), eos_token_id, bos_token_id,
    pad_token_id (what generate was given), pad_token}},
  runs: a list of {model, prompts ("single" or "batch"), setting (a SETTINGS name), seed, kwargs
    (generate's keyword arguments but the tensors, exactly as passed), effective (the generation
    config generate used: kwargs over the fixture's generation_config.json over Transformers'
    defaults, e.g. top_k 50 where not passed), processors (the logits processors generate applied,
    in order, with their parameters), input_ids and attention_mask (the prompt batch as passed,
    left-padded with pad_token_id), sequences (what generate returned: the prompt ids then the
    new ids, pad_token_id after a row's EOS; as long as the longest row, up to 16 new ids)}.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

SINGLE = "The meaning of life"
BATCH = ["The meaning of life", "Hi", "A long time ago in a galaxy far, far away, there"]
MODELS = [("llama", "hf_fixtures"), ("gpt2", "hf_fixtures"), ("qwen3_eos", "grpo_fixtures")]
SETTINGS = {
    "temperature_top_k": {"temperature": 0.7, "top_k": 20},
    "top_p": {"top_p": 0.9},
    "min_p": {"min_p": 0.1},
    "repetition_penalty": {"repetition_penalty": 1.3},
    "plain": {"top_k": 0},
}
MAX_NEW_TOKENS = 16


def processor_list(model, config, length):
    """The logits processors generate() builds for `config`, as {name, parameters}."""
    processors = model._get_logits_processor(generation_config=config, input_ids_seq_length=length, device="cpu",
                                             model_kwargs={})
    out = []
    for p in processors:
        params = {k: v for k, v in vars(p).items()
                  if isinstance(v, (int, float, str, bool, list)) or v is None}
        out.append({"name": type(p).__name__, **params})
    return out


def effective_config(config):
    keys = ["do_sample", "max_new_tokens", "temperature", "top_k", "top_p", "min_p", "typical_p",
            "repetition_penalty", "no_repeat_ngram_size", "eos_token_id", "pad_token_id", "bos_token_id",
            "num_beams", "num_return_sequences"]
    return {k: getattr(config, k) for k in keys}


def main(hf_fixtures, grpo_fixtures, out):
    torch.set_num_threads(1)
    roots = {"hf_fixtures": hf_fixtures, "grpo_fixtures": grpo_fixtures}
    result = {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0],
              "prompts": {"single": SINGLE, "batch": BATCH}, "models": {}, "runs": []}
    seed = 1000
    for name, ref in MODELS:
        folder = os.path.join(roots[ref], name)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(folder)
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        path = os.path.join(folder, "generation_config.json")
        saved = None
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
        result["models"][name] = {"fixture": {"ref": ref, "model": name}, "generation_config": saved,
                                  "eos_token_id": tok.eos_token_id, "bos_token_id": tok.bos_token_id,
                                  "pad_token_id": tok.pad_token_id, "pad_token": tok.pad_token}
        for prompts_name, prompts in (("single", [SINGLE]), ("batch", BATCH)):
            batch = tok(prompts, return_tensors="pt", padding=True)
            for setting, extra in SETTINGS.items():
                seed += 1
                kwargs = {"do_sample": True, "max_new_tokens": MAX_NEW_TOKENS, "pad_token_id": tok.pad_token_id,
                          **extra}
                config, _ = model._prepare_generation_config(None, **kwargs)
                torch.manual_seed(seed)
                with torch.no_grad():
                    sequences = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                               **kwargs)
                result["runs"].append({
                    "model": name, "prompts": prompts_name, "setting": setting, "seed": seed, "kwargs": kwargs,
                    "effective": effective_config(config),
                    "processors": processor_list(model, config, batch["input_ids"].shape[1]),
                    "input_ids": batch["input_ids"].tolist(), "attention_mask": batch["attention_mask"].tolist(),
                    "sequences": sequences.tolist()})
    with open(os.path.join(out, "sample.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
