#!/usr/bin/env bash
# The trainer's check for a machine with an NVIDIA GPU, in one go:
#   1. builds the CUDA path (scripts/build-cuda.sh),
#   2. runs the GPU tests: the GPU gives the CPU's bits (numeric contract v2):
#      every gradient entry of a step, and the state digests over four
#      training steps (DeMo, then AdamW),
#   3. prints training tokens/s for the small and gpt2-124m configs, next to
#      PyTorch training the same model on the same GPU when PyTorch is installed.
# Usage: scripts/gpu-check.sh [steps]     (default 3 timed steps per config)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
steps=${1:-3}

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: nvidia-smi not found"
scripts/build-cuda.sh
# shellcheck disable=SC1091
source clients/trainer/cuda/build/env.sh

echo "=== GPU tests"
go test -tags cuda -count=1 -timeout 20m -run 'GPU' -v ./clients/trainer/

echo "=== trainer tokens/s (GPU forward/backward, host optimizers)"
go run -tags cuda ./clients/trainer/cmd/trainer-bench -gemm=false -configs small -steps "$steps" -batch 16 -microbatch 16
go run -tags cuda ./clients/trainer/cmd/trainer-bench -gemm=false -configs gpt2-124m -steps "$steps" -batch 8 -microbatch 8

echo "=== PyTorch on the same GPU (fp32, AdamW)"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu-check: PyTorch with CUDA not available, skipping the comparison"
  exit 0
fi
python3 scripts/torch/gpt.py train small 256 6 384 6 256 16 "$steps" cuda 1
python3 scripts/torch/gpt.py train gpt2-124m 50304 12 768 12 1024 8 "$steps" cuda 1
