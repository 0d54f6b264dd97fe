"""SentencePiece-style tokenizer.json files and what `tokenizers` and Transformers make of them:
the reference of lib/tokenizers' normalizers, Metaspace, byte fallback, Unigram, decoders and
added-token flags (tests/lib/tokenizers/sentencepiece_test.cpp).

Mistral's own SentencePiece models (BPE with byte fallback, read out of PyPI's mistral-common
wheel, which scripts/setup downloads) are made into tokenizer.json as Transformers 5 converts
them (LlamaTokenizer, legacy false and true; the generic TokenizersBackend path) and by hand in
the older Hub layout of Llama 2 and Mistral 7B (normalizer Prepend + Replace, decoder Replace,
ByteFallback, Fuse, Strip); a Unigram model is trained by sentencepiece; small tokenizers trained
by `tokenizers` carry every normalizer, the Metaspace schemes and the added-token flags; and
Transformers' GemmaTokenizer and Qwen2Tokenizer write their folders. The text: every .mo
catalogue under /usr/share/locale (a few messages of each language, read with Python's gettext),
and hostile lines.

usage: sentencepiece_tokenizers.py MISTRAL_COMMON_RELEASE SENTENCEPIECE_RELEASE MISTRAL_COMMON_WHEEL OUT_DIR
(the releases scripts/common.sh pins, checked against the wheel's name and the installed package)
Writes OUT_DIR/corpus.json (the lines), OUT_DIR/<case>/ (tokenizer.json.gz, and
tokenizer_config.json where Transformers reads the folder) and OUT_DIR/cases.json.gz: per case,
the ids of each line by `tokenizers` from the file ("raw", with byte offsets) and by AutoTokenizer
on the folder ("auto"), and their decodes with and without special tokens.
"""
import gettext
import glob
import gzip
import json
import os
import shutil
import sys
import tempfile
import zipfile

import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
from tokenizers.models import BPE, Unigram
from transformers import AutoTokenizer, GemmaTokenizer, Qwen2Tokenizer

from sentencepiece_layouts import converted, write_older_hub_layout

mistral_release, sentencepiece_release, wheel, out = sys.argv[1:5]
if f"mistral_common-{mistral_release}-" not in os.path.basename(wheel):
    sys.exit(f"{wheel} is not mistral-common {mistral_release}'s wheel")
if spm.__version__ != sentencepiece_release:
    sys.exit(f"sentencepiece {spm.__version__} is installed, not {sentencepiece_release}")
os.makedirs(out, exist_ok=True)
work = tempfile.mkdtemp()

# ---- the text
lines = []
for path in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")):
    language = path.split("/")[4]
    if any(line_language == language for line_language in []):
        continue
    try:
        catalog = gettext.GNUTranslations(open(path, "rb"))._catalog
    except Exception:
        continue
    taken = 0
    for key, value in sorted(catalog.items(), key=lambda kv: str(kv[0])):
        if isinstance(value, str) and value and key and taken < 3:
            lines.append(value)
            taken += 1
# At most 8 lines a language (the catalogues hold hundreds of languages, some in many files).
seen, corpus = {}, []
for line in lines:
    if line in seen:
        continue
    seen[line] = True
    corpus.append(line)
corpus = corpus[:1500]
corpus += [
    "", " ", "  ", "Hello world", " Hello", "Hello  world", "  two  spaces ", "a\nb", "a\tb\nc",
    "\r\n", "ǅ€", "😀 emoji 👍🏽", "Hello<s>world", "<s>Hello", "</s>", "<s> hello", "hello <s> world",
    "[INST] hi [/INST]", "[TOOL_CALLS][{\"a\": 1}]", "▁already ▁▁two", "ﬁne ① Ｈｅｌｌｏ", "e\u0301 é",
    "Crème Brûlée", "ΟΔΟΣ İstanbul ẞ ǅ", "\u0903x \u20dd \u0e48", "\x01\x02 control", "\ufeffBOM",
    "x\u200by", "\u3000ideographic\u3000space", "\u00a0nbsp\u00a0", "HELLO world HeLLo WORLD",
    "<tool> call </tool>", " <tool> ", "a<tool>b", "[word] x[word]y -[word]-", "tab\there",
    "日本語のテキスト", "한국어 텍스트", "العربية نص", "עברית", "हिन्दी पाठ", "ไทย ข้อความ",
    "\U0001F16C \uAB69 \uA7F2 \U00011935\U00011930", "1234567890 3.14159", "naïve café résumé",
]

