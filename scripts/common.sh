# Shared settings for the scripts: the pinned torch and tensorboard wheels, where their virtual
# environment lives, and how to configure and build the project. Sourced, not run.
TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
# TensorBoard's own reader (EventAccumulator) checks the event files of report_to tensorboard.
TENSORBOARD_VERSION="2.21.0"
# torchvision's FashionMNIST and transforms: the tutorial's PyTorch loop, which the speed checks
# and scripts/bench/cpu_vs_pytorch time ours against (the release paired with torch 2.11).
TORCHVISION_VERSION="0.26.0"
# What the Hugging Face checks compare with (tests/reference/scripts/hf_fixtures.py builds their fixtures).
TRANSFORMERS_VERSION="5.24.0"
TOKENIZERS_VERSION="0.23.3"
# Hugging Face datasets reads run_clm's data files in tests/reference/scripts/lm_files_reference.py.
DATASETS_VERSION="5.2.0"
# Transformers' Trainer needs accelerate (the reference runs of the fine-tuning checks).
ACCELERATE_VERSION="1.15.0"
# PEFT writes and reads the LoRA adapter folders the LoRA checks exchange with ours.
PEFT_VERSION="0.21.2"
# TRL's chat templates are the Jinja engine's reference data (tests/reference/scripts/chat_templates.py).
TRL_VERSION="1.16.0"
# Meta's Llama 3 BPE ranks ship in llama-models' wheel, downloaded without its dependencies (never
# installed): tests/reference/scripts/llama3_tokenizer.py makes Llama 3.1's tokenizer.json from it
# for the speed checks and benchmarks (scripts/bench/speed_check).
LLAMA_MODELS_VERSION="0.3.0"
# Mistral's SentencePiece models ship in mistral-common's wheel, downloaded the same way; and
# sentencepiece trains the Unigram model: tests/reference/scripts/sentencepiece_tokenizers.py.
# (Not named *_VERSION, which would re-key every reference: the one reference that reads them
# names both releases on its command line in tests/reference/references, and checks them.)
MISTRAL_COMMON_RELEASE="1.13.1"
SENTENCEPIECE_RELEASE="0.2.3"
# math-verify scores TRL's accuracy rewards: tests/reference/scripts/grpo_rewards_reference.py
# checks the release it runs (not *_VERSION either).
MATH_VERIFY_RELEASE="0.9.0"
TRAINER_CACHE="${TRAINER_CACHE:-$HOME/.cache/trainer}"
TORCH_VENV="${TORCH_VENV:-$TRAINER_CACHE/venv-torch-$TORCH_VERSION}"
LLAMA_MODELS_WHEEL="$TRAINER_CACHE/wheels/llama_models-$LLAMA_MODELS_VERSION-py3-none-any.whl"
MISTRAL_COMMON_WHEEL="$TRAINER_CACHE/wheels/mistral_common-$MISTRAL_COMMON_RELEASE-py3-none-any.whl"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$REPO_ROOT/build}"

torch_prefix() {
  "$TORCH_VENV/bin/python" -W ignore -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null
}

# Builds the targets named in a configured folder (all of them when none is): cmake_build DIR
# [TARGET...].
cmake_build() {
  local dir="$1"
  shift
  if [ "$#" -gt 0 ]; then
    cmake --build "$dir" --target "$@"
  else
    cmake --build "$dir"
  fi
}

# TRAINER_WERROR=ON in the environment (.ci/run sets it) makes every warning in our code an error
# in both builds (CMakeLists.txt's option of that name); a folder configured otherwise is
# configured again with it: werror_option gives the -D argument, werror_differs DIR whether DIR
# was configured with another value.
werror_option() { echo "-DTRAINER_WERROR=${TRAINER_WERROR:-OFF}"; }
werror_differs() {
  [ -n "${TRAINER_WERROR:-}" ] && [ -f "$1/CMakeCache.txt" ] &&
    ! grep -qx "TRAINER_WERROR:BOOL=$TRAINER_WERROR" "$1/CMakeCache.txt"
}

# Configures the build folder once, then builds the targets named (all of them when none is).
build_project() {
  if [ ! -f "$BUILD_DIR/build.ninja" ] || werror_differs "$BUILD_DIR"; then
    cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$(torch_prefix)" -DTRAINER_PYTHON="$TORCH_VENV/bin/python" \
      "$(werror_option)"
  fi
  cmake_build "$BUILD_DIR" "$@"
}

# The sanitizer build (build-asan/, or SANITIZE_BUILD_DIR): clang, AddressSanitizer and
# UndefinedBehaviorSanitizer on our code (LibTorch stays uninstrumented), the libFuzzer targets of
# fuzz/ beside the tests; -O1 as the sanitizers recommend (and quicker to compile), -g1 for
# file:line in reports. Configured once, then builds the targets named (all when none is).
SANITIZE_BUILD_DIR="${SANITIZE_BUILD_DIR:-$REPO_ROOT/build-asan}"
build_sanitized() {
  # A folder configured with GCC (as it was before the fuzz targets joined it) is made again.
  if [ -f "$SANITIZE_BUILD_DIR/CMakeCache.txt" ] &&
    ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang' "$SANITIZE_BUILD_DIR/CMakeCache.txt"; then
    rm -rf "$SANITIZE_BUILD_DIR"
  fi
  if [ ! -f "$SANITIZE_BUILD_DIR/build.ninja" ] || werror_differs "$SANITIZE_BUILD_DIR"; then
    cmake -S "$REPO_ROOT" -B "$SANITIZE_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_COMPILER=clang++ -DTRAINER_SANITIZE=ON \
      -DCMAKE_PREFIX_PATH="$(torch_prefix)" -DTRAINER_PYTHON="$TORCH_VENV/bin/python" \
      "$(werror_option)" >/dev/null
  fi
  cmake_build "$SANITIZE_BUILD_DIR" "$@"
}

# Runs a phase of a script and prints how long it took: phase NAME COMMAND [ARGS...].
phase() {
  local name="$1" start=$SECONDS status=0
  shift
  "$@" || status=$?
  local took=$((SECONDS - start))
  printf '%s: %s took %dm%02ds%s\n' "$(basename "$0")" "$name" $((took / 60)) $((took % 60)) \
    "$([ "$status" -eq 0 ] || echo " and failed (exit $status)")"
  return "$status"
}

# How many GoogleTest tests the build's CTest tests hold, by label (from the lists
# tests/discover_groups.cmake writes beside each test binary), only those labelled LABEL when
# one is named: test_counts [BUILD_DIR [LABEL]].
test_counts() {
  cat "${1:-$BUILD_DIR}"/tests/*_groups.cmake.counts 2>/dev/null | awk -v only="${2:-}" '
    only != "" && index("|" $2 "|", "|" only "|") == 0 { next }
    { tests += $3; ctests++; n = split($2, labels, "|"); for (i = 1; i <= n; i++) by[labels[i]] += $3 }
    END {
      line = sprintf("%d GoogleTest tests in %d CTest tests; by label:", tests, ctests)
      for (label in by) line = line sprintf(" %s %d", label, by[label])
      print line
    }'
}
