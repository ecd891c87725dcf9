#!/usr/bin/env bash
# Whole runs on a machine with an NVIDIA GPU (issue 35), in one go:
#   1. a DeMo run (config/tiny.toml) and a SparseLoCo run
#      (config/sparseloco.toml, 10 inner steps a round), each 16 steps over
#      2-3 epochs with second-scale timers, trained to Finished by several
#      real clients (clients/client's TestGPURun*, gpurun_test.go): each a
#      real engine and executor with a real trainer; two train on the GPU,
#      one on the CPU (Device cpu: trainer.SetGPU(false)), one spreads each
#      step over logical devices on GPU 0 (--data-parallelism 2; in the
#      DeMo run also --tensor-parallelism 2, four devices; the runs have
#      grad_shards = 2). The chain is the real Coordinator state
#      machine (coordsim: the program's Rust logic crate in a child process,
#      no validator, which this machine could not run); the clients talk
#      over real p2p nodes on loopback (libp2p, QUIC and TCP, found through
#      a rendezvous directory), each client's loop on its own goroutine, by
#      the wall clock. (GPU_RUN_NET=memory runs them on the simulations'
#      in-memory network and simulated clock instead.) Checked: the run
#      reaches Finished, every client applies every step with the same
#      payloads and the same replica digest as every other, the CPU's and
#      the multi-device client's included (the CPU = GPU bit contract in a
#      run), each trained on its own backend, and in the DeMo run, which
#      replays contributions to verify them, every verdict is MATCH, the
#      CPU client's replays of GPU steps and a GPU client's of CPU steps
#      among them;
#   2. a few training steps of the seed's 1.1B Llama (llama-1.1b, T=2048)
#      in mx8 at micro-batch 1 on the GPU (trainer-bench: tok/s, MFU,
#      memory, DeMo payload).
# Each part prints its output, then an ok or FAIL line with how long it
# took and the GPU's used memory (nvidia-smi) before, at its peak, and
# after; a summary repeats those lines with each run's steps, tok/s per
# client and digest comparison. Each part runs under `timeout`, the whole
# within GPU_RUN_BUDGET seconds (default 540). Estimated for an H100 (not
# yet run on a GPU): 20-30 s for each run (timers, not compute: the same
# runs of CPU clients took 18-29 s on 2 cores here), 40-90 s for the 1.1B
# steps (15-20 s of it the trainer's host initialisation): 2-3 minutes in
# all.
#
# Exit codes: 0 when every part passed; 1 when one failed or timed out; 2
# when there is no usable GPU here (nothing is run: the tests would only
# skip) or no binaries to run.
#
# The GPU machine needs no Go, Rust or Node: `scripts/gpu-run.sh --build`
# on any x86-64 machine with Go and cargo builds everything into
# .cache/gpu-run (the CUDA trainer, the cuda-tagged test binary of
# clients/client, trainer-bench, the Coordinator simulator, and the
# libgomp and libstdc++ they link, for a machine that lacks them); copy the
# repository with .cache/gpu-run there and run scripts/gpu-run.sh. The
# binaries are stripped and kept gzip-compressed (about 21 MB in all) and
# unpacked into a temporary directory at each run. Where Go is installed,
# the script builds first.
# Usage: scripts/gpu-run.sh [--build]
# Environment: GPU_RUN_BUDGET (seconds, 540), GPU_RUN_LOGS (a directory for
# each part's full log; default: a temporary one), GPU_RUN_NET (live or
# memory), GPU_RUN_BIG_STEPS (timed steps of the 1.1B model, 2),
# GPU_RUN_BIG_BATCH (its sequences per step, 4), GPU_RUN_BIG_CONFIG
# (llama-1.1b; another trainer config for a dry run, e.g. llama-12m),
# PEAK_TFLOPS (for MFU; default from the GPU's name: H100, H200 989).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$root/.cache/gpu-run
build_only=0
if [ "${1:-}" = --build ]; then build_only=1; shift; fi
if [ $# -gt 0 ]; then
  echo "usage: scripts/gpu-run.sh [--build]" >&2
  exit 2
fi

if command -v go >/dev/null; then
  scripts/build-cuda.sh
  # shellcheck disable=SC1091
  source clients/trainer/cuda/build/env.sh
  mkdir -p "$bin/lib"
  tmp=$(mktemp -d)
  go test -c -tags cuda -ldflags='-s -w' -o "$tmp/client.test" ./clients/client/
  go build -tags cuda -ldflags='-s -w' -o "$tmp/trainer-bench" ./clients/trainer/cmd/trainer-bench
  # The Coordinator simulator, as clients/coordinator/coordsim builds it.
  cargo build --release --quiet -p psyche-coordinator-sim --manifest-path programs/Cargo.toml --target-dir programs/target
  cp programs/target/release/psyche-coordinator-sim "$bin/"
  for f in client.test trainer-bench; do gzip -6 -c "$tmp/$f" >"$bin/$f.gz"; done
  # The libraries they need, for a GPU machine that lacks them.
  for lib in libgomp.so.1 libstdc++.so.6; do
    cp -L "$(ldd "$tmp/client.test" | awk -v l="$lib" '$1 == l {print $3}')" "$bin/lib/"
  done
  rm -rf "$tmp"
  built="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ', with local changes')"
  echo "$built" >"$bin/BUILT"
  echo "gpu-run: built $bin ($built; $(du -sh "$bin" | cut -f1))"
elif [ ! -f "$bin/client.test.gz" ]; then
  echo "gpu-run: no Go here and no prebuilt binaries in $bin: run scripts/gpu-run.sh --build on a machine with Go first" >&2
  exit 2
fi
[ "$build_only" = 1 ] && exit 0

start=$SECONDS
budget=${GPU_RUN_BUDGET:-540}
echo "gpu-run: binaries of $(cat "$bin/BUILT" 2>/dev/null || echo '(unknown commit)')"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-run: FAIL: no GPU here (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'finds no device' || echo 'is not installed')); nothing run"
  exit 2
