"""The ids the `tokenizers` library gives for every line of the fortunes corpus and hostile text,
under the fixtures' tokenizers, for the C++ tokenizer's exactness tests (tests/lib/tokenizers,
tests/apps/tokenize_test.cpp). The ids of 150,000 lines would be megabytes: each block of BLOCK
lines is kept as a hash, which the tests compute alike from their own ids, so that a difference
names its block (its lines, our ids; tokenize_reference.py gives theirs).

A corpus is the fortunes' text files (no .dat, no .u8, in path order) and then a hostile file,
its lines as tokenize_reference.py cuts them. Cases:
  gpt2, llama3, llama3_plain   fortunes then HOSTILE, line by line (llama3_plain: no BOS), the
                               Tokenizer suite's corpus
  cli_gpt2, cli_llama3         the fortunes' text and HOSTILE_UTF8 concatenated into one file,
                               `trainer tokenize`'s corpus
  few_plain                    FEW's lines under the Llama 3 layout, no BOS

usage: tokenize_corpus.py HF_FIXTURES HOSTILE HOSTILE_UTF8 FEW OUT
Writes OUT/<case>.json: {"lines": N, "block": BLOCK, "blocks": [hash, ...]}, a hash the first 16
hex digits of the SHA-256 of a block's ids as lines of space-separated numbers, each ending in
"\\n".
"""
import glob
import hashlib
import json
import os
import sys
import tempfile

from tokenize_reference import read_lines

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

from tokenizers import Tokenizer  # noqa: E402

BLOCK = 64
FORTUNES = "/usr/share/games/fortunes"


def fortune_files():
    return [f for f in sorted(glob.glob(os.path.join(FORTUNES, "*")))
            if os.path.isfile(f) and not f.endswith((".dat", ".u8"))]


def blocks(tokenizer, lines, special):
    ids = [" ".join(map(str, e.ids)) + "\n"
           for e in tokenizer.encode_batch_fast(lines, add_special_tokens=special)]
    return {"lines": len(lines), "block": BLOCK,
            "blocks": [hashlib.sha256("".join(ids[i:i + BLOCK]).encode()).hexdigest()[:16]
                       for i in range(0, len(ids), BLOCK)]}


def main(fixtures, hostile, hostile_utf8, few, out):
    tokenizer = {name: Tokenizer.from_file(os.path.join(fixtures, "tokenizer_" + name, "tokenizer.json"))
                 for name in ("gpt2", "llama3")}
    lines = [line for f in fortune_files() + [hostile] for line in read_lines(f)]
    with tempfile.TemporaryDirectory() as tmp:
        joined = os.path.join(tmp, "corpus.txt")
        with open(joined, "wb") as f:
            for path in fortune_files() + [hostile_utf8]:
                with open(path, "rb") as src:
                    f.write(src.read())
        cli_lines = read_lines(joined)
    cases = {"gpt2": ("gpt2", lines, True), "llama3": ("llama3", lines, True),
             "llama3_plain": ("llama3", lines, False), "cli_gpt2": ("gpt2", cli_lines, True),
             "cli_llama3": ("llama3", cli_lines, True),
             "few_plain": ("llama3", read_lines(few), False)}
    for case, (name, text, special) in cases.items():
        with open(os.path.join(out, case + ".json"), "w") as f:
            json.dump(blocks(tokenizer[name], text, special), f, indent=0)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
