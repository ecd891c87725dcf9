#!/usr/bin/env bash
# The trainer's check for a machine with an NVIDIA GPU, in one go:
#   1. builds the CUDA path and the cuda-tagged test and benchmark binaries
#      into .cache/gpu (scripts/build-cuda.sh, go test -c, go build),
#   2. runs the GPU tests: the GPU gives the CPU's bits (numeric contracts
#      v2, fp32, and v3, mx8): every gradient entry of a step, and the state
#      digests over four training steps (DeMo, then AdamW),
#   3. prints training tokens/s, MFU and memory (trainer-bench) for the
#      seed's 1.1B Llama (llama-1.1b, T=2048) in fp32 and mx8 at micro-batch
#      1 and at the largest micro-batch whose trainer.Footprint fits the
#      GPU's memory (and New's host peak the host's), then PyTorch training the same model with the same
#      batch, micro-batch and sequence length on the same GPU in fp32 and
#      bf16 autocast (scripts/torch/llama.py), when PyTorch is installed,
#   4. the same for the small and gpt2-124m configs, ours with the time per
#      kernel (TRG_PROFILE=1) too, PyTorch's from scripts/torch/gpt.py,
#   5. runs the host CPU's mx8 kernels: TestMXBitsAcrossISAs (every ISA
#      level the CPU has, bit for bit against the reference) and the mx8
#      GEMM lines of trainer-bench, which on a host with AMX-INT8 (Sapphire
#      Rapids or later) are the only check of the AMX kernel's real bits
#      and speed,
#   6. times the 1.1B model's kernels for one mx8 step, if the budget allows,
#   7. prints a table of tok/s, MFU and ours / PyTorch bf16 autocast per
#      model and micro-batch, against the issue's targets for the 1.1B model
#      in mx8: MFU >= 40% and >= 1.0x PyTorch bf16 autocast.
#
# MFU = tok/s x (6N + 12 L C T) FLOP per token / the GPU's peak dense bf16
# tensor TFLOP/s (N the parameters that multiply activations; trainer-bench's
# FLOPsPerToken and gpt.py's flops_per_token say more), the peak taken from
# nvidia-smi's GPU name (H100 SXM, H200: 989; PEAK_TFLOPS=... overrides; an
# unknown GPU prints MFU as -).
#
# Each part runs under `timeout` and the whole check within GPU_CHECK_BUDGET
# seconds (default 560, so it fits a 10-minute session): what the budget no
# longer covers is skipped and said so, the parts least about the GPU coming
# last. Expected on an H100, from the earlier runs and the FLOPs at the
# kernels' rates: 1-2 minutes for the GPU tests, 1.5-2 for our 1.1B rows
# (each trainer's New spends 15-20 s initialising 1.07 B weights on one
# host thread, as 121 M took 2 s on a 2-core EPYC, then 2-3 s a step), 0.5 for PyTorch's, 1 for small and gpt2-124m,
# 2 for the host's mx8 kernels, 0.5 for the profiled step: 7-8 minutes. A
# failed or timed-out part makes the script exit 1 after the table.
#
# A GPU machine without Go runs binaries built elsewhere: build them with
# `scripts/gpu-check.sh --build` on any x86-64 machine with Go, copy the
# repository with .cache/gpu to the GPU machine, and run the script there.
# Usage: scripts/gpu-check.sh [--build] [steps]   (default 3 timed steps per config; 2 for llama-1.1b)
# Environment: GPU_CHECK_BUDGET (seconds, 560), GPU_CHECK_BIG_BATCH (llama-1.1b's
# sequences per step, 4), GPU_CHECK_BIG_STEPS (2), PEAK_TFLOPS, and
# GPU_CHECK_BIG_CONFIG (llama-1.1b; another Llama config of both
# trainer-bench and scripts/torch/llama.py, e.g. llama-light for a dry run),
# GPU_CHECK_PYTHON (python3) and GPU_CHECK_TORCH_DEVICE (cuda; cpu for a dry
# run of the PyTorch part without a GPU).
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
export PYTHONUNBUFFERED=1

budget=${GPU_CHECK_BUDGET:-560}
big_batch=${GPU_CHECK_BIG_BATCH:-4}
big_steps=${GPU_CHECK_BIG_STEPS:-2}
big=${GPU_CHECK_BIG_CONFIG:-llama-1.1b}
py=${GPU_CHECK_PYTHON:-python3}
tdev=${GPU_CHECK_TORCH_DEVICE:-cuda}
SECONDS=0
failed=()
skipped=()
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
figures=$work/figures # the mfu lines of the measured runs, for the table
: >"$figures"

