"""Builds the Hugging Face fixtures of the language-model tests with Transformers and `tokenizers`
themselves: a byte-level BPE of vocabulary 512 trained on fortunes (GPT-2's layout and Llama-3's),
a tiny GPT-2 and a tiny Llama (2 layers, width 64, 4 heads, 2 KV heads) from config with
save_pretrained (also bf16 and sharded variants), tiny Qwen2 (tied with a sliding layer, and
untied), Qwen3, Mistral and Gemma 3 (each with its own features set: sliding windows shorter
than the test sequence, layer types of both kinds, q/k norms, softcapping), and the reference
outputs the C++ tests compare with (logits with and without an attention mask), and
defaults.json: each new model type's config defaults and parameter count, as Transformers has
them.

usage: hf_fixtures.py OUT_DIR [FORTUNES_DIR]
Writes OUT_DIR/<name>/ folders and OUT_DIR/reference.safetensors, then OUT_DIR/done last (a
test that finds `done` reuses the folder).
"""
import copy
import glob
import json
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (AutoConfig, AutoModelForCausalLM, Gemma3TextConfig, GPT2Config,
                          GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          PreTrainedTokenizerFast, Qwen2Config, Qwen3Config)

# Llama-3's split pattern (tokenizer.json of Meta-Llama-3-8B).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def fortune_files(folder):
    """The text files of the fortunes folder, in path order (no .dat indexes, no .u8 links)."""
    files = []
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        if os.path.isfile(path) and not path.endswith((".dat", ".u8")):
            files.append(path)
    return files


def train_tokenizer(files, llama3, vocab_size=512):
    """A byte-level BPE of vocab_size ids trained on `files`: GPT-2's layout, or Llama-3's (a Split
    pre-tokenizer then a byte-level step without its regex, ignore_merges, BOS by a template)."""
    tok = Tokenizer(models.BPE(ignore_merges=llama3))
    if llama3:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|begin_of_text|>", "<|end_of_text|>"] if llama3 else ["<|endoftext|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train(files, trainer)
    if llama3:
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
            special_tokens=[("<|begin_of_text|>", bos)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                       eos_token="<|end_of_text|>")
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>")


def tiny_gpt2(vocab, eos):
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                        bos_token_id=eos, eos_token_id=eos, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def tiny_llama(vocab, bos, eos):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=bos, eos_token_id=eos, tie_word_embeddings=False)
    return LlamaForCausalLM(config)


def tiny_family(kind, vocab, bos, eos, newline, seed):
    """A tiny model of the Llama family's newer members, each feature under test set; its 1-D
    tensors (norms, biases), which Transformers initialises to constants, perturbed so that they
    matter. Gemma's pad_token_id is the newline that ends every line of the training texts (and
    is not in the prompts, where model.generate would mask it): its embedding row
    (nn.Embedding's padding_idx) gets no gradient in training."""
    shared = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  bos_token_id=bos, eos_token_id=eos)
    if kind == "qwen2":
        config = Qwen2Config(**shared, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000.0})
    elif kind == "qwen2_tied":
        # A sliding window from layer 1 on (max_window_layers), as Qwen2Config computes it.
        config = Qwen2Config(**shared, tie_word_embeddings=True, use_sliding_window=True,
                             sliding_window=8, max_window_layers=1)
    elif kind == "qwen3":
        config = Qwen3Config(**shared, head_dim=32, attention_bias=True, tie_word_embeddings=False)
    elif kind == "mistral":
        config = MistralConfig(**shared, sliding_window=8, tie_word_embeddings=False)
    else:
        config = Gemma3TextConfig(**{**shared, "num_hidden_layers": 3}, head_dim=32,
                                  layer_types=["sliding_attention", "full_attention",
                                               "sliding_attention"],
                                  sliding_window=8, query_pre_attn_scalar=24,
                                  final_logit_softcapping=3.0, attn_logit_softcapping=20.0,
                                  pad_token_id=newline)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def defaults():
    """Each new model type's config defaults and the parameter count of a model of them (built
    on the meta device: nothing allocated)."""
    out = {}
    for cls in (Qwen2Config, Qwen3Config, MistralConfig, Gemma3TextConfig):
        config = cls()
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        d = config.to_dict()
        d.pop("layer_types", None)
        out[config.model_type] = {"config": d, "num_parameters": model.num_parameters(),
                                  "layer_types": getattr(config, "layer_types", None)}
    return out


