#!/usr/bin/env bash
# A model competition (SN9's mechanism, programs/competition) in one command:
# sets up what is missing, builds the client and the programs, starts a local
# validator (fresh temporary ledger), deploys the Competition program and the
# Authorizer, prepares a byte-level dataset of the State of the Union corpus,
# serves a checkpoint hub, creates a competition with a reward pool, starts
# two validators (each staking, evaluating every round and voting) and the
# explorer, and plays three miners: A trains a model from fresh weights and
# submits it; B submits A's very file under its own key (a copy); C starts
# from A's model, trains until it beats A by more than epsilon on its own
# pages, and submits. It prints the standings after each, checks the last
# round by rerunning it (`competition check`: both votes MATCH), and has
# the miners claim what they earned. Ctrl-C stops everything.
#
# Usage: scripts/competition-demo.sh
#
# Environment:
#   COMP_DIR=<temp dir>   where ledger, wallets, data, models and logs go (kept)
#   COMP_STEPS=60         training steps of each of a miner's sessions
#   RPC_PORT=8899         validator JSON-RPC port (PubSub: RPC_PORT + 1)
#   HUB_PORT=9100         checkpoint hub port
#   EXPLORER_PORT=9300    the explorer's port (0: no explorer)
#   SETUP=1               run scripts/setup.sh first (0 skips it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
me=competition-demo
source scripts/lib/demo.sh

rpc_port=${RPC_PORT:-8899}
hub_port=${HUB_PORT:-9100}
explorer_port=${EXPLORER_PORT:-9300}
steps=${COMP_STEPS:-60}
for p in "$rpc_port" "$hub_port"; do
  [[ "$p" =~ ^[0-9]+$ ]] && ((p > 0 && p < 65533)) || die "ports must be numbers below 65533, not $p"