# run_capped CAP WHAT LOG CMD...: runs CMD (output also appended to LOG)
# under timeout: CAP seconds, or what the budget has left less a reserve
# for the kill and the table; skipped when under 20 s are left. A failure
# or time-out is recorded and the script goes on.
run_capped() {
  local cap=$1 what=$2 log=$3
  shift 3
  local left=$((budget - SECONDS - 20))
  if [ "$left" -lt 20 ]; then
    echo "gpu-check: SKIPPED $what: the budget of $budget s is spent"
    skipped+=("$what")
    return 0
  fi
  [ "$cap" -gt "$left" ] && cap=$left
  local t0=$SECONDS rc
  set +e
  timeout -k 10 "$cap" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" = 0 ]; then
    echo "gpu-check: $what: $((SECONDS - t0)) s (limit $cap s)"
  else
    [ "$rc" = 124 ] && rc="124, timed out after $cap s"
    echo "gpu-check: $what: FAILED (exit $rc)"
    failed+=("$what (exit $rc)")
  fi
}

gpu_name='' gpu_mib=''
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L || true
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null || true)
  gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null || true)
else
  echo "gpu-check: nvidia-smi not found"
fi
# Dense bf16 tensor TFLOP/s (the vendor's datasheets, without sparsity).
peak=${PEAK_TFLOPS:-}
if [ -z "$peak" ]; then
  case "$gpu_name" in
    *H100*PCIe*) peak=756 ;;
    *H100*NVL*) peak=835 ;;
    *H100* | *H200* | *H800*) peak=989 ;;
    *A100*) peak=312 ;;
    *) peak=0 ;;
  esac
fi
echo "gpu-check: GPU ${gpu_name:-unknown}, ${gpu_mib:-?} MiB; MFU against $( [ "$peak" = 0 ] && echo 'no known peak (MFU -)' || echo "$peak TFLOP/s dense bf16")"

echo "=== GPU tests"
cd clients/trainer
run_capped 180 "GPU tests" /dev/null env PSYCHE_GPU_TEST_CONFIGS=light,small,gpt2-124m,light:mx8,gpt2-124m:mx8 \
  "$bin/trainer.test" -test.count=1 -test.timeout 5m -test.run GPU -test.v
cd "$root"

bench=("$bin/trainer-bench" -gemm=false -peak-tflops "$peak")
have_torch=0
if "$py" -c "import torch, sys; sys.exit(0 if '$tdev' == 'cpu' or torch.cuda.is_available() else 1)" 2>/dev/null; then
  have_torch=1
else
  echo "gpu-check: PyTorch ($py) with $tdev not available: no PyTorch figures"
fi

echo "=== $big (llama-1.1b: the seed's 1.1B Llama, T=2048), B=$big_batch, AdamW, no DeMo: ours"
# The largest micro-batch dividing B whose footprint (mx8's, the larger)
# fits the GPU less 3 GiB for the CUDA context and the allocator, and whose
# host peak fits MemTotal less 8 GiB: New makes the CPU path's buffers
# before the GPU attaches (and frees them then), about 87 GiB at micro-batch 4.
fit=''
if [ -n "$gpu_mib" ] && [ "$gpu_mib" -gt 8192 ] 2>/dev/null; then
  limit=$(awk -v m="$gpu_mib" 'BEGIN { printf "%.2f", m / 1024 - 3 }')
  host_limit=$(awk '$1 == "MemTotal:" { printf "%.2f", $2 / 1048576 - 8 }' /proc/meminfo)
  fitout=$(timeout 30 "${bench[@]}" -configs "$big" -arith mx8 -batch "$big_batch" -steps 0 -fit-gib "$limit" -fit-host-gib "${host_limit:-0}" 2>&1) || true
  echo "$fitout"
  fit=$(sed -n 's/^fit .* microbatch=\([0-9]*\) .*/\1/p' <<<"$fitout")
fi
if [ -z "$fit" ]; then
  fit=2
  echo "gpu-check: no fit from the GPU's memory; micro-batches 1 and $fit"
fi
mbs=1
[ "$fit" -gt 1 ] && mbs="1 $fit"
for arith in fp32 mx8; do
  for mb in $mbs; do
    run_capped 90 "$big $arith microbatch $mb" "$figures" "${bench[@]}" -configs "$big" -arith "$arith" \
      -steps "$big_steps" -batch "$big_batch" -microbatch "$mb" -demo=false
  done
done

echo "=== $big: PyTorch on the same GPU (AdamW, fused; fp32, then bf16 autocast)"
if [ "$have_torch" = 1 ]; then
  llama=("$py" scripts/torch/llama.py --config "$big" --batch "$big_batch" --steps "$big_steps" --device "$tdev" --threads 1 --peak-tflops "$peak")
  run_capped 80 "PyTorch $big fp32 microbatch $fit" "$figures" "${llama[@]}" --precision fp32 --microbatch "$fit"
  for mb in $mbs; do
    run_capped 60 "PyTorch $big bf16 microbatch $mb" "$figures" "${llama[@]}" --precision bf16 --microbatch "$mb"
  done
fi

echo "=== small and gpt2-124m: ours (GPU forward/backward and optimizers) with the time per kernel, then plain"
run_capped 45 "small, profiled" /dev/null env TRG_PROFILE=1 "${bench[@]}" -configs small -steps 1 -batch 16 -microbatch 16
run_capped 45 "small" "$figures" "${bench[@]}" -configs small -steps "$steps" -batch 16 -microbatch 16
run_capped 60 "gpt2-124m, profiled" /dev/null env TRG_PROFILE=1 "${bench[@]}" -configs gpt2-124m -steps 1 -batch 8 -microbatch 8
run_capped 60 "gpt2-124m" "$figures" "${bench[@]}" -configs gpt2-124m -steps "$steps" -batch 8 -microbatch 8

