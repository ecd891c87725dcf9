#!/usr/bin/env bash
# Builds every program crate in programs/ (crates with [package.metadata.sbpf])
# into programs/target/deploy/<name>.so, test programs into
# programs/target/test-deploy/. Arguments go to the builder, e.g. -p psyche-coordinator -v.
# See programs/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p bin
go build -o bin/build-programs ./programs/toolchain/cmd/build-programs
exec bin/build-programs -workspace programs "$@"