# ---- Mistral's models out of the wheel
members = {"v1": "mistral_common/data/tokenizer.model.v1",
           "v3": "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3",
           "v7": "mistral_common/data/mistral_instruct_tokenizer_241114.model.v7"}
models = {}
with zipfile.ZipFile(wheel) as z:
    for name, member in members.items():
        models[name] = os.path.join(work, f"{name}.model")
        with open(models[name], "wb") as f:
            f.write(z.read(member))


cases = {}  # name -> folder (tokenizer.json, maybe tokenizer_config.json)
cases["mistral_v1"] = converted(models["v1"], {"tokenizer_class": "LlamaTokenizer", "legacy": False}, work)
cases["mistral_v3"] = converted(models["v3"], {"tokenizer_class": "LlamaTokenizer", "legacy": True}, work)
cases["mistral_v7"] = converted(models["v7"], {"tokenizer_class": "TokenizersBackend", "legacy": True}, work)

# The older Hub layout of Llama 2 and Mistral 7B, by hand: merges ranked by score (the generic
# converter's), normalizer Prepend + Replace, no pre-tokenizer, the decoder chain with Strip.
generic = converted(models["v1"], {"tokenizer_class": "TokenizersBackend", "legacy": True}, work)
folder = os.path.join(work, "mistral_v1_hub")
write_older_hub_layout(generic, folder)
cases["mistral_v1_hub"] = folder

# A Unigram model with byte fallback, trained by sentencepiece (no normalization rule: an empty
# character map), through the generic converter.
train_text = os.path.join(work, "train.txt")
with open(train_text, "w") as f:
    f.write("\n".join(l.replace("\n", " ") for l in corpus if l.strip()))
spm.SentencePieceTrainer.train(input=train_text, model_prefix=os.path.join(work, "uni"), vocab_size=900,
                               model_type="unigram", byte_fallback=True, normalization_rule_name="identity",
                               character_coverage=0.98, minloglevel=2)
cases["unigram"] = converted(os.path.join(work, "uni.model"),
                             {"tokenizer_class": "TokenizersBackend", "legacy": True}, work)


def trained(name, model, trainer, normalizer, pre_tokenizer, decoder, added):
    tok = Tokenizer(model)
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, pre_tokenizer, decoder
    tok.train_from_iterator([l for l in corpus if l.strip()], trainer)
    tok.add_tokens(added)
    folder = os.path.join(work, name)
    os.makedirs(folder)
    tok.save(os.path.join(folder, "tokenizer.json"))
    cases[name] = folder


added = [AddedToken("<tool>", lstrip=True, rstrip=True, normalized=False, special=True),
         AddedToken("</tool>", rstrip=True, normalized=False),
         AddedToken("[word]", single_word=True, normalized=False),
         AddedToken("HeLLo", normalized=True), AddedToken("WORLD", normalized=False)]
# Every normalizer but the Unicode forms' siblings, Metaspace "first" splitting at each "▁".
trained("normalizers", BPE(unk_token="<unk>", fuse_unk=True),
        trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>"]),
        normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"\s{2,}"), " "),
                              normalizers.Lowercase(), normalizers.Strip(),
                              normalizers.Replace(Regex(r"^\d"), "#")]),
        pre_tokenizers.Metaspace(prepend_scheme="first", split=True),
        decoders.Metaspace(prepend_scheme="first"), added)
