#!/usr/bin/env bash
# Runs a local Solana validator in the foreground: JSON-RPC on 127.0.0.1:8899,
# PubSub on 127.0.0.1:8900, state kept in .localnet/ledger unless --ledger says
# otherwise. Ctrl-C stops it cleanly (a final snapshot is written).
#
# Usage: scripts/localnet.sh [--ledger DIR] [--reset] [--rpc-port N] [--ws-port N]
#                            [--bpf-program ID PATH]... [--upgradeable-program ID PATH AUTHORITY]...
#                            [--solana-test-validator] [other server flags, see --help]
#
# By default this runs our server (localnet/, the Agave SVM from litesvm). With
# --solana-test-validator, or LOCALNET_IMPL=solana-test-validator, it runs a real
# solana-test-validator instead when one is on the PATH (its WS port is always
# the RPC port + 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
impl=${LOCALNET_IMPL:-litesvm}
args=()
have_ledger=0
while (($#)); do
  case "$1" in
    --solana-test-validator) impl=solana-test-validator ;;
    --ledger) have_ledger=1; args+=("$1") ;;
    *) args+=("$1") ;;
  esac
  shift
done
if ((!have_ledger)); then
  args=(--ledger "$root/.localnet/ledger" "${args[@]}")
fi

case "$impl" in
  solana-test-validator)
    if ! command -v solana-test-validator >/dev/null; then
      echo "localnet.sh: solana-test-validator is not on the PATH; run without --solana-test-validator to use ours" >&2
      exit 1
    fi
    for a in "${args[@]}"; do
      if [ "$a" = --ws-port ]; then
        echo "localnet.sh: solana-test-validator has no --ws-port (it serves PubSub on the RPC port + 1)" >&2
        exit 2
      fi
    done
    exec solana-test-validator "${args[@]}"
    ;;
  litesvm)
    if [ ! -d "$root/localnet/node_modules/litesvm" ]; then
      echo "localnet.sh: installing the server's npm packages" >&2
      # npm install, not npm ci: it installs the locked versions too, and the
      # registry here serves only this platform's native package, which the
      # lockfile therefore cannot list for other platforms (npm ci refuses that).
      (cd "$root/localnet" && npm install --no-audit --no-fund --loglevel=error)
    fi
    exec node "$root/localnet/src/server.js" "${args[@]}"
    ;;
  *)
    echo "localnet.sh: LOCALNET_IMPL must be litesvm or solana-test-validator, not $impl" >&2
    exit 2
    ;;
esac
