#!/usr/bin/env bash
# The whole system in one command: sets up what is missing, builds the client
# and the programs, starts a local validator (fresh temporary ledger), deploys
# the Coordinator and the Authorizer, prepares and serves a byte-level dataset
# of the State of the Union corpus, creates a permissionless run with the
# `tiny` config, starts 3 training clients (and with DEMO_CHEAT=1 a fourth
# that cheats) and the run explorer, and follows them until the run is
# Finished: one line per step and client (loss, held-out loss, tokens/s,
# bytes sent per step, and what verification made of the client's
# contribution), disputes and faults as they happen, a digest comparison
# across clients, a summary (with the run's verification: verdicts,
# disputes by outcome, faults, points burned), and a loss plot. Ctrl-C
# stops everything cleanly (the clients leave the run).
#
# Usage: scripts/demo.sh
#
# Environment:
#   DEMO_DIR=<temp dir>   where ledger, wallets, data, logs and the plot go (kept)
#   DEMO_CONFIG=tiny      the run config, config/<name>.toml: tiny (DeMo every
#                         step), llama-tiny (the same run on the Llama
#                         architecture), sparseloco (the multi-step mode: 10
#                         inner steps per round, 2-bit top-k pseudo-gradients)
#                         or finetune (a Llama fine-tuned on config/finetune's
#                         instruction set, the loss on the answers only)
#   DEMO_OVERLAP=0        1: overlapped rounds (train round h+1 while round h's
#                         payloads are exchanged; applied one round late);
#                         turns verification off, which overlap excludes
#                         (and the witness window to 1 s)
#   DEMO_CHEAT=0          1: a fourth client, "cheater", trains on sequences
#                         other than its assignment; verification catches it.
#                         It runs a second binary built with -tags
#                         verificationtest into DEMO_DIR (bin/psyche-client
#                         cannot cheat). Needs a config that verifies.
#   DEMO_STEPS=<n>        total_steps of the run (default: the config's)
#   RPC_PORT=8899         validator JSON-RPC port (PubSub: RPC_PORT + 1)
#   DATA_PORT=9000        data server port
#   METRICS_PORT=9101     first client's /status port (the others follow)
#   EXPLORER_PORT=9300    the run explorer's port (0: no explorer)
#   SETUP=1               run scripts/setup.sh first (0 skips it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
me=demo
source scripts/lib/demo.sh

rpc_port=${RPC_PORT:-8899}
data_port=${DATA_PORT:-9000}
metrics_port=${METRICS_PORT:-9101}
explorer_port=${EXPLORER_PORT:-9300}
for p in "$rpc_port" "$data_port" "$metrics_port"; do
  [[ "$p" =~ ^[0-9]+$ ]] && ((p > 0 && p < 65533)) || die "ports must be numbers below 65533, not $p"
done
[[ "$explorer_port" =~ ^[0-9]+$ ]] && ((explorer_port < 65536)) || die "EXPLORER_PORT must be a port number or 0, not $explorer_port"
source_config=config/${DEMO_CONFIG:-tiny}.toml
[[ "${DEMO_CONFIG:-tiny}" =~ ^[a-z0-9_-]+$ && -f "$source_config" ]] ||
  die "DEMO_CONFIG=${DEMO_CONFIG:-} names no run config: use one of $(cd config && ls *.toml | sed 's/\.toml$//' | tr '\n' ' ')"
[[ "${DEMO_OVERLAP:-0}" =~ ^[01]$ ]] || die "DEMO_OVERLAP must be 0 or 1"
cheat=${DEMO_CHEAT:-0}
[[ "$cheat" =~ ^[01]$ ]] || die "DEMO_CHEAT must be 0 or 1"
if [ "$cheat" = 1 ]; then
  [ "${DEMO_OVERLAP:-0}" = 0 ] || die "DEMO_CHEAT=1 needs verification, which DEMO_OVERLAP=1 turns off"
  grep -Eq '^verification_percent *= *[1-9]' "$source_config" ||
    die "DEMO_CHEAT=1 needs a config that verifies; $source_config has verification off"
fi
dir=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/psyche-demo.XXXXXX")}
mkdir -p "$dir"
run_id=demo
say "working in $dir"

demo_traps

if [ "${SETUP:-1}" != 0 ]; then
  say "setup (installs only what is missing)"
  bash scripts/setup.sh
fi
say "building the client, status-watch and the programs"
mkdir -p bin
go build -o bin/psyche-client ./clients/cmd/psyche-client
go build -o bin/status-watch ./clients/status/cmd/status-watch
if [ "$cheat" = 1 ]; then
  # The cheating client is its own build, kept out of bin/.
  go build -tags verificationtest -o "$dir/psyche-client-cheat" ./clients/cmd/psyche-client
fi
bash scripts/build-programs.sh
pc=$root/bin/psyche-client
demo_localnet

authority=$dir/authority.json
"$pc" keygen -o "$authority" >/dev/null
"$pc" airdrop "${net[@]}" -w "$authority" 100 >/dev/null
say "deploying the programs"
"$pc" program deploy "${net[@]}" -w "$authority" psyche_coordinator psyche_authorizer >/dev/null

