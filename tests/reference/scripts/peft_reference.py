"""The PEFT side of the LoRA checks: adapters made, loaded and merged by PEFT itself on the tiny
GPT-2 and Llama folders of tests/reference/scripts/hf_fixtures.py, and PEFT's default targets on the
Qwen2, Qwen3, Mistral and Gemma 3 ones.

usage:
  peft_reference.py make FIXTURES OUT_DIR
      For each case of CASES: OUT_DIR/<case>/ an adapter folder of get_peft_model(base,
      LoraConfig(...)) with random A and B (init_lora_weights=False, seeded), and
      OUT_DIR/<case>_merged/ its merge_and_unload().save_pretrained(); OUT_DIR/reference.safetensors
      with input_ids and, per case, the adapted model's logits ("<case>") and the merged model's
      ("<case>_merged"); OUT_DIR/trainable.json with print_trainable_parameters()'s line per case
      (for the default initialisation); OUT_DIR/done last (a folder with `done` is reused).
  peft_reference.py logits ADAPTER_DIR INPUT OUT
      PeftModel.from_pretrained on adapter_config.json's base: the logits of INPUT's input_ids
      (a safetensors file) written to OUT as "logits".
  peft_reference.py merge ADAPTER_DIR OUT_DIR
      PEFT's merge_and_unload() of the adapter on its base, save_pretrained into OUT_DIR.
"""
import contextlib
import io
import json
import os
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

# name -> (fixture, LoraConfig keyword arguments)
CASES = {
    "llama_r4": ("llama", dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
    "llama_r8": ("llama", dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])),
    "llama_r8_rslora": ("llama", dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                      use_rslora=True)),
    "llama_all_linear": ("llama", dict(r=4, lora_alpha=8, target_modules="all-linear")),
    "llama_modules_to_save": ("llama", dict(r=4, lora_alpha=8, target_modules=["q_proj"],
                                            modules_to_save=["lm_head"])),
    "gpt2_r4": ("gpt2", dict(r=4, lora_alpha=8, target_modules=["c_attn"])),
    "gpt2_r8_rslora": ("gpt2", dict(r=8, lora_alpha=16, target_modules=["c_attn"], use_rslora=True)),
    "gpt2_lora_only": ("gpt2", dict(r=8, lora_alpha=16, target_modules=["c_attn", "c_fc"],
                                    bias="lora_only")),
    "gpt2_bias_all": ("gpt2", dict(r=4, lora_alpha=4, target_modules=["c_proj"], bias="all")),
    # No target_modules: PEFT's default for the model type
    # (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), written out in adapter_config.json.
    "qwen2_default": ("qwen2_tied", dict(r=4, lora_alpha=8)),
    "qwen3_default": ("qwen3", dict(r=4, lora_alpha=8)),
    "mistral_default": ("mistral", dict(r=4, lora_alpha=8)),
    "gemma3_text_default": ("gemma3_text", dict(r=4, lora_alpha=8)),
}


def base_model(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def randomize_trained_parts(model, seed):
    """Random values where training would have moved them: biases that train and modules_to_save
    copies (PEFT starts them as the base's), so that the files tell them apart."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad and "lora_" not in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)


def make(fixtures, out):
    if os.path.exists(os.path.join(out, "done")):
        return
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    ids = torch.randint(0, 512, (2, 24), generator=torch.Generator().manual_seed(1))
    tensors = {"input_ids": ids}
    trainable = {}
    for i, (name, (fixture, kwargs)) in enumerate(CASES.items()):
        base_dir = os.path.abspath(os.path.join(fixtures, fixture))
        # print_trainable_parameters() for the default initialisation.
        model = get_peft_model(base_model(base_dir), LoraConfig(task_type="CAUSAL_LM", **kwargs))
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            model.print_trainable_parameters()
        trainable[name] = text.getvalue().strip()
        # The adapter the checks read: A and B random (init_lora_weights=False), seeded.
        torch.manual_seed(100 + i)
        model = get_peft_model(base_model(base_dir),
                               LoraConfig(task_type="CAUSAL_LM", init_lora_weights=False, **kwargs))
        randomize_trained_parts(model, 200 + i)
        model.eval()
        model.save_pretrained(os.path.join(out, name))
        with torch.no_grad():
            tensors[name] = model(input_ids=ids).logits.contiguous()
            merged = model.merge_and_unload()
            merged.save_pretrained(os.path.join(out, name + "_merged"))
            tensors[name + "_merged"] = merged(input_ids=ids).logits.contiguous()
    save_file(tensors, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "trainable.json"), "w") as f:
        json.dump(trainable, f, indent=2)
    open(os.path.join(out, "done"), "w").close()


def adapted(adapter_dir):
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        base_dir = json.load(f)["base_model_name_or_path"]
    return PeftModel.from_pretrained(base_model(base_dir), adapter_dir).eval()


def main():
    torch.set_num_threads(1)
    command = sys.argv[1]
    if command == "make":
        make(sys.argv[2], sys.argv[3])
    elif command == "logits":
        ids = load_file(sys.argv[3])["input_ids"].long()
        with torch.no_grad():
            logits = adapted(sys.argv[2])(input_ids=ids).logits.contiguous()
        save_file({"logits": logits}, sys.argv[4])
    elif command == "merge":
        adapted(sys.argv[2]).merge_and_unload().save_pretrained(sys.argv[3])
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