done
[[ "$explorer_port" =~ ^[0-9]+$ ]] && ((explorer_port < 65536)) || die "EXPLORER_PORT must be a port number or 0, not $explorer_port"
[[ "$steps" =~ ^[0-9]+$ ]] && ((steps > 0)) || die "COMP_STEPS must be a positive number, not $steps"
dir=${COMP_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/psyche-competition.XXXXXX")}
mkdir -p "$dir"
id=demo
say "working in $dir"

demo_traps

if [ "${SETUP:-1}" != 0 ]; then
  say "setup (installs only what is missing)"
  bash scripts/setup.sh
fi
say "building the client and the programs"
mkdir -p bin
go build -o bin/psyche-client ./clients/cmd/psyche-client
bash scripts/build-programs.sh
pc=$root/bin/psyche-client
demo_localnet

wallet() { # name: a funded keypair file
  local w=$dir/$1.json
  "$pc" keygen -o "$w" >/dev/null
  "$pc" airdrop "${net[@]}" -w "$w" "${2:-10}" >/dev/null
  echo "$w"
}
authority=$(wallet authority 100)
say "deploying the programs"
"$pc" program deploy "${net[@]}" -w "$authority" psyche_competition psyche_authorizer >/dev/null

say "preparing the byte-level dataset (State of the Union addresses up to 2000, 64-token sequences)"
[ -d "$dir/data" ] || "$pc" data prepare --tokenizer byte --seq-len 64 --split train --out "$dir/data" >/dev/null
demo_background "$pc" hub serve --dir "$dir/hub" --listen "127.0.0.1:$hub_port" &>"$dir/hub.log"
repo=http://127.0.0.1:$hub_port/$id

mint=$("$pc" mint-create "${net[@]}" -w "$authority" | sed -n 's/^mint \([1-9A-HJ-NP-Za-km-z]*\) .*/\1/p')
[ -n "$mint" ] || die "mint-create printed no mint"
say "creating the competition \"$id\": gpt2 models of at most 1M parameters, a round every 50 slots (20 s) on 16 pages of 8 sequences, epsilon 1%, quorum 2, 1000 tokens a round"
"$pc" competition create "${net[@]}" -w "$authority" --id "$id" --data "$dir/data" --architecture gpt2 --max-params 1000000 \
  --sequences-per-page 8 --pages-per-round 16 --epsilon 0.01 --temperature 0.25 --round-slots 50 --quorum 2 \
  --mint "$mint" --reward-per-round 1000 --validator-stake 100 >"$dir/create.txt"
address=$(sed -n 's/^competition "[^"]*": \([1-9A-HJ-NP-Za-km-z]*\)$/\1/p' "$dir/create.txt" | head -n 1)
[ -n "$address" ] || { cat "$dir/create.txt" >&2; die "competition create printed no address"; }
"$pc" mint-to "${net[@]}" -w "$authority" --mint "$mint" --amount 1000000 --to "$address" >/dev/null

for v in validator1 validator2; do
  w=$(wallet "$v")
  "$pc" mint-to "${net[@]}" -w "$authority" --mint "$mint" --amount 100 --to "$("$pc" pubkey "$w")" >/dev/null
  demo_background "$pc" competition validate "${net[@]}" -w "$w" --id "$id" --join --threads 1 --model-dir "$dir/$v-models" &>"$dir/$v.log"
done
say "2 validators started (logs: $dir/validator{1,2}.log)"
if ((explorer_port > 0)); then
  demo_background "$pc" explorer "${net[@]}" --listen "127.0.0.1:$explorer_port" &>"$dir/explorer.log"
  say "explorer: http://127.0.0.1:$explorer_port/competitions/$id"
fi

standings() { "$pc" competition standings "${net[@]}" --id "$id"; }
# wait_final N: until a round over N eligible entries is final.
wait_final() {
  for ((i = 0; i < 600; i++)); do
    standings 2>/dev/null | head -n 1 | grep -Eq "round [0-9]+ final \($1 entries eligible" && return 0
    sleep 0.5
  done
  die "no final round over $1 entries within 5 minutes (validator logs: $dir/validator{1,2}.log)"
}

a=$(wallet minerA) b=$(wallet minerB) c=$(wallet minerC)
say "miner A trains a light GPT-2 from fresh weights for $steps steps and submits it"
"$pc" train "${net[@]}" -w "$a" --competition "$id" --model-config light --steps "$steps" --threads 1 \
  --checkpoint-dir "$dir/minerA" --hub-repo "$repo" &>"$dir/minerA.log" || { tail -n 20 "$dir/minerA.log" >&2; die "miner A failed"; }
wait_final 1
standings
model=$(ls -t "$dir"/minerA/model-*.safetensors | head -n 1)
say "miner B downloads A's model and submits the very file under its own key"
"$pc" competition submit "${net[@]}" -w "$b" --id "$id" --model "$model" --hub-repo "$repo" >"$dir/minerB.log"
wait_final 2
standings
say "  (B's copy has A's losses on every page, but A, older, wins every page by epsilon)"
say "miner C starts from A's model and trains until it beats it by more than epsilon ($steps steps a session)"
"$pc" train "${net[@]}" -w "$c" --competition "$id" --load-submission "$("$pc" pubkey "$a")" --steps "$steps" --sessions 3 --threads 1 \
  --checkpoint-dir "$dir/minerC" --hub-repo "$repo" &>"$dir/minerC.log" || { tail -n 20 "$dir/minerC.log" >&2; die "miner C failed"; }
grep -q "^revision: " "$dir/minerC.log" || say "miner C did not beat A by epsilon in 3 sessions (log: $dir/minerC.log)"
wait_final 3
"$pc" competition update "${net[@]}" -w "$authority" --id "$id" --pause >/dev/null
standings
say "rerunning the last final round (competition check)"
"$pc" competition check "${net[@]}" --id "$id" --model-dir "$dir/check-models" | grep -E "^(vote|digest|faulted)"
for m in A B C; do
  w=$dir/miner$m.json
  printf 'miner %s: ' "$m" >&2
  "$pc" competition claim "${net[@]}" -w "$w" --id "$id" 2>&1 | grep -m 1 -E '^claimed|error|nothing' >&2 || true
done
say "done in $(($(date +%s) - start)) s"
