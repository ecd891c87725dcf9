#!/usr/bin/env bash
# The trainer's check for a machine with an NVIDIA GPU, in one go:
#   1. builds the CUDA path and the cuda-tagged test and benchmark binaries
#      into .cache/gpu (scripts/build-cuda.sh, go test -c, go build),
#   2. runs the GPU tests: the GPU gives the CPU's bits (numeric contracts
#      v2, fp32, and v3, mx8): every gradient entry of a step, and the state
#      digests over four training steps (DeMo, then AdamW),
#   3. runs the host CPU's mx8 kernels: TestMXBitsAcrossISAs (every ISA
#      level the CPU has, bit for bit against the reference) and the mx8
#      GEMM lines of trainer-bench, which on a host with AMX-INT8 (Sapphire
#      Rapids or later) are the only check of the AMX kernel's real bits
#      and speed,
#   4. prints training tokens/s for the small and gpt2-124m configs in fp32
#      and mx8 with the time per kernel (TRG_PROFILE=1), next to PyTorch
#      training the same model on the same GPU in fp32 and bf16 autocast
#      when PyTorch is installed.
#
# A GPU machine without Go runs binaries built elsewhere: build them with
# `scripts/gpu-check.sh --build` on any x86-64 machine with Go, copy the
# repository with .cache/gpu to the GPU machine, and run the script there.
# Usage: scripts/gpu-check.sh [--build] [steps]   (default 3 timed steps per config)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$root/.cache/gpu
build_only=0
if [ "${1:-}" = --build ]; then build_only=1; shift; fi
steps=${1:-3}

if command -v go >/dev/null; then
  scripts/build-cuda.sh
  # shellcheck disable=SC1091
  source clients/trainer/cuda/build/env.sh
  mkdir -p "$bin"
  go test -c -tags cuda -o "$bin/trainer.test" ./clients/trainer/
  go build -tags cuda -o "$bin/trainer-bench" ./clients/trainer/cmd/trainer-bench
  # The libraries they need, for a GPU machine that lacks them.
  mkdir -p "$bin/lib"
  for lib in libgomp.so.1 libstdc++.so.6; do
    cp -L "$(ldd "$bin/trainer.test" | awk -v l="$lib" '$1 == l {print $3}')" "$bin/lib/"
  done
  echo "gpu-check: built $bin ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ', with local changes'))"
elif [ ! -x "$bin/trainer.test" ]; then
  echo "gpu-check: no Go here and no prebuilt binaries in $bin: run scripts/gpu-check.sh --build on a machine with Go first" >&2
  exit 1
fi
[ "$build_only" = 1 ] && exit 0
if ldd "$bin/trainer.test" | grep -q 'not found'; then export LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; fi

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: nvidia-smi not found"

echo "=== GPU tests"
(cd clients/trainer && PSYCHE_GPU_TEST_CONFIGS=light,small,gpt2-124m,light:mx8,gpt2-124m:mx8 "$bin/trainer.test" -test.count=1 -test.timeout 20m -test.run GPU -test.v)

echo "=== mx8 kernels of the host CPU ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
if grep -qw amx_int8 /proc/cpuinfo; then
  echo "gpu-check: the host CPU has AMX-INT8: the amx-int8 level runs with the real instructions"
else
  echo "gpu-check: the host CPU has no AMX-INT8: only its emulation runs"
fi
(cd clients/trainer && "$bin/trainer.test" -test.count=1 -test.timeout 10m -test.run 'TestMXBitsAcrossISAs' -test.v)
"$bin/trainer-bench" -configs '' -arith mx8 -gemm-threads "1,$(nproc)"

echo "=== trainer tokens/s (GPU forward/backward, host optimizers), time per kernel"
TRG_PROFILE=1 "$bin/trainer-bench" -gemm=false -configs small -steps 1 -batch 16 -microbatch 16
"$bin/trainer-bench" -gemm=false -configs small -steps "$steps" -batch 16 -microbatch 16
TRG_PROFILE=1 "$bin/trainer-bench" -gemm=false -configs gpt2-124m -steps 1 -batch 8 -microbatch 8
"$bin/trainer-bench" -gemm=false -configs gpt2-124m -steps "$steps" -batch 8 -microbatch 8

echo "=== PyTorch on the same GPU (AdamW; fp32, then bf16 autocast)"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu-check: PyTorch with CUDA not available, skipping the comparison"
  exit 0
fi
for p in fp32 bf16; do
  python3 scripts/torch/gpt.py train small 256 6 384 6 256 16 "$steps" cuda 1 $p
  python3 scripts/torch/gpt.py train gpt2-124m 50304 12 768 12 1024 8 "$steps" cuda 1 $p
done
