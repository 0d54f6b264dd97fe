"""The speed checks .ci/run makes (scripts/bench/speed_check runs this in the reference environment):
each a ratio against the reference library measured in the same run, side by side, one thread,
with a wide margin, so that a regression like a quadratic tokenizer load fails CI:

  tokenizer   trainer tokenize of 1 MB of text with Llama 3.1's tokenizer.json (128,256 ids):
              the whole process (start, load, encode, print the ids) against the `tokenizers`
              library's Tokenizer.from_file + encode_batch_fast of the same lines (in a warm
              Python process, imports done): ours at least 1.5x faster
  model       a Llama folder of that vocabulary (2 layers, width 64) ready to train: from the
              start of `trainer train --model_name_or_path DIR --train_file ...` to its
              "***** Running training *****" banner, under 2 s
  basicnet    BasicNet's training step at batch 64 on Fashion-MNIST, `trainer train` against the
              tutorial's PyTorch loop (tests/reference/scripts/cpu_reference.py loop), steady
              state: ours at least 1.3x the loop's samples/s

Each side runs ROUNDS times, alternating, and the best run counts (the least disturbed). Prints a
table with the CPU; exits 1 when a check fails.

usage: speed_check.py --trainer BIN --wheel LLAMA_MODELS_WHEEL --work DIR [--rounds R (3)]
                      [--only tokenizer,model,basicnet]
"""
import argparse
import gzip
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "tests", "reference", "scripts")
FORTUNES = "/usr/share/games/fortunes"
FASHION = "/usr/share/datasets/fashion-mnist"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1",
              "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_OFFLINE": "1"}
STEPS, SKIP = 60, 10  # BasicNet: steps timed after the first SKIP


def environment():
    env = dict(os.environ)
    env.update(ONE_THREAD)
    return env


