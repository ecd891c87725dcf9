#!/usr/bin/env bash
# Sets up a test run, as the `just dev setup-solana-*` recipes do:
#   localnet: start a local validator, build and deploy the Coordinator and the
#             Authorizer, fund the wallet, create the run, apply its config,
#             resume it, then follow the programs' logs until Ctrl-C, which
#             stops the validator cleanly.
#   devnet:   the same against devnet with the wallet's own SOL, under program
#             ids of your own (fresh keypairs, synced into the sources).
#
# Usage: scripts/dev/setup-run.sh --cluster localnet|devnet --config NAME
#                                 [--permissioned] [--treasurer] [RUN_ID | run_id=RUN_ID]
#
# --config NAME applies config/NAME.toml: the recipes use llama-1.1b (the
# default runs) and llama-12m (the -light ones).
# --permissioned creates the run without the permissionless authorization and
# prints the command that authorizes a user.
# --treasurer also deploys the Treasurer, creates a test token (0 decimals,
# 1,000,000 minted to the wallet) and creates the run through the Treasurer,
# which then holds REWARDS_TOKENS of it as rewards and collateral and pays
# EARNING_RATE points (tokens) per epoch, slashing SLASHING_RATE per dropped
# client.
#
# Environment (besides DRY_RUN, PSYCHE_CLIENT and WALLET_FILE, see common.sh):
#   RPC_PORT=8899        localnet JSON-RPC port (PubSub: RPC_PORT + 1)
#   LEDGER=.localnet/dev-ledger   localnet state, reset on every setup
#   LOCALNET_IMPL        litesvm (ours, default) or solana-test-validator
#   AIRDROP_SOL=20       localnet airdrop to the wallet
#   BUILD_PROGRAMS=0     deploy the programs already in programs/target/deploy
#   DEVNET_RPC=https://api.devnet.solana.com   devnet JSON-RPC (PubSub: wss://)
#   REWARDS_TOKENS=1000 EARNING_RATE=10 SLASHING_RATE=10   with --treasurer
#   NEW_PROGRAM_IDS=auto devnet: 1 makes fresh program keypairs, 0 keeps the
#                        current ones, auto makes fresh ones only while
#                        programs/keys/ holds the committed (shared) ones
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$root" # psyche-client finds the programs and keys from here

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

cluster="" config="" permissioned=0 treasurer=0 run_arg=""
while (($#)); do
  case "$1" in
    --cluster) cluster=${2:-}; shift ;;
    --config) config=${2:-}; shift ;;
    --permissioned) permissioned=1 ;;
    --treasurer) treasurer=1 ;;
    -h | --help) usage ;;
    -*) say "unknown flag $1"; usage ;;
    *) [ -z "$run_arg" ] || { say "more than one run id given: $run_arg, $1"; usage; }; run_arg=$1 ;;
  esac
  shift
done
case "$cluster" in localnet | devnet) ;; *) say "--cluster must be localnet or devnet"; usage ;; esac
[[ "$config" =~ ^[a-z0-9._-]+$ && -f "$root/config/$config.toml" ]] ||
  { say "--config must name a run config in config/: $(cd "$root/config" && ls *.toml | sed 's/\.toml$//' | tr '\n' ' ')"; usage; }
run_id=$(parse_run_id "$run_arg")
config_path=$root/config/$config.toml

if [ "$cluster" = localnet ]; then
  rpc_port=${RPC_PORT:-8899}
  [[ "$rpc_port" =~ ^[0-9]+$ ]] && ((rpc_port > 0 && rpc_port < 65535)) || die "RPC_PORT must be a port number, not $rpc_port"
  rpc=http://127.0.0.1:$rpc_port
  ws=ws://127.0.0.1:$((rpc_port + 1))
else
  devnet_urls
fi
fresh=${NEW_PROGRAM_IDS:-auto}
case "$fresh" in auto | 1 | 0) ;; *) die "NEW_PROGRAM_IDS must be auto, 1 or 0, not $fresh" ;; esac
net=(--rpc "$rpc" --ws-rpc "$ws" -w "$wallet")
((dry_run)) && say "dry run: printing the commands, running none"
say "setting up run \"$run_id\" ($config config, $([ $permissioned = 1 ] && echo permissioned || echo permissionless)$([ $treasurer = 1 ] && echo ", Treasurer rewards")) on $cluster ($rpc)"

if [ ! -f "$wallet" ] && [ "$cluster" = devnet ]; then
  ((dry_run)) || die "no wallet at $wallet: create one (psyche-client keygen -o $wallet), fund it from the devnet faucet, or set WALLET_FILE"
  say "note: no wallet at $wallet; a real run stops here (create one with psyche-client keygen -o $wallet and fund it)"
fi

# Devnet: the ids in the repo belong to whoever deployed them first; deploy
# under fresh ones unless this checkout already has its own.
if [ "$cluster" = devnet ]; then
  if [ "$fresh" = auto ]; then
    fresh=0
    if ! git -C "$root" rev-parse --git-dir &>/dev/null; then
      say "not a git checkout: deploying under the ids in programs/keys/ (NEW_PROGRAM_IDS=1 makes fresh ones)"
    elif git -C "$root" diff --quiet HEAD -- programs/keys; then
      fresh=1
      say "programs/keys/ holds the committed program keypairs: making fresh ones for devnet"
    else
      say "programs/keys/ differs from the committed keypairs: deploying under those ids (NEW_PROGRAM_IDS=1 makes fresh ones)"
    fi
  fi
  case "$fresh" in
    1)
      if [ -n "${PSYCHE_CLIENT:-}" ] && ((!dry_run)); then
        die "PSYCHE_CLIENT has the old program ids built in; unset it so that bin/psyche-client is rebuilt with the new ones"
      fi
      build_client
      pc keys sync --new
      # The client embeds the IDLs, hence the ids: it is rebuilt below.
      ;;
    0) ;;
  esac
