# Helpers shared by the `just dev` scripts; source it, don't run it.
#
# Environment read here:
#   DRY_RUN=1        print every command (shell-quoted, ready to paste) and run none
#   PSYCHE_CLIENT    a psyche-client binary to use instead of building bin/psyche-client
#   WALLET_FILE      the wallet keypair (default ~/.config/solana/id.json)
#   INVOCATION_DIR   what a relative WALLET_FILE is relative to (default: .)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dry_run=0
case "${DRY_RUN:-0}" in
  1 | true | yes) dry_run=1 ;;
  0 | false | no | "") ;;
  *) echo "DRY_RUN must be 1 or 0, not ${DRY_RUN}" >&2; exit 2 ;;
esac
psyche_client=${PSYCHE_CLIENT:-$root/bin/psyche-client}
wallet=${WALLET_FILE:-$HOME/.config/solana/id.json}
# A relative WALLET_FILE means relative to where the user typed the command
# (just runs recipes elsewhere and passes INVOCATION_DIR).
case "$wallet" in /*) ;; *) wallet=${INVOCATION_DIR:-$PWD}/$wallet ;; esac

say() { printf '%s\n' "$@" >&2; }

# on_interrupt is the scripts' INT trap. A Ctrl-C that ends what a script
# runs until Ctrl-C (it sets clean_stop=1 first: the log follower, the
# training client), when that exits 0, is the clean way to stop: exit 0, and
# just reports nothing (dev.just). Any other Ctrl-C cuts a step short: 130.
# $? is the interrupted command's status: the trap runs once it has exited.
clean_stop=0
on_interrupt() {
  local rc=$?
  if ((clean_stop && rc == 0)); then exit 0; fi
  exit 130
}
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# show prints a command as it would be typed, paths under the repo relative to it.
show() {
  local out="" a
  for a in "$@"; do
    a=${a/#"$root"\//}
    if [ "$a" = '$MINT' ]; then
      out+='"$MINT" ' # a placeholder of dry runs, shown ready to paste after MINT=...
    else
      out+="$(printf '%q' "$a") "
    fi
  done
  printf '+ %s\n' "${out% }"
}

# run prints a command, then runs it unless this is a dry run.
run() {
  show "$@"
  ((dry_run)) || "$@"
}

# pc runs psyche-client (through run).
pc() { run "$psyche_client" "$@"; }

# parse_run_id turns the recipe's argument into a run id: just hands a
# `run_id=NAME` given after the recipe name over literally, so both that and a
# bare NAME are accepted. Ids over 32 bytes are cut at a character boundary.
parse_run_id() {
  local id=${1:-}
  id=${id#run_id=}
  [ -n "$id" ] || id=test
  local max=32
  if [ "$(LC_ALL=C; printf '%s' "${#id}")" -gt "$max" ]; then
    local cut
    cut=$(LC_ALL=C; printf '%s' "${id:0:$max}")
    # Drop the bytes of a character split by the cut.
    while ! printf '%s' "$cut" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1; do
      cut=$(LC_ALL=C; printf '%s' "${cut:0:${#cut}-1}")
    done
    say "warning: run id \"$id\" is longer than $max bytes; using \"$cut\""
    id=$cut
  fi
  printf '%s' "$id"
}

# build_client builds bin/psyche-client, unless PSYCHE_CLIENT names one.
build_client() {
  [ -n "${PSYCHE_CLIENT:-}" ] && return 0
  (cd "$root" && run go build -o bin/psyche-client ./clients/cmd/psyche-client)
}

# build_cuda_client builds bin/psyche-client-cuda, the client with the
# trainer's CUDA path (nvcc from PyPI when none is installed), and makes it
# the psyche-client the script runs, unless PSYCHE_CLIENT names one.
build_cuda_client() {
  [ -n "${PSYCHE_CLIENT:-}" ] && return 0
  run bash "$root/scripts/build-cuda.sh"
  show source clients/trainer/cuda/build/env.sh
  (cd "$root" && { ((dry_run)) || source clients/trainer/cuda/build/env.sh; } && run go build -tags cuda -o bin/psyche-client-cuda ./clients/cmd/psyche-client)
  psyche_client=$root/bin/psyche-client-cuda
}

# gpu_count prints how many NVIDIA GPUs the driver sees (0 without one).
gpu_count() {
  local n
  n=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  if ((n == 0)) && command -v nvidia-smi &>/dev/null; then
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  fi
  printf '%s' "$n"
}

# build_programs builds the on-chain programs unless BUILD_PROGRAMS=0.
build_programs() {
  [ "${BUILD_PROGRAMS:-1}" = 0 ] && return 0
  run bash "$root/scripts/build-programs.sh"
}

# devnet_urls sets rpc and ws from DEVNET_RPC (default: the public devnet). A
# plain http endpoint with a port (a local validator, in tests) serves PubSub
# on the next port.
devnet_urls() {
  rpc=${DEVNET_RPC:-https://api.devnet.solana.com}
  case "$rpc" in
    https://*) ws=wss://${rpc#https://} ;;
    http://*) ws=ws://${rpc#http://} ;;
    *) die "DEVNET_RPC must be an http(s) URL, not $rpc" ;;
  esac
  if [[ "$ws" =~ ^(ws://[^/]+):([0-9]+)/?$ ]]; then
    ws=${BASH_REMATCH[1]}:$((BASH_REMATCH[2] + 1))
  fi
}