def run(argv, **kwargs):
    result = subprocess.run(argv, env=environment(), capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"speed_check: {' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return result


def corpus(work, size):
    """The first `size` bytes (whole lines) of the fortunes' text files, in path order."""
    path = os.path.join(work, f"fortunes-{size}.txt")
    if not os.path.exists(path):
        text = b""
        for f in sorted(glob.glob(os.path.join(FORTUNES, "*"))):
            if os.path.isfile(f) and not f.endswith((".dat", ".u8")):
                with open(f, "rb") as src:
                    text += src.read()
            if len(text) >= size:
                break
        text = text[:size]
        text = text[:text.rfind(b"\n") + 1]
        with open(path, "wb") as out:
            out.write(text)
    return path


def llama3_tokenizer(work, wheel):
    folder = os.path.join(work, "llama3-tokenizer")
    if not os.path.exists(os.path.join(folder, "tokenizer.json")):
        run([sys.executable, os.path.join(SCRIPTS, "llama3_tokenizer.py"), wheel, folder])
    return folder


THEIRS_TOKENIZER = """
import sys, time
from tokenizers import Tokenizer
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
start = time.perf_counter()
tok = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
ids = tok.encode_batch_fast(lines)
print(time.perf_counter() - start, sum(len(e.ids) for e in ids))
"""


def timed(argv):
    start = time.perf_counter()
    run(argv)
    return time.perf_counter() - start


def check_tokenizer(args, work):
    folder, text = llama3_tokenizer(work, args.wheel), corpus(work, 1 << 20)
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(timed([args.trainer, "tokenize", "--tokenizer_name", folder, text]))
        out = run([sys.executable, "-c", THEIRS_TOKENIZER, folder, text]).stdout.split()
        theirs.append(float(out[0]))
    best_ours, best_theirs = min(ours), min(theirs)
    return ("tokenizer: Llama 3.1's (128,256 ids) load + 1 MB encode, s", best_ours, best_theirs,
            best_theirs / best_ours, ">= 1.5x", best_theirs / best_ours >= 1.5)


def until_banner(argv):
    """Seconds from the start of argv to its "***** Running training *****" line; it is then
    stopped."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    seen, lines = None, []
    for line in process.stdout:
        lines.append(line)
        if "***** Running training *****" in line:
            seen = time.perf_counter() - start
            process.kill()
            break
    process.wait()
    if seen is None:
        sys.exit("speed_check: no training banner from " + " ".join(argv) + ":\n" + "".join(lines[-20:]))
    return seen


def check_model(args, work):
    tokenizer, text = llama3_tokenizer(work, args.wheel), corpus(work, 100_000)
    folder = os.path.join(work, "llama3-tiny")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        config = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2,
                  "max_position_embeddings": 256}
        shutil.rmtree(folder, ignore_errors=True)
        run([args.trainer, "train", "--model_type", "llama", "--model_config", json.dumps(config),
             "--tokenizer_name", tokenizer, "--train_file", text, "--block_size", "64",
             "--max_steps", "1", "--save_strategy", "no", "--disable_tqdm", "true",
             "--output_dir", folder])
    times = []
    for r in range(args.rounds):
        out = os.path.join(work, f"model-run-{r}")
        shutil.rmtree(out, ignore_errors=True)
        times.append(until_banner([args.trainer, "train", "--model_name_or_path", folder,
                                   "--train_file", text, "--block_size", "64", "--max_steps", "1",
                                   "--save_strategy", "no", "--disable_tqdm", "true",
                                   "--output_dir", out]))
    best = min(times)
    return ("model: a 128,256-id Llama folder ready to train, s", best, None, None, "< 2 s",
            best < 2.0)


def check_basicnet(args, work):
    root = os.path.join(work, "tv")
    raw = os.path.join(root, "FashionMNIST", "raw")
    if not os.path.isdir(raw):
        os.makedirs(raw)
        for name in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                     "t10k-labels-idx1-ubyte"]:
            with gzip.open(os.path.join(FASHION, name + ".gz")) as src, \
                    open(os.path.join(raw, name), "wb") as dst:
                shutil.copyfileobj(src, dst)
    env = environment()
    env["PYTHONPATH"] = SCRIPTS
    ours, theirs = [], []
    for r in range(args.rounds):
        out = os.path.join(work, f"basicnet-{r}")
        shutil.rmtree(out, ignore_errors=True)
        result = subprocess.run([sys.executable, "-W", "ignore",
                                 os.path.join(SCRIPTS, "cpu_reference.py"), "loop", str(STEPS),
                                 str(SKIP), root, out], env=env, capture_output=True, text=True)
        steady = re.search(r"^STEADY ([0-9.]+)", result.stdout, re.M)
        if result.returncode != 0 or not steady:
            sys.exit("speed_check: the PyTorch loop failed:\n" + result.stderr[-2000:])
        theirs.append(float(steady.group(1)))
        # Our log lines at steps SKIP and STEPS, timed as they arrive (the trainer flushes each).
        start = time.perf_counter()
        process = subprocess.Popen(
            [args.trainer, "train", "--output_dir", out, "--overwrite_output_dir", "true",
             "--dataset_dir", FASHION, "--per_device_train_batch_size", "64", "--max_steps",
             str(STEPS), "--learning_rate", "1e-3", "--eval_strategy", "no", "--save_strategy",
             "no", "--logging_steps", str(SKIP), "--use_cpu", "true", "--disable_tqdm", "true"],
            env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        logged = [time.perf_counter() - start for line in process.stdout
                  if line.startswith("{'loss':")]
        if process.wait() != 0 or len(logged) < 2:
            sys.exit("speed_check: trainer train (BasicNet) failed")
        ours.append((STEPS - SKIP) * 64 / (logged[-1] - logged[0]))
    best_ours, best_theirs = max(ours), max(theirs)
    return ("basicnet: steady samples/s, trainer train / the tutorial's PyTorch loop", best_ours,
            best_theirs, best_ours / best_theirs, ">= 1.3x", best_ours / best_theirs >= 1.3)


def cpu():
    with open("/proc/cpuinfo") as f:
        name = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
    flags = open("/proc/cpuinfo").read()
    extras = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if re.search(rf"\b{f}\b", flags)]
    return f"{name.group(1) if name else 'unknown'} ({', '.join(extras) or 'no AVX-512'}), {os.cpu_count()} cores"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trainer", required=True)
    parser.add_argument("--wheel", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="tokenizer,model,basicnet")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    checks = {"tokenizer": check_tokenizer, "model": check_model, "basicnet": check_basicnet}
    chosen = args.only.split(",")
    for name in chosen:
        if name not in checks:
            sys.exit(f"speed_check: --only {name}: not a check ({', '.join(checks)})")
    print(f"speed_check: {cpu()}, one thread, best of {args.rounds}")
    failed = 0
    for name in chosen:
        what, ours, theirs, ratio, needed, ok = checks[name](args, args.work)
        theirs_text = f"{theirs:.3f}" if theirs is not None else "-"
        ratio_text = f"{ratio:.2f}x" if ratio is not None else "-"
        print(f"  {what}: ours {ours:.3f}, theirs {theirs_text}, ratio {ratio_text} "
              f"(needs {needed}): {'ok' if ok else 'FAILED'}", flush=True)
        failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
