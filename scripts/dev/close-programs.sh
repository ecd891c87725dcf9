#!/usr/bin/env bash
# Closes this checkout's programs (ids from programs/keys/) and every loader
# buffer of the wallet on devnet, returning their lamports to the wallet, as
# `just dev close-dev-programs` does. psyche-client lists what it would close
# and asks y/N first.
#
# Environment (besides DRY_RUN, PSYCHE_CLIENT and WALLET_FILE, see common.sh):
#   DEVNET_RPC=https://api.devnet.solana.com   the cluster's JSON-RPC
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$root" # psyche-client finds the program keypairs from here

if (($#)); then
  sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
devnet_urls
((dry_run)) && say "dry run: printing the commands, running none"
((dry_run)) || [ -f "$wallet" ] || die "no wallet at $wallet: set WALLET_FILE to the keypair that deployed the programs"
build_client
pc dev close-programs --rpc "$rpc" --ws-rpc "$ws" -w "$wallet"