def save(model, tokenizer, folder, **kwargs):
    model.save_pretrained(folder, **kwargs)
    tokenizer.save_pretrained(folder)


def main():
    out = sys.argv[1]
    fortunes = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/games/fortunes"
    os.makedirs(out, exist_ok=True)
    files = fortune_files(fortunes)
    gpt2_tok = train_tokenizer(files, llama3=False)
    llama_tok = train_tokenizer(files, llama3=True)
    gpt2_tok.save_pretrained(os.path.join(out, "tokenizer_gpt2"))
    llama_tok.save_pretrained(os.path.join(out, "tokenizer_llama3"))

    eos = gpt2_tok.eos_token_id
    gpt2 = tiny_gpt2(512, eos).eval()
    llama = tiny_llama(512, llama_tok.bos_token_id, llama_tok.eos_token_id).eval()
    save(gpt2, gpt2_tok, os.path.join(out, "gpt2"))
    save(llama, llama_tok, os.path.join(out, "llama"))
    save(gpt2, gpt2_tok, os.path.join(out, "gpt2_sharded"), max_shard_size="100KB")
    save(llama, llama_tok, os.path.join(out, "llama_sharded"), max_shard_size="100KB")
    # Module.to converts in place: the bf16 copies are deep copies.
    save(copy.deepcopy(gpt2).to(torch.bfloat16), gpt2_tok, os.path.join(out, "gpt2_bf16"))
    save(copy.deepcopy(llama).to(torch.bfloat16), llama_tok, os.path.join(out, "llama_bf16"))
    # A tied Llama (the lm_head is the embedding: absent from the file).
    torch.manual_seed(1)
    tied = LlamaForCausalLM(LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=1, head_dim=32,
                                        max_position_embeddings=64, tie_word_embeddings=True,
                                        attention_bias=True, mlp_bias=True,
                                        rope_parameters={"rope_type": "default",
                                                         "rope_theta": 500.0})).eval()
    save(tied, llama_tok, os.path.join(out, "llama_tied"))
    family = {}
    for seed, kind in enumerate(("qwen2", "qwen2_tied", "qwen3", "mistral", "gemma3_text")):
        family[kind] = tiny_family(kind, 512, llama_tok.bos_token_id, llama_tok.eos_token_id,
                                   llama_tok.convert_tokens_to_ids("\u010a"), seed + 2).eval()
        save(family[kind], llama_tok, os.path.join(out, kind))
    save(family["qwen3"], llama_tok, os.path.join(out, "qwen3_sharded"), max_shard_size="100KB")
    gemma_bf16 = copy.deepcopy(family["gemma3_text"]).to(torch.bfloat16)
    save(gemma_bf16, llama_tok, os.path.join(out, "gemma3_text_bf16"))
    with open(os.path.join(out, "defaults.json"), "w") as f:
        json.dump(defaults(), f)

    # Reference logits on the same ids, with and without a (left-padded) attention mask.
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 512, (3, 20), generator=g)
    mask = torch.ones(3, 20, dtype=torch.long)
    mask[1, :5] = 0
    mask[2, 15:] = 0
    ref = {"input_ids": ids, "attention_mask": mask}
    with torch.no_grad():
        for name, model in (("gpt2", gpt2), ("llama", llama), ("llama_tied", tied),
                            *family.items(), ("gemma3_text_bf16", gemma_bf16)):
            ref[name + ".logits"] = model(input_ids=ids).logits.float().contiguous()
            ref[name + ".logits_masked"] = model(input_ids=ids, attention_mask=mask).logits.float().contiguous()
            ref[name + ".loss"] = model(input_ids=ids, labels=ids).loss.float().reshape(1)
    save_file(ref, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "done"), "w") as f:
        json.dump({"transformers": __import__("transformers").__version__}, f)


if __name__ == "__main__":
    main()