echo "=== small and gpt2-124m: PyTorch on the same GPU (AdamW, fused; fp32, then bf16 autocast)"
if [ "$have_torch" = 1 ]; then
  for p in fp32 bf16; do
    run_capped 45 "PyTorch small $p" "$figures" "$py" scripts/torch/gpt.py train small 256 6 384 6 256 16 "$steps" "$tdev" 1 "$p" 16 "$peak"
    run_capped 45 "PyTorch gpt2-124m $p" "$figures" "$py" scripts/torch/gpt.py train gpt2-124m 50304 12 768 12 1024 8 "$steps" "$tdev" 1 "$p" 8 "$peak"
  done
fi

echo "=== mx8 kernels of the host CPU ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
if grep -qw amx_int8 /proc/cpuinfo; then
  echo "gpu-check: the host CPU has AMX-INT8: the amx-int8 level runs with the real instructions"
else
  echo "gpu-check: the host CPU has no AMX-INT8: only its emulation runs"
fi
cd clients/trainer
run_capped 90 "TestMXBitsAcrossISAs" /dev/null "$bin/trainer.test" -test.count=1 -test.timeout 5m -test.run 'TestMXBitsAcrossISAs' -test.v
cd "$root"
run_capped 90 "mx8 GEMM bench (host)" /dev/null "$bin/trainer-bench" -configs '' -arith mx8 -gemm-threads "1,$(nproc)"

echo "=== $big mx8, time per kernel (one profiled step, if the budget allows)"
if [ $((budget - SECONDS)) -gt 100 ]; then
  run_capped 80 "$big mx8, profiled" /dev/null env TRG_PROFILE=1 "${bench[@]}" -configs "$big" -arith mx8 \
    -steps 1 -batch "$big_batch" -microbatch "$fit" -demo=false
else
  echo "gpu-check: skipped: under 100 s of the budget left"
fi

echo "=== ours against PyTorch ($gpu_name; AdamW; MFU: 6N + 12*L*C*T FLOP/token over $( [ "$peak" = 0 ] && echo 'an unknown peak' || echo "$peak TFLOP/s dense bf16"))"
echo "targets (issue 35): llama-1.1b in mx8 at >= 40% MFU and >= 1.0x PyTorch bf16 autocast tok/s"
# One row per mfu line: model, who, B, micro-batch, tok/s, MFU; the ratio is
# to PyTorch bf16 autocast with the same model, batch and micro-batch.
awk -v big="$big" '
  function field(re, s) { if (match(s, re)) return substr(s, RSTART, RLENGTH); return "" }
  /^mfu / { model = $2; who = "ours " substr($3, 7) }
  /^pytorch [^ ]+ mfu / { model = $4; who = "pytorch " $5 }
  /^mfu / || /^pytorch [^ ]+ mfu / {
    b = substr(field("B=[0-9]+", $0), 3); mb = substr(field("microbatch=[0-9]+", $0), 12)
    t = field("steps: [0-9]+ tok/s", $0); sub(/steps: /, "", t); sub(/ tok\/s/, "", t)
    m = field("MFU [0-9.e+-]+%", $0); sub(/MFU /, "", m); if (m == "") m = "-"
    n++; M[n] = model; W[n] = who; B[n] = b; MB[n] = mb; TOK[n] = t; MFU[n] = m
    if (who == "pytorch bf16-autocast") REF[model " " b " " mb] = t
  }
  END {
    if (n == 0) { print "(no figures)"; exit }
    printf "%-11s %-22s %3s %4s %10s %9s %13s  %s\n", "model", "run", "B", "mb", "tok/s", "MFU", "/PyTorch bf16", "target"
    for (i = 1; i <= n; i++) {
      r = REF[M[i] " " B[i] " " MB[i]]
      ratio = (r > 0 && W[i] !~ /^pytorch bf16/) ? sprintf("%.2fx", TOK[i] / r) : "-"
      tgt = ""
      if (M[i] == big && W[i] == "ours mx8") {
        mfu_s = MFU[i] == "-" ? "unknown" : (MFU[i] + 0 >= 40 ? "met" : "not met")
        ratio_s = r > 0 ? (TOK[i] / r >= 1.0 ? "met" : "not met") : "unknown"
        tgt = "MFU " mfu_s ", ratio " ratio_s
      }
      printf "%-11s %-22s %3s %4s %10s %9s %13s  %s\n", M[i], W[i], B[i], MB[i], TOK[i], MFU[i], ratio, tgt
    }
  }' "$figures"

echo "gpu-check: $SECONDS s of the $budget s budget"
if [ ${#skipped[@]} -gt 0 ]; then printf 'gpu-check: skipped: %s\n' "${skipped[@]}"; fi
if [ ${#failed[@]} -gt 0 ]; then
  printf 'gpu-check: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