fi
nvidia-smi -L
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)
peak=${PEAK_TFLOPS:-}
if [ -z "$peak" ]; then
  case "$gpu_name" in *H100* | *H200*) peak=989 ;; esac
fi

run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
for f in client.test trainer-bench; do
  gunzip -c "$bin/$f.gz" >"$run/$f"
  chmod +x "$run/$f"
done
if ldd "$run/client.test" | grep -q 'not found'; then export LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; fi
export PSYCHE_COORDSIM_BIN=$bin/psyche-coordinator-sim
logs=${GPU_RUN_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-run-logs.XXXXXX")}
mkdir -p "$logs"

gpu_mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1; }

# part NAME LIMIT DIR CMD...: runs CMD in DIR under timeout (LIMIT seconds,
# less what the budget has left), its output shown and kept in
# $logs/NAME.log, while the GPU's used memory is sampled; then one ok/FAIL
# line.
results=()
failed=0
part() {
  local name=$1 limit=$2 dir=$3
  shift 3
  local left=$((budget - (SECONDS - start)))
  if [ "$left" -lt 30 ]; then
    results+=("FAIL $name: skipped, the budget of ${budget} s is spent")
    echo "gpu-run: ${results[-1]}"
    failed=1
    return
  fi
  [ "$limit" -gt "$((left - 10))" ] && limit=$((left - 10))
  echo
  echo "=== $name (timeout ${limit} s)"
  local before t0 rc=0 sampler peak_mib
  before=$(gpu_mem)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 250 >"$logs/$name.mem" 2>/dev/null &
  sampler=$!
  t0=$SECONDS
  (cd "$dir" && exec timeout --kill-after=10 "$limit" "$@") 2>&1 | tee "$logs/$name.log" || rc=${PIPESTATUS[0]}
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  peak_mib=$(sort -n "$logs/$name.mem" 2>/dev/null | tail -1)
  local mem after
  after=$(gpu_mem)
  mem="GPU memory used ${before:-?} MiB before, peak ${peak_mib:-?}, after ${after:-?} MiB"
  if [ "$rc" = 0 ] && grep -q -- '--- SKIP' "$logs/$name.log"; then rc=skipped; fi
  if [ "$rc" = 0 ] && grep -q -E '^train .* on cpu$' "$logs/$name.log"; then rc=cpu; fi
  case $rc in
    0) results+=("ok   $name ($((SECONDS - t0)) s; $mem)") ;;
    124 | 137) results+=("FAIL $name: timed out after ${limit} s ($mem)") ;;
    skipped) results+=("FAIL $name: the test skipped ($(grep -m1 -B1 -- '--- SKIP' "$logs/$name.log" | head -1 | sed 's/^ *//'))") ;;
    cpu) results+=("FAIL $name: trained on the CPU, not the GPU") ;;
    *) results+=("FAIL $name: exit $rc after $((SECONDS - t0)) s ($mem)") ;;
  esac
  [ "${results[-1]:0:2}" = ok ] || failed=1
  echo "gpu-run: ${results[-1]}"
}

export PSYCHE_GPU_RUN_NET=${GPU_RUN_NET:-live}
tests=("$run/client.test" -test.count=1 -test.v -test.timeout 5m -test.run)
part demo-run 180 clients/client "${tests[@]}" 'TestGPURunDeMo$'
part sparseloco-run 180 clients/client "${tests[@]}" 'TestGPURunSparseLoCo$'

big=(-gemm=false -configs "${GPU_RUN_BIG_CONFIG:-llama-1.1b}" -arith mx8 -steps "${GPU_RUN_BIG_STEPS:-2}" -batch "${GPU_RUN_BIG_BATCH:-4}" -microbatch 1)
if [ -n "$peak" ] && "$run/trainer-bench" -h 2>&1 | grep -q -- -peak-tflops; then big+=(-peak-tflops "$peak"); fi
part big-mx8 240 . "$run/trainer-bench" "${big[@]}"

echo
echo "=== summary ($gpu_name; $((SECONDS - start)) s in all; logs in $logs)"
grep -h -E 'gpurun_test.go:[0-9]+: (.* tok/s|.*equal at)' "$logs"/demo-run.log "$logs"/sparseloco-run.log 2>/dev/null | sed 's/^ *gpurun_test.go:[0-9]*: /  /' || true
grep -h -E '^(train|mfu|memory) ' "$logs"/big-mx8.log 2>/dev/null | sed 's/^/  /' || true
printf '%s\n' "${results[@]}"
exit "$failed"
