"""The checkpoints people download, as their Hub folders are: fifteen config.json files written key
for key as today's most fine-tuned Hub folders spell them (Llama 3.1 and 3.2 with their llama3
rope scaling, Qwen2.5 plain and with the YaRN block its model card asks for, Qwen3, Gemma 3's
text model with linear scaling, Phi-4-mini with longrope, Phi-3-mini, Gemma 2, OLMo 2, SmolLM2,
SmolLM3, Granite 3.3, Mixtral, Qwen3-MoE, Mistral 7B), their sizes shrunk (hidden size 32, two to
four layers, small vocabularies) and nothing else changed, each beside the tokenizer layout its
family ships: Llama 3's (PreTrainedTokenizerFast), GPT-2's (GPT2Tokenizer: SmolLM2, OLMo 2,
Granite), Qwen2Tokenizer's, and SentencePiece's: LlamaTokenizer as Transformers converts a
tokenizer.model (Phi-3, Mixtral), the older Hub layout by hand (Mistral 7B: normalizer Prepend and
Replace), GemmaTokenizer's (Gemma 2 and 3). The SentencePiece vocabularies are trained here by
sentencepiece on the fortunes; the byte-level ones are the fixtures'.

Transformers builds each model from the Hub spelling (AutoConfig reads it as from_pretrained
would), save_pretrained writes the weights, and the config.json is put back in the Hub's spelling.
Beside each: AutoTokenizer's ids of a few lines and the model's loss on each (float32, eval mode),
and the eval_loss run_clm.py computes on those lines (block_size 16): what `trainer evaluate`
must print.

usage: hub_checkpoints.py HF_FIXTURES OUT_DIR
Writes OUT_DIR/<name>/ folders and OUT_DIR/cases.json.
"""
import json
import math
import os
import shutil
import sys
import tempfile

import sentencepiece as spm
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GemmaTokenizer, Qwen2Tokenizer

from sentencepiece_layouts import converted, write_older_hub_layout

fixtures, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
work = tempfile.mkdtemp()

with open("/usr/share/games/fortunes/fortunes", encoding="utf-8") as f:
    fortunes = [l.strip() for l in f.read().split("\n") if l.strip() and l.strip() != "%"]
LINES = fortunes[:12] + ["Größe und Maß: naïve café, 日本語, emoji 😀.", "  two  spaces and\ttabs"]
BLOCK = 16


# ---- tokenizer layouts
def copy_fixture(name, folder, config):
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(fixtures, name, "tokenizer.json"), folder)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)


def llama3(folder):  # Llama 3.x and SmolLM3: PreTrainedTokenizerFast, BOS by the template
    copy_fixture("tokenizer_llama3", folder, {"tokenizer_class": "PreTrainedTokenizerFast",
                                               "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                                               "clean_up_tokenization_spaces": True,
                                               "model_input_names": ["input_ids", "attention_mask"]})


def gpt2(folder):  # SmolLM2, OLMo 2, Granite: GPT2Tokenizer
    copy_fixture("tokenizer_gpt2", folder, {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False,
                                             "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                             "unk_token": "<|endoftext|>", "clean_up_tokenization_spaces": False})


with open(os.path.join(fixtures, "tokenizer_gpt2", "tokenizer.json")) as f:
    byte_level = json.load(f)["model"]


def qwen(folder):  # Qwen2.5, Qwen3, Qwen3-MoE: Qwen2Tokenizer's folder
    tok = Qwen2Tokenizer(vocab=byte_level["vocab"], merges=[tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                                                            for m in byte_level["merges"]])
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.save_pretrained(folder)


text = os.path.join(work, "fortunes.txt")
with open(text, "w") as f:
    f.write("\n".join(fortunes[:4000]))
spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(work, "llama_sp"), vocab_size=600,
                               model_type="bpe", byte_fallback=True, minloglevel=2)
spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(work, "gemma_sp"), vocab_size=600,
                               model_type="bpe", byte_fallback=True, minloglevel=2, pad_id=0, eos_id=1,
                               bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
                               unk_piece="<unk>")


