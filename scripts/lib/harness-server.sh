# Sourced by the kubectl scripts. `start_harness_server [ARGS...]` builds the
# xtask, starts the standalone harness API server (`xtask apiserver --tls`,
# plus ARGS) on a free loopback port (`port`), exports KUBECONFIG for it, sets `work`
# to a temporary directory removed at exit (the server is stopped then too, and
# before it every process the script added to `background_pids`; a `work` the
# caller made first is used), and waits until the server answers /readyz; it
# exits with the server's log if it never does.
#
# With STRATUS_CONTROL_PLANE=real the scripts run against the real control
# plane instead (`cargo xtask cluster up` first): KUBECONFIG is a copy of its
# administrator's kubeconfig, `real` is set, ARGS are ignored (it always runs
# RBAC over TLS) and nothing is stopped at exit.

start_harness_server() {
  if [ "${STRATUS_CONTROL_PLANE:-embedded}" = real ]; then
    use_real_control_plane
    return
  fi
  # A caller may make the directory first (to name files in it in ARGS).
  work=${work:-$(mktemp -d)}
  # `port` stays set: scripts check the address with it.
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export KUBECONFIG="$work/kubeconfig"
  cargo build --quiet -p xtask
  "${CARGO_TARGET_DIR:-target}/debug/xtask" apiserver --tls --addr "127.0.0.1:$port" \
    --kubeconfig "$KUBECONFIG" "$@" >"$work/server.log" 2>&1 &
  harness_server=$!
  trap stop_harness_server EXIT
  for _ in $(seq 1 100); do
    if [ -s "$KUBECONFIG" ] && kubectl get --raw /readyz >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  echo "the harness API server did not become ready:" >&2
  cat "$work/server.log" >&2
  exit 1
}

# Processes a script starts beside the server (`background_pids+=($!)`),
# stopped before it.
background_pids=()

stop_harness_server() {
  local pid
  for pid in "${background_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${background_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # On the real control plane there is no server of the script's to stop.
  if [ -n "${harness_server:-}" ]; then
    kill "$harness_server" 2>/dev/null || true
    wait "$harness_server" 2>/dev/null || true
  fi
  rm -rf "$work"
}

use_real_control_plane() {
  work=${work:-$(mktemp -d)}
  real=1
  export KUBECONFIG="$work/kubeconfig"
  cp "${CARGO_TARGET_DIR:-target}/kubernetes/cluster/admin.kubeconfig" "$KUBECONFIG" || {
    echo "no real control plane is up: run cargo xtask cluster up first" >&2
    exit 1
  }
  trap stop_harness_server EXIT
  kubectl get --raw /readyz >/dev/null || { echo "the real control plane is not ready" >&2; exit 1; }
}