fi
build_client
build_programs

if [ ! -f "$wallet" ] && [ "$cluster" = localnet ]; then
  say "no wallet at $wallet: creating one"
  pc keygen -o "$wallet"
fi

validator_pid=""
stop_validator() {
  [ -n "$validator_pid" ] || return 0
  if kill -0 "$validator_pid" 2>/dev/null; then
    say "stopping the validator"
    kill -TERM "$validator_pid" 2>/dev/null || true
  fi
  wait "$validator_pid" 2>/dev/null || true
  validator_pid=""
}
trap stop_validator EXIT
trap on_interrupt INT
trap 'exit 143' TERM

if [ "$cluster" = localnet ]; then
  ledger=${LEDGER:-$root/.localnet/dev-ledger}
  validator_log=${ledger%/}.log
  if ((dry_run)); then
    printf '%s &>%q &\n' "$(show bash "$root/scripts/localnet.sh" --ledger "$ledger" --reset --rpc-port "$rpc_port")" "${validator_log/#"$root"\//}"
  else
    if "$psyche_client" balance --rpc "$rpc" --ws-rpc "$ws" 11111111111111111111111111111111 &>/dev/null; then
      die "something already serves $rpc: stop it, or set RPC_PORT to another port"
    fi
    mkdir -p "$(dirname "$ledger")"
    say "starting the validator (${LOCALNET_IMPL:-litesvm}), log in $validator_log"
    show bash "$root/scripts/localnet.sh" --ledger "$ledger" --reset --rpc-port "$rpc_port"
    # In a process group of its own (job control on), so that Ctrl-C reaches
    # only this script and the log follower: the validator then gets a single
    # SIGTERM from stop_validator and writes its final snapshot undisturbed.
    set -m
    bash "$root/scripts/localnet.sh" --ledger "$ledger" --reset --rpc-port "$rpc_port" &>"$validator_log" &
    validator_pid=$!
    set +m
    for ((i = 0; ; i++)); do
      "$psyche_client" balance --rpc "$rpc" --ws-rpc "$ws" 11111111111111111111111111111111 &>/dev/null && break
      if ! kill -0 "$validator_pid" 2>/dev/null; then
        tail -n 20 "$validator_log" >&2
        validator_pid=""
        die "the validator exited (log above, all of it in $validator_log)"
      fi
      ((i < 240)) || die "the validator did not answer on $rpc within 60 s (log: $validator_log)"
      sleep 0.25
    done
  fi
  pc airdrop "${net[@]}" "${AIRDROP_SOL:-20}"
else
  pc balance "${net[@]}"
fi

programs=(psyche_coordinator psyche_authorizer)
((treasurer)) && programs+=(psyche_treasurer)
pc program deploy "${net[@]}" "${programs[@]}"
if ((treasurer)); then
  # The mint's address is known once it exists: a dry run shows it as $MINT.
  mint='$MINT'
  show "$psyche_client" mint-create "${net[@]}" --decimals 0
  if ((dry_run)); then
    say "(\$MINT: the mint address that mint-create prints)"
  else
    created=$("$psyche_client" mint-create "${net[@]}" --decimals 0)
    printf '%s\n' "$created"
    mint=$(sed -n 's/^mint \([1-9A-HJ-NP-Za-km-z]\{32,44\}\) .*/\1/p' <<<"$created")
    [ -n "$mint" ] || die "mint-create printed no mint address"
  fi
  pc mint-to "${net[@]}" --mint "$mint" --amount 1000000
  create=(treasurer-create-run "${net[@]}" --run-id "$run_id" --mint "$mint")
  ((permissioned)) || create+=(--permissionless)
  pc "${create[@]}"
  pc treasurer-top-up-rewards "${net[@]}" --run-id "$run_id" --collateral-amount "${REWARDS_TOKENS:-1000}"
  pc treasurer-update-run "${net[@]}" --run-id "$run_id" --config-path "$config_path" \
    --earning-rate-total-shared "${EARNING_RATE:-10}" --slashing-rate-per-client "${SLASHING_RATE:-10}" --resume
else
  create=(create-run "${net[@]}" --run-id "$run_id")
  ((permissioned)) || create+=(--permissionless)
  pc "${create[@]}"
  pc update-config "${net[@]}" --run-id "$run_id" --config-path "$config_path"
  pc set-paused "${net[@]}" --run-id "$run_id" --resume
fi

if ((permissioned)); then
  say ""
  say "The run is permissioned: authorize each user (USER_PUBKEY: psyche-client pubkey THEIR_KEYPAIR) with"
  say "  $(show "$psyche_client" join-authorization-create "${net[@]}" --authorizer USER_PUBKEY | cut -c3-)"
fi

if [ "$cluster" = localnet ]; then
  ((dry_run)) || say "" "run \"$run_id\" is ready on $rpc; following the programs' logs, Ctrl-C stops them and the validator"
  clean_stop=1
  pc logs --rpc "$rpc" --ws-rpc "$ws" || say "the log stream ended"
elif ((!dry_run)); then
  say "" "run \"$run_id\" is ready on $rpc; follow its logs with: $(show "$psyche_client" logs --rpc "$rpc" --ws-rpc "$ws" | cut -c3-)"
fi
