"""SentencePiece tokenizers as Hub folders hold them, shared by sentencepiece_tokenizers.py and
hub_checkpoints.py: Transformers 5's conversion of a tokenizer.model under a tokenizer_config's
class, and the older layout of Llama 2's and Mistral 7B's tokenizer.json (normalizer Prepend and
Replace, no pre-tokenizer, BOS by the template, the decoder chain with Strip) with the config
beside it."""
import json
import os
import shutil
import tempfile

from transformers import AutoTokenizer

# Mistral-7B-v0.1's tokenizer_config.json keys.
OLDER_HUB_CONFIG = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                    "unk_token": "<unk>", "legacy": True, "tokenizer_class": "LlamaTokenizer",
                    "clean_up_tokenization_spaces": False, "pad_token": None, "sp_model_kwargs": {}}


def converted(model_path, config, work):
    """The folder (under `work`) Transformers 5 saves from a tokenizer.model and the config's class."""
    source = tempfile.mkdtemp(dir=work)
    shutil.copy(model_path, os.path.join(source, "tokenizer.model"))
    with open(os.path.join(source, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    folder = tempfile.mkdtemp(dir=work)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def write_older_hub_layout(converted_folder, folder):
    """The older Hub layout of the vocabulary and merges of `converted_folder`, written in `folder`."""
    with open(os.path.join(converted_folder, "tokenizer.json")) as f:
        j = json.load(f)
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    j["pre_tokenizer"] = None
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    j["model"]["unk_token"] = "<unk>"
    j["model"]["ignore_merges"] = False
    j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]  # the older "a b" strings
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(j, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(OLDER_HUB_CONFIG, f)
