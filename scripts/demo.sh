#!/usr/bin/env bash
# The whole system in one command: sets up what is missing, builds the client
# and the programs, starts a local validator (fresh temporary ledger), deploys
# the Coordinator and the Authorizer, prepares and serves a byte-level dataset
# of the State of the Union corpus, creates a permissionless run with the
# `light` config, starts 3 training clients, and follows them until the run
# is Finished: one line per step and client (loss, held-out loss, tokens/s,
# bytes sent per step), a digest comparison across clients, a summary, and a
# loss plot. Ctrl-C stops everything cleanly (the clients leave the run).
#
# Usage: scripts/demo.sh
#
# Environment:
#   DEMO_DIR=<temp dir>   where ledger, wallets, data, logs and the plot go (kept)
#   DEMO_CONFIG=light     the run config, config/<name>.toml: light (DeMo every
#                         step), llama-light (the same run on the Llama
#                         architecture) or sparseloco (the multi-step mode: 10
#                         inner steps per round, 2-bit top-k pseudo-gradients)
#   DEMO_OVERLAP=0        1: overlapped rounds (train round h+1 while round h's
#                         payloads are exchanged; applied one round late)
#   DEMO_STEPS=<n>        total_steps of the run (default: the config's)
#   RPC_PORT=8899         validator JSON-RPC port (PubSub: RPC_PORT + 1)
#   DATA_PORT=9000        data server port
#   METRICS_PORT=9101     first client's /status port (the others follow)
#   SETUP=1               run scripts/setup.sh first (0 skips it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
say() { printf 'demo: %s\n' "$*" >&2; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

rpc_port=${RPC_PORT:-8899}
data_port=${DATA_PORT:-9000}
metrics_port=${METRICS_PORT:-9101}
for p in "$rpc_port" "$data_port" "$metrics_port"; do
  [[ "$p" =~ ^[0-9]+$ ]] && ((p > 0 && p < 65533)) || die "ports must be numbers below 65533, not $p"
done
source_config=config/${DEMO_CONFIG:-light}.toml
[[ "${DEMO_CONFIG:-light}" =~ ^[a-z0-9_-]+$ && -f "$source_config" ]] ||
  die "DEMO_CONFIG=${DEMO_CONFIG:-} names no run config: use one of $(cd config && ls *.toml | sed 's/\.toml$//' | tr '\n' ' ')"
[[ "${DEMO_OVERLAP:-0}" =~ ^[01]$ ]] || die "DEMO_OVERLAP must be 0 or 1"
dir=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/psyche-demo.XXXXXX")}
mkdir -p "$dir"
rpc=http://127.0.0.1:$rpc_port
ws=ws://127.0.0.1:$((rpc_port + 1))
run_id=demo
say "working in $dir"

pids=()
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  # Clients first (SIGINT: they leave the run), then the data server, then the validator.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -INT "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
  say "stopped; logs in $dir (total $(($(date +%s) - start)) s)"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "${SETUP:-1}" != 0 ]; then
  say "setup (installs only what is missing)"
  bash scripts/setup.sh
fi
say "building the client, status-watch and the programs"
mkdir -p bin
go build -o bin/psyche-client ./clients/cmd/psyche-client
go build -o bin/status-watch ./clients/status/cmd/status-watch
bash scripts/build-programs.sh
pc=$root/bin/psyche-client
net=(--rpc "$rpc" --ws-rpc "$ws")

if "$pc" balance "${net[@]}" 11111111111111111111111111111111 &>/dev/null; then
  die "something already serves $rpc: stop it, or set RPC_PORT"
fi
say "starting the validator on $rpc (log: $dir/validator.log)"
# Own process group, so Ctrl-C reaches only this script; cleanup stops it.
set -m
bash scripts/localnet.sh --ledger "$dir/ledger" --reset --rpc-port "$rpc_port" --ws-port "$((rpc_port + 1))" &>"$dir/validator.log" &
pids+=($!)
set +m
for ((i = 0; ; i++)); do
  "$pc" balance "${net[@]}" 11111111111111111111111111111111 &>/dev/null && break
  kill -0 "${pids[0]}" 2>/dev/null || { tail -n 20 "$dir/validator.log" >&2; die "the validator exited"; }
  ((i < 240)) || die "the validator did not answer within 60 s"
  sleep 0.25
done

authority=$dir/authority.json
"$pc" keygen -o "$authority" >/dev/null
"$pc" airdrop "${net[@]}" -w "$authority" 100 >/dev/null
say "deploying the programs"
"$pc" program deploy "${net[@]}" -w "$authority" psyche_coordinator psyche_authorizer >/dev/null

say "preparing the byte-level dataset (train: addresses up to 2000, held out: later)"
for split in train validation; do
  [ -d "$dir/data/$split" ] || "$pc" data prepare --tokenizer byte --seq-len 128 --split "$split" --out "$dir/data/$split" >/dev/null
done
set -m
"$pc" data serve --dir "$dir/data/train" --port "$data_port" &>"$dir/data-server.log" &
pids+=($!)
set +m
root_hex=$(sed -n 's/.*"root": *"\([0-9a-f]\{64\}\)".*/\1/p' "$dir/data/train/manifest.json" | tail -n 1)
[ -n "$root_hex" ] || die "no root in $dir/data/train/manifest.json"

say "creating the run \"$run_id\" ($source_config, data at http://127.0.0.1:$data_port/)"
config=$dir/run.toml
sed -e "s|^location = .*|location = \"http://127.0.0.1:$data_port/\"\nroot = \"$root_hex\"|" "$source_config" >"$config"
if [ "${DEMO_OVERLAP:-0}" = 1 ]; then
  sed -i -e '/^overlap *=/d' -e 's/^\[config\]$/[config]\noverlap = true/' "$config"
fi
if [ -n "${DEMO_STEPS:-}" ]; then
  [[ "$DEMO_STEPS" =~ ^[0-9]+$ ]] || die "DEMO_STEPS must be a number"
  sed -i "s/^total_steps = .*/total_steps = $DEMO_STEPS/" "$config"
fi
admin=("${net[@]}" -w "$authority" --run-id "$run_id")
"$pc" create-run "${admin[@]}" --permissionless >/dev/null
"$pc" update-config "${admin[@]}" --config-path "$config" >/dev/null
"$pc" set-paused "${admin[@]}" --resume >/dev/null

urls=()
for i in 1 2 3; do
  w=$dir/client$i.json
  "$pc" keygen -o "$w" >/dev/null
  "$pc" airdrop "${net[@]}" -w "$w" 10 >/dev/null
  port=$((metrics_port + i - 1))
  set -m
  # Client 1 also scores each epoch's model on the built-in benchmark task
  # and publishes the scores on chain.
  bench=()
  [ "$i" = 1 ] && bench=(--eval-tasks builtin:sotu --eval-limit 100)
  "$pc" train "${net[@]}" -w "$w" --run-id "$run_id" --logs json --metrics-local-port "$port" --linger-secs 15 \
    --eval-data "$dir/data/validation" --eval-every 10 --threads 1 "${bench[@]}" \
    --p2p-rendezvous-dir "$dir/p2p" --bind-p2p-interface 127.0.0.1 &>"$dir/client$i.log" &
  pids+=($!)
  set +m
  urls+=("client$i=http://127.0.0.1:$port")
done
say "3 clients started (logs: $dir/client{1,2,3}.log); following them"

bin/status-watch -plot "$dir/loss.png" -timeout 60m "${urls[@]}"
say "run finished in $(($(date +%s) - start)) s from the start of this script; loss plot: $dir/loss.png"
