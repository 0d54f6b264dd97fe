"""Llama 3.1's tokenizer.json as the Hub publishes it, made offline from Meta's BPE ranks: the
tokenizer.model (tiktoken's format) inside PyPI's llama-models wheel, which scripts/setup
downloads (no dependency installed: the file is read out of the wheel). 128,000 byte-level tokens
and 256 special ones (128,256 ids), 280,147 merges, Llama 3's split pattern, ignore_merges, BOS
by a template: the size the speed checks and benchmarks load.

The merges are what Transformers' TikTokenConverter derives from ranks: every split of a token
into two tokens of the vocabulary, ordered by the rank of the token they make (then by their
own ranks).

usage: llama3_tokenizer.py LLAMA_MODELS_WHEEL OUT_DIR
Writes OUT_DIR/tokenizer.json and OUT_DIR/tokenizer_config.json.
"""
import base64
import hashlib
import json
import os
import sys
import zipfile

from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE

MEMBER = "llama_models/llama3/tokenizer.model"
RANKS_SHA256 = "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Llama 3.1's special tokens, ids 128000 on; the rest up to 128255 are reserved ones.
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
           "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
           "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
           "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]


def byte_to_unicode():
    """GPT-2's printable stand-in for each byte, as ByteLevel maps them."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def vocab_and_merges(ranks):
    chars = byte_to_unicode()
    text = lambda token: "".join(chars[b] for b in token)
    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        splits = sorted((ranks[token[:i]], ranks[token[i:]], i) for i in range(1, len(token))
                        if token[:i] in ranks and token[i:] in ranks)
        merges.extend((rank, token[:i], token[i:]) for _, _, i in splits)
    merges.sort(key=lambda merge: merge[0])  # stable: each token's splits keep their order
    return vocab, [(text(left), text(right)) for _, left, right in merges]


def main(wheel, out):
    with zipfile.ZipFile(wheel) as z:
        data = z.read(MEMBER)
    if hashlib.sha256(data).hexdigest() != RANKS_SHA256:
        sys.exit(f"{wheel}: {MEMBER} is not Llama 3's ranks (sha256 {RANKS_SHA256})")
    ranks = {}
    for line in data.splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    vocab, merges = vocab_and_merges(ranks)
    tok = Tokenizer(BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    special = SPECIAL + [f"<|reserved_special_token_{i}|>" for i in range(3, 256 - len(SPECIAL) + 3)]
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in special])
    bos = special[0]
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B:1",
                                      special_tokens=[(bos, tok.token_to_id(bos))]),
    ])
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"), pretty=False)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos,
              "eos_token": "<|eot_id|>", "model_max_length": 131072,
              "model_input_names": ["input_ids", "attention_mask"]}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"{out}: {tok.get_vocab_size(with_added_tokens=True)} ids, {len(merges)} merges")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
