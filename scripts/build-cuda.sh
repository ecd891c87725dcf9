#!/usr/bin/env bash
# Builds the trainer's CUDA path (clients/trainer/cuda/model.cu) into
# clients/trainer/cuda/build/libtrainer_cuda.a, which `go build -tags cuda`
# links, and writes clients/trainer/cuda/build/env.sh with the cgo settings
# to source before building with the tag. The CPU build needs none of this.
#
# Usage: scripts/build-cuda.sh            (CUDA_ARCH=sm_90 etc. to override the GPU target)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/clients/trainer/cuda
out=$src/build

# nvcc: $NVCC, else the installed toolkit, else NVIDIA's PyPI wheels, which
# scripts/setup.sh --cuda puts in .cache/cuda.
nvcc=${NVCC:-$(command -v nvcc || true)}
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [ -z "$nvcc" ]; then
  bash "$root/scripts/setup.sh" --cuda
  nvcc=$root/.cache/cuda/nvidia/cu13/bin/nvcc
fi
if [ ! -x "$nvcc" ]; then
  echo "build-cuda: nvcc not found at $nvcc (set NVCC, install the CUDA toolkit, or run scripts/setup.sh --cuda)" >&2
  exit 1
fi
cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")

# "native" compiles for the GPU in this machine (nvcc >= 11.6); without one
# (nvcc 13 then only warns and picks its default), Hopper.
arch=${CUDA_ARCH:-native}
if [ "$arch" = native ]; then
  if ! probe=$("$nvcc" -arch=native -x cu -E - 2>&1 </dev/null >/dev/null) || grep -qi "cannot find valid GPU" <<<"$probe"; then
    arch=sm_90
  fi
fi

mkdir -p "$out"
# --fmad=false: products and sums round like the CPU path (part of the numeric contract).
"$nvcc" -O3 --fmad=false -std=c++17 -arch="$arch" -Xcompiler -fPIC -lineinfo \
  -c "$src/model.cu" -o "$out/model.o"
rm -f "$out/libtrainer_cuda.a.tmp"
ar rcs "$out/libtrainer_cuda.a.tmp" "$out/model.o"
mv "$out/libtrainer_cuda.a.tmp" "$out/libtrainer_cuda.a"

# go's build cache does not see the library's content: key the cgo build on its hash.
hash=$(sha256sum "$out/libtrainer_cuda.a" | cut -c1-16)
libdirs=""
for d in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/targets/x86_64-linux/lib"; do
  [ -d "$d" ] && libdirs="$libdirs -L$d"
done
cat >"$out/env.sh" <<ENV
export CGO_LDFLAGS="${libdirs# }"
export CGO_CFLAGS="-O2 -DTR_CUDA_LIB_HASH=0x$hash"
ENV
echo "build-cuda: built $out/libtrainer_cuda.a for $arch with $("$nvcc" --version | tail -1)"
echo "build-cuda: now: source $out/env.sh && go test -tags cuda ./clients/trainer/"
