#!/usr/bin/env bash
# Regenerates the Go bindings clients/bindings/<program>/ from idl/psyche_<program>.json
# with anchor-go v1.0.0 (pinned in tools/anchor-go).
# Usage: scripts/gen-bindings.sh [OUT_ROOT]    (default: clients/bindings)
#
# anchor-go runs `go mod tidy` and `go build` where it writes, so it writes into
# a scratch module that copies our go.mod's requirements; only the .go files are
# copied back, and our own go.mod is never touched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out_root=$(realpath -m "${1:-$root/clients/bindings}")
gen="$root/bin/anchor-go"
if [ ! -x "$gen" ]; then
  echo "gen-bindings: building anchor-go (once)" >&2
  (cd "$root/tools/anchor-go" && go build -o "$gen" github.com/gagliardetto/anchor-go)
fi
module=$(sed -n 's/^module //p' "$root/go.mod")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for idl in "$root"/idl/psyche_*.json; do
  name=$(basename "$idl" .json)
  name=${name#psyche_}
  dir="$scratch/$name"
  mkdir -p "$dir"
  sed "s|^module .*|module $module/clients/bindings/$name|" "$root/go.mod" >"$dir/go.mod"
  cp "$root/go.sum" "$dir/go.sum"
  if ! (cd "$dir" && GOFLAGS=-mod=mod "$gen" --idl "$idl" --output . --mod-path "$module/clients/bindings/$name" --name "$name" --no-go-mod) >"$scratch/$name.log" 2>&1; then
    cat "$scratch/$name.log" >&2
    echo "gen-bindings: anchor-go failed on $idl" >&2
    exit 1
  fi
  rm -rf "${out_root:?}/$name"
  mkdir -p "$out_root/$name"
  for f in "$dir"/*.go; do
    # anchor-go's tests_test.go is an empty placeholder.
    [ "$(basename "$f")" = tests_test.go ] && continue
    cp "$f" "$out_root/$name/"
  done
done
