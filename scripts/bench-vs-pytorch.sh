#!/usr/bin/env bash
# The trainer against PyTorch on this machine's CPU, side by side in one run
# (machines differ, so only the ratios carry over): GEMM GFLOP/s at the small
# config's shapes (ours in fp32 and mx8 at every ISA level, mx8 also with the
# input gradients' two slices as arith=mx8/A2; PyTorch fp32 and
# bf16), and training tokens/s for light and small (AdamW, same model, batch
# and threads: ours fp32 and mx8, PyTorch fp32 and bf16 autocast), the
# training figures interleaved over several rounds, best of each. A
# benchmark, not a test: CI never runs it.
# PyTorch comes from PyPI into .cache/bench-torch (about 5 GB, once).
# Usage: scripts/bench-vs-pytorch.sh [threads] [steps] [rounds]   (default 2 threads, 5 steps, 3 rounds)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
threads=${1:-2}
steps=${2:-5}
rounds=${3:-3}

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
echo "bench-vs-pytorch: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads"

echo "=== GEMM at small's shapes, $threads threads: ours (every ISA level, fp32 and mx8, same bits per contract) and PyTorch's"
"$bench/trainer-bench" -configs "" -gemm-threads "$threads" | tee "$bench/gemm.txt"
for s in "2048 1536 384" "2048 384 1536" "1024 1024 1024"; do
  for p in fp32 bf16; do
    # shellcheck disable=SC2086
    "${py[@]}" gemm $s "$threads" $p | tee -a "$bench/gemm-torch.txt"
  done
done

echo "=== training tokens/s, AdamW, B=8, $threads threads, $rounds interleaved rounds"
for r in $(seq "$rounds"); do
  echo "--- round $r"
  "$bench/trainer-bench" -gemm=false -configs light,small -steps "$steps" -threads "$threads" | grep adamw | tee -a "$bench/train.txt"
  for p in fp32 bf16; do
    "${py[@]}" train light 256 4 128 4 128 8 "$steps" cpu "$threads" $p | tee -a "$bench/train-torch.txt"
    "${py[@]}" train small 256 6 384 6 256 8 "$steps" cpu "$threads" $p | tee -a "$bench/train-torch.txt"
  done
done

# best LINES PATTERN...: the highest "<number> tok/s" or "<number> GFLOP/s"
# among the lines of file LINES that match every pattern.
best() {
  local f=$1
  shift
  local lines
  lines=$(cat "$f")
  for pat in "$@"; do lines=$(grep -- "$pat" <<<"$lines" || true); done
  grep -o '[0-9.]* \(tok/s\|GFLOP/s\)' <<<"$lines" | cut -d' ' -f1 | sort -g | tail -1
}
ratio() { echo "$1 / $2" | bc -l; }

echo "=== ours / PyTorch"
for s in "2048 1536 384" "2048 384 1536" "1024 1024 1024"; do
  read -r m n k <<<"$s"
  tf=$(best "$bench/gemm-torch.txt" "gemm fp32 M=$m N=$n K=$k ")
  tb=$(best "$bench/gemm-torch.txt" "gemm bf16 M=$m N=$n K=$k ")
  grep "M=$m N=$n K=$k " "$bench/gemm.txt" | while read -r line; do
    ours=$(grep -o '[0-9.]* GFLOP' <<<"$line" | cut -d' ' -f1)
    isa=$(grep -o 'isa=[a-z0-9-]*' <<<"$line")
    arith=$(grep -o 'arith=[a-zA-Z0-9/]*' <<<"$line")
    printf 'gemm %sx%sx%s %-10s %-16s %7.1f GFLOP/s  %5.2fx PyTorch fp32 (%s)  %5.2fx PyTorch bf16 (%s)\n' \
      "$m" "$n" "$k" "$arith" "$isa" "$ours" "$(ratio "$ours" "$tf")" "$tf" "$(ratio "$ours" "$tb")" "$tb"
  done
done
for cfg in light small; do
  tf=$(best "$bench/train-torch.txt" "train $cfg " " fp32 adamw")
  tb=$(best "$bench/train-torch.txt" "train $cfg " "bf16-autocast adamw")
  for arith in fp32 mx8; do
    ours=$(best "$bench/train.txt" "train $cfg " "arith=$arith ")
    printf 'train %-6s arith=%-4s %7.0f tok/s  %5.2fx PyTorch fp32 (%s)  %5.2fx PyTorch bf16 autocast (%s)\n' \
      "$cfg" "$arith" "$ours" "$(ratio "$ours" "$tf")" "$tf" "$(ratio "$ours" "$tb")" "$tb"
  done
done
