"""Encodes lines with the `tokenizers` library (Rust), for the C++ tokenizer's exactness tests and
scripts/bench/tokenizer: each FILE's lines (split at b"\\n", the "\\n" left out, a "\\r" before it
kept, no empty last line after a final "\\n") are decoded as bytes.decode("utf-8",
errors="replace") and encoded with DIR/tokenizer.json; OUT gets one line of space-separated ids
per input line, files one after the other.

usage: tokenize_reference.py DIR OUT FILE... [--no-special] [--bench]
--no-special: add_special_tokens=False (no BOS from a template).
--bench: also print, as JSON, the bytes encoded and the seconds encode_batch_fast took on one
thread (TOKENIZERS_PARALLELISM is set to false before the import) over all the lines.
"""
import json
import os
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

from tokenizers import Tokenizer  # noqa: E402


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.decode("utf-8", errors="replace") for line in lines]


def main():
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) < 3 or flags - {"--no-special", "--bench"}:
        sys.exit(__doc__)
    folder, out, files = args[0], args[1], args[2:]
    path = folder if folder.endswith(".json") else os.path.join(folder, "tokenizer.json")
    tokenizer = Tokenizer.from_file(path)
    special = "--no-special" not in flags
    lines = [line for f in files for line in read_lines(f)]
    start = time.perf_counter()
    encodings = tokenizer.encode_batch_fast(lines, add_special_tokens=special)
    seconds = time.perf_counter() - start
    with open(out, "w") as f:
        for e in encodings:
            f.write(" ".join(map(str, e.ids)) + "\n")
    if "--bench" in flags:
        size = sum(len(line.encode("utf-8")) for line in lines)
        print(json.dumps({"bytes": size, "seconds": seconds, "lines": len(lines)}))


if __name__ == "__main__":
    main()
