#!/usr/bin/env bash
# Starts a training client in a run, as the `just dev start-training-*`
# recipes do: a wallet (WALLET_FILE, or a fresh keypair under
# ~/.config/solana/solana-keys/ that is removed on exit), SOL for it on
# localnet, the dataset the run's config trains on (prepared once under
# .localnet/data/), then `psyche-client train` until Ctrl-C, which leaves the
# run.
#
# The seed's two runs: the default recipes join a run of
# config/llama-1.1b.toml (GPT-2's tokenizer, 2048-token sequences) and train
# on the machine's GPU with the client's CUDA build; on a machine without a
# GPU they stop at once (exit 2) and point to the -light recipes, whose
# config/llama-12m.toml (bytes, 512-token sequences) trains on a CPU or a GPU.
#
# Usage: scripts/dev/train.sh --cluster localnet|devnet [--light] [--] [RUN_ID | run_id=RUN_ID] [TRAIN_FLAGS...]
#
# After the script's own flags (or --), the first argument is the run id
# unless it starts with "-"; every argument after it is passed on to
# `psyche-client train` (e.g. --metrics-local-port 9100).
#
# Environment (besides DRY_RUN, PSYCHE_CLIENT and WALLET_FILE, see common.sh):
#   AUTHORIZER=11111111111111111111111111111111   the grantee of the join
#                        authorization to use (your key in a permissioned run)
#   RPC_PORT=8899        localnet JSON-RPC port (PubSub: RPC_PORT + 1)
#   DEVNET_RPC=https://api.devnet.solana.com
#   DATA_DIR             the dataset to train from (default
#                        .localnet/data/gpt2-2048, with --light byte-512)
#   AIRDROP_SOL=10       localnet airdrop to the client's wallet
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$root"

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

cluster="" light=0 run_arg=""
while (($#)); do
  case "$1" in
    --cluster) cluster=${2:-}; shift ;;
    --light) light=1 ;;
    -h | --help) usage ;;
    --) shift; break ;;
    -*) say "unknown flag $1"; usage ;;
    *) break ;;
  esac
  shift
done
if (($#)) && [[ "$1" != -* ]]; then
  run_arg=$1
  shift
fi
train_args=("$@")
run_id=$(parse_run_id "$run_arg")
case "$cluster" in
  localnet)
    rpc_port=${RPC_PORT:-8899}
    [[ "$rpc_port" =~ ^[0-9]+$ ]] && ((rpc_port > 0 && rpc_port < 65535)) || die "RPC_PORT must be a port number, not $rpc_port"
    rpc=http://127.0.0.1:$rpc_port
    ws=ws://127.0.0.1:$((rpc_port + 1))
    ;;
  devnet) devnet_urls ;;
  *) say "--cluster must be localnet or devnet"; usage ;;
esac
authorizer=${AUTHORIZER:-11111111111111111111111111111111}
if ((light)); then
  tokenizer=byte seq_len=512
else
  tokenizer=gpt2 seq_len=2048
fi
data_dir=${DATA_DIR:-$root/.localnet/data/$tokenizer-$seq_len}
((dry_run)) && say "dry run: printing the commands, running none"

# Check the wallet before building or writing anything.
ephemeral=0
if [ -n "${WALLET_FILE:-}" ]; then
  client_wallet=$wallet
  ((dry_run)) || [ -f "$client_wallet" ] || die "no wallet at $client_wallet (WALLET_FILE)"
elif [ "$cluster" = devnet ]; then
  ((dry_run)) || die "set WALLET_FILE to a keypair that holds devnet SOL: a fresh key could not pay for joining"
  say "note: WALLET_FILE is not set; a real run stops here"
  client_wallet=$wallet
else
  ephemeral=1
  keys=$HOME/.config/solana/solana-keys
  client_wallet=$keys/keypair_$(date -u +%Y%m%dT%H%M%S)_$$.json
fi

# The 1.1B run needs a GPU: say so before building or writing anything.
gpus=$(gpu_count)
if ((!light && gpus == 0)); then
  light_recipes="just dev setup-solana-$cluster-light-test-run, then just dev start-training-$cluster-light-client"
  if ((dry_run)); then
    say "note: this machine has no GPU, which the 1.1B run needs; a real run stops here ($light_recipes)"
  else
    printf 'error: the 1.1B run (config/llama-1.1b.toml) trains on a GPU and this machine has none: on a CPU use the 12M run (%s)\n' "$light_recipes" >&2
    exit 2
  fi
fi
if ((light)); then build_client; else build_cuda_client; fi
if [ ! -f "$data_dir/manifest.json" ]; then
  say "preparing the dataset in $data_dir"
  # prepare moves the finished dataset into place in one rename; when a client
  # started at the same moment won that race, its dataset is the same one.
  if ! pc data prepare --tokenizer "$tokenizer" --seq-len "$seq_len" --out "$data_dir"; then
    [ -f "$data_dir/manifest.json" ] || die "could not prepare the dataset in $data_dir"
    say "another client prepared the dataset meanwhile; using it"
  fi
fi

key=""
remove_key() {
  [ -n "$key" ] || return 0
  rm -f "$key"
  say "removed the client's keypair $key"
}
trap remove_key EXIT
trap on_interrupt INT
trap 'exit 143' TERM
if ((ephemeral)); then
  ((dry_run)) || { mkdir -p "$keys"; key=$client_wallet; }
  pc keygen -o "$client_wallet"
fi
net=(--rpc "$rpc" --ws-rpc "$ws" -w "$client_wallet")
[ "$cluster" = localnet ] && pc airdrop "${net[@]}" "${AIRDROP_SOL:-10}"

args=(train "${net[@]}" --run-id "$run_id" --authorizer "$authorizer" --data-dir "$data_dir")
# One sequence per pass: the least memory (the 1.1B client, which also
# replays others' steps on a trainer of its own, then needs 72 GiB of GPU
# memory: run-config describe).
args+=(--micro-batch-size 1)
# The 1.1B client trains on every GPU here: data parallel over the most
# groups that divide both the GPUs and the run's 8 gradient shards (1, 2, 4
# or 8), tensor parallel over the GPUs of each group (at most 8).
if ((!light)); then
  n=$((gpus > 0 ? gpus : 1)) dp=1 # none: a dry run's one
  while ((n % (dp * 2) == 0 && dp * 2 <= 8)); do dp=$((dp * 2)); done
  tp=$((n / dp > 8 ? 8 : n / dp))
  args+=(--device cuda --data-parallelism "$dp" --tensor-parallelism "$tp")
fi
args+=("${train_args[@]}")
((dry_run)) || say "training in run \"$run_id\" on $rpc; Ctrl-C leaves the run"
clean_stop=1
pc "${args[@]}"
