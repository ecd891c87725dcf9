#!/usr/bin/env bash
# The WAN simulation harness (clients/cmd/wan-harness/README.md): builds
# psyche-client and wan-harness, then runs `wan-harness "$@"`. Every client
# runs in its own network namespace behind an access link with its own
# bandwidth (tc tbf), RTT and loss (a userspace pump between TUN devices:
# this kernel has no netem). Needs root (namespaces, TUN, tc), iproute2, and
# nftables or iptables for the NAT scenario (installed here when missing).
#
# Usage: scripts/wan.sh COMMAND [flags]     e.g.
#   scripts/wan.sh selftest      the shaper's RTT, loss, rate and TCP goodput
#   scripts/wan.sh rounds        scenario 1 (8 clients, tiny and small)
#   scripts/wan.sh latejoin      scenario 2 (a 475 MiB model from 4 peers)
#   scripts/wan.sh churn         scenario 3
#   scripts/wan.sh nat           scenario 4
#   scripts/wan.sh modes         scenario 5 (DeMo vs SparseLoCo at 10 Mbit/s)
#   scripts/wan.sh scale         runs of 8, 16, 32, 64 clients (-dummy: no model compute)
#   scripts/wan.sh ci            a 2-minute check (4 clients, 2 epochs, shaped)
#   scripts/wan.sh bench         all of the above but ci, one after another
#   scripts/wan.sh cleanup [-all]   remove what a killed harness left behind
#
# Environment:
#   WAN_BIN=.cache/wan-harness   where the binaries are built
#   WAN_DIR=$TMPDIR/wan-harness-runs   where runs keep ledgers, wallets, logs
#   WAN_CACHE=$TMPDIR/wan-harness-cache   prepared datasets, the model blob
#   WAN_TCP_CC=                  TCP congestion control in every namespace
#                                (default: the host's; the kernel allows only
#                                those in net.ipv4.tcp_allowed_congestion_control)
#   SETUP=1                      install what is missing first (0 skips it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { printf 'wan.sh: %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  say "the harness needs root (network namespaces, TUN devices, tc)"
  exit 2
fi
cmd=${1:-}
if [ "${SETUP:-1}" != 0 ] && [ "$cmd" != cleanup ] && [ -n "$cmd" ]; then
  for tool in ip tc; do
    command -v "$tool" >/dev/null || { say "installing iproute2"; apt-get install -y -qq iproute2 >/dev/null; }
  done
  if [[ "$cmd" == nat || "$cmd" == bench ]] && ! command -v nft >/dev/null && ! command -v iptables >/dev/null; then
    say "installing nftables (the NAT scenario's MASQUERADE)"
    apt-get install -y -qq nftables >/dev/null || { apt-get update -qq && apt-get install -y -qq nftables >/dev/null; }
  fi
  if [ ! -f programs/target/deploy/psyche_coordinator.so ] || [ ! -f programs/target/deploy/psyche_authorizer.so ]; then
    say "building the programs"
    bash scripts/build-programs.sh
  fi
fi
bin=${WAN_BIN:-$root/.cache/wan-harness}
mkdir -p "$bin"
say "building psyche-client and wan-harness into $bin"
go build -o "$bin/psyche-client" ./clients/cmd/psyche-client
go build -o "$bin/wan-harness" ./clients/cmd/wan-harness
export PSYCHE_CLIENT="$bin/psyche-client" PSYCHE_ROOT="$root"
exec "$bin/wan-harness" "$@"
