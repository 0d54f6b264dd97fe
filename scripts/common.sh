# Shared settings for the scripts: the pinned torch and tensorboard wheels, where their virtual
# environment lives, and how to configure and build the project. Sourced, not run.
TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
# TensorBoard's own reader (EventAccumulator) checks the event files of report_to tensorboard.
TENSORBOARD_VERSION="2.21.0"
# What the Hugging Face checks compare with (scripts/reference/hf_fixtures.py builds their fixtures).
TRANSFORMERS_VERSION="5.24.0"
TOKENIZERS_VERSION="0.23.3"
# Hugging Face datasets reads run_clm's data files in scripts/reference/lm_files_reference.py.
DATASETS_VERSION="5.2.0"
# Transformers' Trainer needs accelerate (the reference runs of the fine-tuning checks).
ACCELERATE_VERSION="1.15.0"
# PEFT writes and reads the LoRA adapter folders the LoRA checks exchange with ours.
PEFT_VERSION="0.21.2"
# TRL's chat templates are the Jinja engine's reference data (scripts/reference/chat_templates.py).
TRL_VERSION="1.16.0"
TRAINER_CACHE="${TRAINER_CACHE:-$HOME/.cache/trainer}"
TORCH_VENV="${TORCH_VENV:-$TRAINER_CACHE/venv-torch-$TORCH_VERSION}"
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

# Configures the build folder once, then builds the targets named (all of them when none is).
build_project() {
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$(torch_prefix)" -DTRAINER_PYTHON="$TORCH_VENV/bin/python"
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
  if [ ! -f "$SANITIZE_BUILD_DIR/build.ninja" ]; then
    cmake -S "$REPO_ROOT" -B "$SANITIZE_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_COMPILER=clang++ -DTRAINER_SANITIZE=ON \
      -DCMAKE_PREFIX_PATH="$(torch_prefix)" -DTRAINER_PYTHON="$TORCH_VENV/bin/python" >/dev/null
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