trained("accents", Unigram(), trainers.UnigramTrainer(vocab_size=600, special_tokens=["<unk>"], unk_token="<unk>"),
        normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.NFC(),
                              normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
        None, decoders.Sequence([decoders.Replace("▁", " "), decoders.Strip(" ", 1, 0)]), added)
trained("never", BPE(unk_token="<unk>"), trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>"]),
        normalizers.Sequence([normalizers.NFKD(), normalizers.Strip(left=False, right=True)]),
        pre_tokenizers.Sequence([pre_tokenizers.Split(" ", "merged_with_previous"),
                                 pre_tokenizers.Metaspace(prepend_scheme="never", split=False)]),
        decoders.Metaspace(prepend_scheme="never"), added)

# Transformers' own classes: Qwen2Tokenizer (NFC, byte-level) and GemmaTokenizer (spaces by the
# normalizer) write their folders, which AutoTokenizer rebuilds as they do.
byte_level = Tokenizer(BPE())
byte_level.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
byte_level.train_from_iterator([l for l in corpus if l.strip()],
                               trainers.BpeTrainer(vocab_size=800, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
bl = json.loads(byte_level.to_str())
qwen = Qwen2Tokenizer(vocab=bl["model"]["vocab"], merges=[tuple(m) for m in bl["model"]["merges"]])
qwen.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
cases["qwen2"] = os.path.join(work, "qwen2")
qwen.save_pretrained(cases["qwen2"])
with open(os.path.join(cases["mistral_v1"], "tokenizer.json")) as f:
    v1 = json.load(f)["model"]
gemma = GemmaTokenizer(vocab=v1["vocab"], merges=[tuple(m) for m in v1["merges"]], bos_token="<s>",
                       eos_token="</s>", pad_token="<unk>", mask_token="<unk>")
cases["gemma"] = os.path.join(work, "gemma")
gemma.save_pretrained(cases["gemma"])


def byte_offsets(text, offsets):
    starts = [0]
    for ch in text:
        starts.append(starts[-1] + len(ch.encode()))
    return [[starts[a], starts[b]] for a, b in offsets]


results = {}
for name, folder in cases.items():
    raw = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    entry = {"raw": [], "raw_offsets": [], "raw_decode": [], "raw_decode_skip": []}
    has_config = os.path.exists(os.path.join(folder, "tokenizer_config.json"))
    if has_config:
        auto = AutoTokenizer.from_pretrained(folder)
        entry.update({"auto": [], "auto_decode": [], "auto_decode_skip": [], "class": type(auto).__name__})
    for line in corpus:
        e = raw.encode(line)
        entry["raw"].append(e.ids)
        entry["raw_offsets"].append(byte_offsets(line, e.offsets))
        entry["raw_decode"].append(raw.decode(e.ids, skip_special_tokens=False))
        entry["raw_decode_skip"].append(raw.decode(e.ids, skip_special_tokens=True))
        if has_config:
            ids = auto(line)["input_ids"]
            entry["auto"].append(ids)
            entry["auto_decode"].append(auto.decode(ids, skip_special_tokens=False))
            entry["auto_decode_skip"].append(auto.decode(ids, skip_special_tokens=True))
    results[name] = entry
    target = os.path.join(out, name)
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "rb") as f, \
            gzip.GzipFile(os.path.join(target, "tokenizer.json.gz"), "wb", mtime=0) as g:
        g.write(f.read())
    if has_config:
        shutil.copy(os.path.join(folder, "tokenizer_config.json"), target)
with open(os.path.join(out, "corpus.json"), "w") as f:
    json.dump(corpus, f, ensure_ascii=False, indent=0)
with gzip.GzipFile(os.path.join(out, "cases.json.gz"), "wb", mtime=0) as g:
    g.write(json.dumps(results, ensure_ascii=False).encode())
print(f"{len(cases)} tokenizers, {len(corpus)} lines")
