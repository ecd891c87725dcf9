# Sourced by scripts/demo.sh and scripts/competition-demo.sh: what both do
# around their own flow. The caller sets `me` (its name in messages), `start`
# (date +%s), and before demo_localnet `dir`, `pc` (the client), `rpc_port`.

say() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { printf '%s: error: %s\n' "$me" "$*" >&2; exit 1; }

# Background processes to stop at exit, newest first (SIGINT: clients leave
# their run), then the validator.
pids=()
demo_cleanup() {
  local code=$?
  trap - EXIT INT TERM
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -INT "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
  say "stopped; logs in $dir (total $(($(date +%s) - start)) s)"
  exit "$code"
}
# demo_traps: from here on, any exit stops what demo_background started.
demo_traps() {
  trap demo_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# demo_background CMD...: runs CMD in its own process group (so Ctrl-C
# reaches only the script; the cleanup stops it) and remembers it. Redirect
# its output at the call.
demo_background() {
  set -m
  "$@" &
  pids+=($!)
  set +m
}

# demo_localnet: starts a validator on a fresh ledger in $dir and waits
# until it answers; sets rpc, ws and net (the client's flags for it).
demo_localnet() {
  rpc=http://127.0.0.1:$rpc_port
  ws=ws://127.0.0.1:$((rpc_port + 1))
  net=(--rpc "$rpc" --ws-rpc "$ws")
  if "$pc" balance "${net[@]}" 11111111111111111111111111111111 &>/dev/null; then
    die "something already serves $rpc: stop it, or set RPC_PORT"
  fi
  say "starting the validator on $rpc (log: $dir/validator.log)"
  demo_background bash scripts/localnet.sh --ledger "$dir/ledger" --reset --rpc-port "$rpc_port" --ws-port "$((rpc_port + 1))" &>"$dir/validator.log"
  local validator=${pids[-1]}
  for ((i = 0; ; i++)); do
    "$pc" balance "${net[@]}" 11111111111111111111111111111111 &>/dev/null && break
    kill -0 "$validator" 2>/dev/null || { tail -n 20 "$dir/validator.log" >&2; die "the validator exited"; }
    ((i < 240)) || die "the validator did not answer within 60 s"
    sleep 0.25
  done
}
