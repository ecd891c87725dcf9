#!/usr/bin/env bash
# The trainer against PyTorch on this machine's CPU, side by side in one run
# (machines differ, so only the ratios carry over): sgemm GFLOP/s at the small
# config's shapes, and training tokens/s for light and small (fp32, AdamW,
# same model, batch and threads). A benchmark, not a test: CI never runs it.
# PyTorch comes from PyPI into .cache/bench-torch (about 5 GB, once).
# Usage: scripts/bench-vs-pytorch.sh [threads] [steps]   (default 2 threads, 5 steps)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
threads=${1:-2}
steps=${2:-5}

venv=$root/.cache/bench-torch
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "bench-vs-pytorch: installing PyTorch into $venv (about 5 GB, once)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch numpy
fi
py=("$venv/bin/python" scripts/torch/gpt.py)
bench=$(mktemp -d)
trap 'rm -rf "$bench"' EXIT
go build -o "$bench/trainer-bench" ./clients/trainer/cmd/trainer-bench

echo "=== GEMM at small's shapes, $threads threads: ours (every ISA level, same bits) and PyTorch's sgemm"
"$bench/trainer-bench" -configs "" -gemm-threads "$threads" | tee "$bench/gemm.txt"
for s in "2048 1536 384" "2048 384 1536" "1024 1024 1024"; do
  # shellcheck disable=SC2086
  "${py[@]}" gemm $s "$threads" | tee -a "$bench/gemm-torch.txt"
done

echo "=== training tokens/s, fp32 AdamW, B=8, $threads threads"
"$bench/trainer-bench" -gemm=false -configs light,small -steps "$steps" -threads "$threads" | grep adamw | tee "$bench/train.txt"
"${py[@]}" train light 256 4 128 4 128 8 "$steps" cpu "$threads" | tee "$bench/train-torch.txt"
"${py[@]}" train small 256 6 384 6 256 8 "$steps" cpu "$threads" | tee -a "$bench/train-torch.txt"

echo "=== ours / PyTorch"
for s in "2048 1536 384" "2048 384 1536" "1024 1024 1024"; do
  read -r m n k <<<"$s"
  theirs=$(grep "M=$m N=$n K=$k " "$bench/gemm-torch.txt" | grep -o '[0-9.]* GFLOP' | cut -d' ' -f1)
  grep "M=$m N=$n K=$k " "$bench/gemm.txt" | while read -r line; do
    ours=$(grep -o '[0-9.]* GFLOP' <<<"$line" | cut -d' ' -f1)
    isa=$(grep -o 'isa=[a-z0-9-]*' <<<"$line")
    printf 'gemm %sx%sx%s %-11s %6.2fx\n' "$m" "$n" "$k" "$isa" "$(echo "$ours / $theirs" | bc -l)"
  done
done
for cfg in light small; do
  ours=$(grep "train $cfg " "$bench/train.txt" | grep -o '[0-9]* tok/s' | cut -d' ' -f1)
  theirs=$(grep "train $cfg " "$bench/train-torch.txt" | grep -o '[0-9]* tok/s' | cut -d' ' -f1)
  printf 'train %-6s %6.2fx  (%s against %s tok/s)\n' "$cfg" "$(echo "$ours / $theirs" | bc -l)" "$ours" "$theirs"
done
