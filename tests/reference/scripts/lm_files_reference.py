"""Reads run_clm.py's data files as Hugging Face `datasets` reads them, with the real library
(load_dataset("text", data_files=..., keep_linebreaks=...) and load_dataset("json", ...)), and
computes run_clm's percent split (train[:p%] / train[p%:]) with datasets' ReadInstruction; prints
the results as JSON for tests/lib/data/lm_files_test.cpp to compare with lib/data/lm_files.cpp.

usage: lm_files_reference.py REQUEST.json
REQUEST: {"read": [{"path": P, "text_column": "text", "keep_linebreaks": true}, ...],
          "split": [[COUNT, PERCENT], ...]}, P relative to REQUEST's folder
(tests/reference/inputs/lm_files/ holds the files and the request the test reads)
Prints {"read": [{"examples": [TEXT, ...]} or {"error": "..."}, ...], "split": [BOUNDARY, ...]}:
an error where datasets raises, or where run_clm could not tokenize the column (missing, or a
value that is not a string). Offline, with a temporary cache that is removed at the end.
"""
import json
import os
import shutil
import sys
import tempfile

os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import datasets  # noqa: E402


def read(request, cache_dir, folder):
    path = os.path.join(folder, request["path"])  # relative paths from the request's folder
    column = request.get("text_column", "text")
    # run_clm: extension = train_file.split(".")[-1]; "txt" -> the "text" builder, which alone
    # takes keep_linebreaks.
    extension = path.split(".")[-1]
    try:
        if extension == "txt":
            ds = datasets.load_dataset("text", data_files=path, split="train", cache_dir=cache_dir,
                                       keep_linebreaks=request.get("keep_linebreaks", True))
        else:
            ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache_dir)
        if column not in ds.column_names:
            return {"error": f"no column {column!r} (columns: {ds.column_names})"}
        # Invalid UTF-8 inside a JSON string loads, and raises UnicodeDecodeError when read.
        texts = list(ds[column])
    except Exception as error:  # datasets wraps most in DatasetGenerationError: name the cause
        cause = error.__cause__ or error.__context__ or error
        return {"error": f"{type(cause).__name__}: {cause}"}
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            return {"error": f"record {i}: {column!r} is {type(text).__name__}, not a string"}
    return {"examples": texts}


def split(count, percent):
    # run_clm passes split=f"train[:{p}%]" and f"train[{p}%:]" (a whole percentage); datasets
    # resolves both with ReadInstruction's default "closest" rounding.
    lengths = {"train": count}
    if float(percent).is_integer():
        p = int(percent)
        head = datasets.ReadInstruction.from_spec(f"train[:{p}%]").to_absolute(lengths)[0]
        tail = datasets.ReadInstruction.from_spec(f"train[{p}%:]").to_absolute(lengths)[0]
    else:
        head = datasets.ReadInstruction("train", to=percent, unit="%").to_absolute(lengths)[0]
        tail = datasets.ReadInstruction("train", from_=percent, unit="%").to_absolute(lengths)[0]
    assert head.from_ == 0 and tail.to == count and head.to == tail.from_, (head, tail)
    return head.to


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    cache_dir = tempfile.mkdtemp(prefix="lm_files_reference.")
    try:
        folder = os.path.dirname(os.path.abspath(sys.argv[1]))
        result = {"read": [read(r, cache_dir, folder) for r in request.get("read", [])],
                  "split": [split(c, p) for c, p in request.get("split", [])]}
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