def sp_llama(legacy):  # Phi-3 (legacy false), Mixtral (legacy true): LlamaTokenizer converted
    def make(folder):
        made = converted(os.path.join(work, "llama_sp.model"),
                         {"tokenizer_class": "LlamaTokenizer", "legacy": legacy, "add_bos_token": True,
                          "add_eos_token": False}, work)
        shutil.copytree(made, folder, dirs_exist_ok=True)
    return make


def sp_hub(folder):  # Mistral 7B v0.1 and Llama 2's older layout, by hand
    write_older_hub_layout(converted(os.path.join(work, "llama_sp.model"),
                                     {"tokenizer_class": "LlamaTokenizer", "legacy": True}, work), folder)


def gemma(folder):  # Gemma 2 and 3: GemmaTokenizer's folder
    made = converted(os.path.join(work, "gemma_sp.model"), {"tokenizer_class": "LlamaTokenizer", "legacy": True},
                     work)
    with open(os.path.join(made, "tokenizer.json")) as f:
        model = json.load(f)["model"]
    tok = GemmaTokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]], mask_token="<unk>")
    tok.save_pretrained(folder)


# ---- the configs, as the Hub spells them, shrunk
SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
CASES = {
    "llama3.1": (llama3, {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
        "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                               "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.43.0.dev0", "use_cache": True, "vocab_size": 128256}),
    "llama3.2": (llama3, {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
        "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
        "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                               "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256}),
    "qwen2.5": (qwen, {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
        "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
        "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 151936}),
    "qwen2.5_yarn": (qwen, {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
        "intermediate_size": 18944, "max_position_embeddings": 32768, "max_window_layers": 28,
        "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 152064,
        "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}}),
    "qwen3": (qwen, {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
        "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
        "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
        "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 151936}),
    "gemma3_4b_text": (gemma, {
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
        "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 10240,
        "max_position_embeddings": 131072, "model_type": "gemma3_text", "num_attention_heads": 8,
        "num_hidden_layers": 34, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_theta": 1000000.0,
        "sliding_window": 1024, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
        "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262208}),
    "phi4_mini": (llama3, {
        "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 199999, "embd_pdrop": 0.0, "eos_token_id": 199999, "full_attn_mod": 1,
        "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
        "interpolate_factor": 1, "lm_head_bias": False, "max_position_embeddings": 131072, "mlp_bias": False,
        "model_type": "phi3", "num_attention_heads": 24, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "original_max_position_embeddings": 4096, "pad_token_id": 199999, "partial_rotary_factor": 0.75,
        "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
        "rope_scaling": {"long_factor": [1.0] * 48, "short_factor": [1.0] * 48, "type": "longrope"},
        "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0", "use_cache": True, "vocab_size": 200064}),
    "phi3_mini": (sp_llama(False), {
        "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
        "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
        "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
        "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0, "sliding_window": 2047,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.2",
        "use_cache": True, "vocab_size": 32064}),
    "gemma2": (gemma, {
        "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
        "eos_token_id": [1, 107], "final_logit_softcapping": 30.0, "head_dim": 256,
        "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304,
        "initializer_range": 0.02, "intermediate_size": 9216, "max_position_embeddings": 8192,
        "model_type": "gemma2", "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
        "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
        "sliding_window": 4096, "torch_dtype": "float32", "transformers_version": "4.42.4", "use_cache": True,
        "vocab_size": 256000}),
    "olmo2": (gpt2, {
        "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "olmo2",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "pad_token_id": 100277,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False,
        "torch_dtype": "float32", "transformers_version": "4.47.0.dev0", "use_cache": True,
        "vocab_size": 100352}),
    "smollm2": (gpt2, {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
        "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": True,
        "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
        "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_interleaved": False, "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.42.3", "use_cache": True, "vocab_size": 49152}),
    "smollm3": (llama3, {
        "architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": None, "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 65536,
        "max_window_layers": 28, "mlp_bias": False, "model_type": "smollm3", "no_rope_layer_interval": 4,
        "no_rope_layers": [1, 1, 1, 0] * 9, "num_attention_heads": 16, "num_hidden_layers": 36,
        "num_key_value_heads": 4, "pad_token_id": 128004, "pretraining_tp": 2, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 5000000.0, "sliding_window": None, "torch_dtype": "bfloat16",
        "transformers_version": "4.54.0.dev0", "use_cache": False, "use_sliding_window": False,
        "vocab_size": 128256}),
    "granite3.3": (gpt2, {
        "architectures": ["GraniteForCausalLM"], "attention_bias": False, "attention_dropout": 0.1,
        "attention_multiplier": 0.015625, "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
        "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
        "logits_scaling": 8.0, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "granite",
        "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
        "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000000.0,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.49.0",
        "use_cache": True, "vocab_size": 49159}),
    "mixtral": (sp_llama(True), {
        "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
        "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
        "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.02, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0", "use_cache": True, "vocab_size": 32000}),
    "qwen3_moe": (qwen, {
        "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
        "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
        "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": True,
        "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
        "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_scaling": None,
        "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
        "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}),
    "mistral7b": (sp_hub, {
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000}),
}


def shrink(name, config, tok):
    """Sizes shrunk, nothing else: widths, layers, experts, the vocabulary (to the tokenizer's,
    rounded up as the Hub rounds it) and the special ids (the tokenizer's own)."""
    c = dict(config)
    c.update(SMALL)
    layers = 4 if c["model_type"] in ("smollm3", "gemma3_text") else 2
    c["num_hidden_layers"] = layers
    if "head_dim" in c:
        c["head_dim"] = 8
    if "query_pre_attn_scalar" in c:
        c["query_pre_attn_scalar"] = 8
    if "max_window_layers" in c:
        c["max_window_layers"] = layers
    if "no_rope_layers" in c:
        c["no_rope_layers"] = c["no_rope_layers"][:layers]
    if "sliding_window_pattern" in c:
        c["sliding_window_pattern"] = 2
    if c.get("rope_scaling") and "long_factor" in c["rope_scaling"]:  # one factor per rotated pair
        rotated = int(8 * c.get("partial_rotary_factor", 1.0)) // 2
        c["rope_scaling"] = dict(c["rope_scaling"], long_factor=[1.0, 1.5, 4.0][:rotated],
                                 short_factor=[1.0, 1.2, 1.5][:rotated])
    for key, value in (("num_local_experts", 4), ("num_experts", 4), ("num_experts_per_tok", 2),
                       ("moe_intermediate_size", 32)):
        if key in c:
            c[key] = value
    c["vocab_size"] = (len(tok) + 63) // 64 * 64
    for key, token in (("bos_token_id", tok.bos_token_id), ("eos_token_id", tok.eos_token_id),
                       ("pad_token_id", tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)):
        if key in c and c[key] is not None:
            c[key] = token
    return c


def run_clm_eval_loss(model, tok):
    """What run_clm.py's evaluate gives on LINES: each tokenized, all concatenated, cut into blocks
    of BLOCK (the rest dropped), the mean of the blocks' losses."""
    ids = [i for line in LINES for i in tok(line)["input_ids"]]
    blocks = [ids[k:k + BLOCK] for k in range(0, len(ids) - BLOCK + 1, BLOCK)]
    with torch.no_grad():
        batch = torch.tensor(blocks)
        losses = [model(batch[k:k + 1], labels=batch[k:k + 1]).loss.item() for k in range(len(blocks))]
    return sum(losses) / len(losses), len(blocks)


cases = {"lines": LINES, "block_size": BLOCK, "cases": {}}
for name, (tokenizer, hub) in CASES.items():
    folder = os.path.join(out, name)
    tokenizer(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    config = shrink(name, hub, tok)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=torch.float32)
    with torch.no_grad():  # the 1-D tensors, constants at first, perturbed so that they matter
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:  # the Hub's spelling again
        json.dump(config, f, indent=2)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    entry = {"class": type(tok).__name__, "ids": [], "losses": []}
    for line in LINES:
        ids = tok(line)["input_ids"]
        entry["ids"].append(ids)
        with torch.no_grad():
            t = torch.tensor([ids])
            entry["losses"].append(model(t, labels=t).loss.item() if len(ids) > 1 else None)
    entry["eval_loss"], entry["eval_blocks"] = run_clm_eval_loss(model, tok)
    cases["cases"][name] = entry
with open(os.path.join(out, "cases.json"), "w") as f:
    json.dump(cases, f, indent=1, ensure_ascii=False)
print(f"{len(CASES)} checkpoints")