if grep -q '^data_type = "finetuning"' "$source_config"; then
  finetune=1
  say "preparing the fine-tuning datasets (config/finetune: 600 conversations to train on, 64 held out; the loss on the answers)"
  for split in train validation; do
    examples=config/finetune/train.jsonl
    [ "$split" = validation ] && examples=config/finetune/heldout.jsonl
    [ -d "$dir/data/$split" ] || "$pc" data prepare --examples "$examples" --tokenizer config/finetune/tokenizer.json --seq-len 128 --out "$dir/data/$split" >/dev/null
  done
else
  finetune=0
  say "preparing the byte-level dataset (train: addresses up to 2000, held out: later)"
  for split in train validation; do
    [ -d "$dir/data/$split" ] || "$pc" data prepare --tokenizer byte --seq-len 128 --split "$split" --out "$dir/data/$split" >/dev/null
  done
fi
demo_background "$pc" data serve --dir "$dir/data/train" --port "$data_port" &>"$dir/data-server.log"
root_hex=$(sed -n 's/.*"root": *"\([0-9a-f]\{64\}\)".*/\1/p' "$dir/data/train/manifest.json" | tail -n 1)
[ -n "$root_hex" ] || die "no root in $dir/data/train/manifest.json"

say "creating the run \"$run_id\" ($source_config, data at http://127.0.0.1:$data_port/)"
config=$dir/run.toml
sed -e "s|^location = .*|location = \"http://127.0.0.1:$data_port/\"\nroot = \"$root_hex\"|" "$source_config" >"$config"
if [ "${DEMO_OVERLAP:-0}" = 1 ]; then
  sed -i -e '/^overlap *=/d' -e 's/^verification_percent *=.*/verification_percent = 0/' -e 's/^round_witness_time *=.*/round_witness_time = 1/' \
    -e 's/^\[config\]$/[config]\noverlap = true/' "$config"
fi
names=(client1 client2 client3)
[ "$cheat" = 1 ] && names+=(cheater)
# The epoch waits for every client, so none waits out an epoch to join.
sed -i "s/^init_min_clients = .*/init_min_clients = ${#names[@]}/" "$config"
if [ -n "${DEMO_STEPS:-}" ]; then
  [[ "$DEMO_STEPS" =~ ^[0-9]+$ ]] || die "DEMO_STEPS must be a number"
  sed -i "s/^total_steps = .*/total_steps = $DEMO_STEPS/" "$config"
fi
admin=("${net[@]}" -w "$authority" --run-id "$run_id")
"$pc" create-run "${admin[@]}" --permissionless >/dev/null
"$pc" update-config "${admin[@]}" --config-path "$config" >/dev/null
# Points, so that rewards and a fault's slash show (explorer, summary).
"$pc" set-future-epoch-rates "${admin[@]}" --earning-rate-total-shared 1000000 --slashing-rate-per-client 1000 >/dev/null
"$pc" set-paused "${admin[@]}" --resume >/dev/null

explorer_url= explorer_pid=
if ((explorer_port > 0)); then
  demo_background "$pc" explorer "${net[@]}" --listen "127.0.0.1:$explorer_port" &>"$dir/explorer.log"
  explorer_pid=${pids[-1]}
  explorer_url=http://127.0.0.1:$explorer_port/runs/$run_id
  say "run explorer: $explorer_url (log: $dir/explorer.log)"
fi

watch=(-plot "$dir/loss.png" -timeout 60m -rpc "$rpc" -run-id "$run_id")
urls=()
for i in "${!names[@]}"; do
  name=${names[$i]}
  w=$dir/$name.json
  "$pc" keygen -o "$w" >/dev/null
  "$pc" airdrop "${net[@]}" -w "$w" 10 >/dev/null
  port=$((metrics_port + i))
  # Client 1 also scores each epoch's model on the built-in benchmark task
  # and publishes the scores on chain; the cheater trains on other sequences.
  bin=$pc extra=()
  [ "$name" = client1 ] && [ "$finetune" = 0 ] && extra=(--eval-tasks builtin:sotu --eval-task-max-docs 100)
  [ "$name" = cheater ] && bin=$dir/psyche-client-cheat extra=(--cheat other-data)
  demo_background "$bin" train "${net[@]}" -w "$w" --run-id "$run_id" --logs json --metrics-local-port "$port" --linger-secs 15 \
    --eval-data "$dir/data/validation" --eval-every 10 --threads 1 "${extra[@]}" \
    --p2p-rendezvous-dir "$dir/p2p" --bind-p2p-interface 127.0.0.1 &>"$dir/$name.log"
  watch+=(-signer "$name=$("$pc" pubkey "$w")")
  urls+=("$name=http://127.0.0.1:$port")
done
say "${#names[@]} clients started (logs: $dir/{$(IFS=,; echo "${names[*]}")}.log); following them"
if [ -n "$explorer_pid" ] && ! kill -0 "$explorer_pid" 2>/dev/null; then
  say "the explorer exited ($(tail -n 1 "$dir/explorer.log")); going on without it"
  explorer_url=
fi

bin/status-watch "${watch[@]}" "${urls[@]}"
say "run finished in $(($(date +%s) - start)) s from the start of this script; loss plot: $dir/loss.png"
if [ -n "$explorer_url" ]; then
  say "the explorer stops with the demo; to browse the run again: bash scripts/localnet.sh --ledger $dir/ledger --rpc-port $rpc_port --ws-port $((rpc_port + 1)) &"
  say "  then: bin/psyche-client explorer --rpc $rpc --ws-rpc $ws --listen 127.0.0.1:$explorer_port, and open $explorer_url"
fi
