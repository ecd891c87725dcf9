#!/usr/bin/env bash
# Installs whatever this repo needs and is missing: Debian packages, npm packages
# from committed lockfiles, Go modules, the `just` runner. Idempotent, and quick
# when nothing is missing (each step keys a stamp on the inputs it installed from).
#
# Usage: scripts/setup.sh [--cuda]
#   --cuda  also nvcc and the CUDA runtime for the trainer's CUDA build, from
#           PyPI into .cache/cuda when no nvcc is installed (about 350 MB;
#           scripts/test.sh and scripts/build-cuda.sh ask for it)
set -euo pipefail
cuda=0
for arg in "$@"; do
  case $arg in
    --cuda) cuda=1 ;;
    *) printf 'setup: unknown argument %q (usage: scripts/setup.sh [--cuda])\n' "$arg" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
stamps="$root/.cache/stamps"
mkdir -p "$stamps" "$root/bin"

log() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages. rustc-web/rust-web-src/llvm-22 build the on-chain programs
# (see programs/toolchain); clang-19 compiles the linker's C test objects;
# chromium runs the run explorer's page in the browser test (clients/explorer).
apt_packages=(
  ca-certificates git build-essential pkg-config
  rustc-web rust-web-src cargo-web llvm-22 clang-19
  nodejs npm chromium
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node and npm may come from outside Debian (as on these machines): keep those.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -ra missing <<<"${missing[*]:-}"
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages, at the versions of each committed lockfile; reinstalled only
# when it changes. Not `npm ci`: the registry here serves only the linux-x64
# builds of native packages, so no lockfile made here lists the other
# platforms' optional packages, and npm ci refuses such a lockfile.
# `npm install --no-save` installs the locked versions and writes nothing.
for lock in */package-lock.json; do
  [ -f "$lock" ] || continue
  dir=$(dirname "$lock")
  sum=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
  stamp="$stamps/npm-${dir//\//_}"
  if [ ! -d "$dir/node_modules" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
    log "installing npm packages in $dir/"
    (cd "$dir" && npm install --no-save --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$sum" >"$stamp"
  fi
done

# just: the npm package ships the native binary; expose it in bin/ and, when we
# may write there and no other just exists, on the PATH.
ln -sf "$root/tools/node_modules/rust-just-linux-x64/bin/just" "$root/bin/just"
if ! command -v just >/dev/null && [ -w /usr/local/bin ]; then
  ln -sf "$root/bin/just" /usr/local/bin/just
fi

# Go modules.
sum=$(cat go.mod go.sum | sha256sum | cut -c1-16)
if [ "$(cat "$stamps/go-mod" 2>/dev/null)" != "$sum" ]; then
  log "downloading Go modules"
  go mod download
  echo "$sum" >"$stamps/go-mod"
fi

# nvcc for the trainer's CUDA build (scripts/build-cuda.sh), at pinned versions
# of NVIDIA's PyPI wheels, unless an nvcc is installed already. CUDA 13; the
# static runtime (libcudart_static.a) is what `go build -tags cuda` links.
cuda_wheels=(nvidia-cuda-nvcc==13.5.37 nvidia-cuda-crt==13.5.37 nvidia-cuda-runtime==13.5.37
  nvidia-nvvm==13.5.37 nvidia-cuda-cccl==13.3.5.0.6)
if ((cuda)) && ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  sum=$(echo "${cuda_wheels[*]}" | sha256sum | cut -c1-16)
  if [ "$(cat "$stamps/cuda" 2>/dev/null)" != "$sum" ] || [ ! -x "$root/.cache/cuda/nvidia/cu13/bin/nvcc" ]; then
    python3 -m pip --version >/dev/null 2>&1 ||
      { echo "setup: --cuda needs python3 with pip (Debian: apt-get install python3-pip), or an installed nvcc" >&2; exit 1; }
    log "installing nvcc (CUDA 13) from PyPI into .cache/cuda: ${cuda_wheels[*]}"
    rm -rf "$root/.cache/cuda.tmp"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$root/.cache/cuda.tmp" "${cuda_wheels[@]}"
    rm -rf "$root/.cache/cuda"
    mv "$root/.cache/cuda.tmp" "$root/.cache/cuda"
    echo "$sum" >"$stamps/cuda"
  fi
fi

# Extra steps owned by other parts of the repo (e.g. the data corpus cache).
for step in scripts/setup.d/*.sh; do
  [ -f "$step" ] || continue
  bash "$step"
done
