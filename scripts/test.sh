#!/usr/bin/env bash
# Runs every test suite in the repo after installing what is missing.
# Usage: scripts/test.sh [go test flags...]   e.g. scripts/test.sh -run Localnet
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
export PATH="$root/bin:$PATH"

status=0
section() { printf '\n=== %s\n' "$*"; }

# On-chain programs: build every .so first, since Go tests deploy them.
if [ -x scripts/build-programs.sh ]; then
  section "build programs"
  scripts/build-programs.sh || status=1
fi

if [ -f programs/Cargo.toml ]; then
  section "cargo test (programs, host)"
  (cd programs && cargo test --quiet) || status=1
fi

# The programs' fuzzer, short pass (programs/README.md, "Fuzzing"): the
# committed corpus, then 20,000 random and mutated instructions per program
# against the .so files built above, invariants checked after each.
if [ -f programs/fuzz/Cargo.toml ]; then
  section "fuzz (programs, 20,000 instructions each)"
  (cd programs && cargo run --quiet --release -p psyche-fuzz -- --program all --iterations 20000 --no-save) || status=1
fi

for dir in localnet; do
  if [ -f "$dir/package.json" ] && grep -q '"test"' "$dir/package.json"; then
    section "npm test ($dir)"
    (cd "$dir" && npm test --silent) || status=1
  fi
done

section "go vet"
go vet ./... || status=1

# The trainer's CUDA path: nvcc (from PyPI when none is installed) builds
# the library, the client builds and vets with -tags cuda, and the trainer's
# tests run in that build: on a machine without a GPU they exercise its CPU
# fallback and the GPU kernels under the host emulator (cuda/emu), and the
# GPU tests say that no GPU is present; -tags cudaemu runs the trainer's
# device path on the emulator.
section "CUDA build (-tags cuda)"
(
  set -e
  scripts/build-cuda.sh
  # shellcheck disable=SC1091
  source clients/trainer/cuda/build/env.sh
  go vet -tags cuda ./clients/trainer/... ./clients/cmd/psyche-client/
  go build -tags cuda -o /dev/null ./clients/cmd/psyche-client
  go test -tags cuda -count=1 -short "$@" ./clients/trainer/ ./clients/trainer/cuda/emu/
  go test -tags cuda -count=1 -v -run GPU ./clients/trainer/ ./clients/cmd/psyche-client/ |
    grep -E '^(--- |ok|FAIL|panic)|no GPU|no CUDA'
  # The trainer with model.cu emulated as its GPU: weights and optimizer
  # state resident on the device, every entry point and the device's
  # DeMo and SparseLoCo against the CPU.
  go test -tags cudaemu -count=1 -run 'GPU(Residency|OptimizersMatchCPU|Parallel|Recompute)' ./clients/trainer/
  # Whole runs with clients on the emulated GPU, one on the CPU and one on
  # two logical devices (scripts/gpu-run.sh runs them on a real GPU).
  go test -tags cudaemu -count=1 -run GPURun ./clients/client/
) || status=1

# The packages with the client's concurrency (its loop, background fetches,
# the p2p node) run under the race detector; the rest as usual.
race=(./clients/client/ ./clients/p2p/ ./clients/chain/ ./clients/status/)
section "go test -race ${race[*]}"
go test -race -count=1 -timeout 25m "$@" "${race[@]}" || status=1

# The verification simulations are single-threaded (nothing for
# the race detector) and 10x slower under it, so it runs here without
# (in a full run: with flags given, the sections above already chose).
if [ $# -eq 0 ]; then
  section "go test -run TestSimVerification(CatchesCheater|SparseLoCo) ./clients/client/"
  go test -count=1 -timeout 10m -run "TestSimVerificationCatchesCheater|TestSimVerificationSparseLoCo|TestSimFalseNoDataCostsTheAccusers" ./clients/client/ || status=1
fi

section "go test (the rest)"
go test -count=1 -timeout 25m "$@" $(go list ./... | grep -v -x -E '.*/clients/(client|p2p|chain|status)') || status=1

# A short run over shaped links (clients/cmd/wan-harness: the shaper's RTT,
# loss and rate, then 4 clients for 2 epochs, each in its own network
# namespace): needs root, so a full run as another user skips it and says so.
if [ $# -eq 0 ]; then
  section "WAN harness (scripts/wan.sh ci)"
  if [ "$(id -u)" = 0 ]; then
    bash scripts/wan.sh ci || status=1
  else
    echo "skipped: network namespaces need root"
  fi
fi

exit $status
