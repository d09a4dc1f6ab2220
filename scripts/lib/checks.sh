# Sourced by the kubectl node scripts. `checks_begin NAME` starts counting;
# `check WHAT WANT CMD...` runs CMD and wants WANT in its output;
# `eventually WHAT WANT CMD...` retries for 30 s; `fail WHAT OUTPUT` stops
# with "NAME: N passed, 1 failed"; `checks_end` prints "NAME: N passed, 0
# failed". `free_port` prints a free loopback port; `forward_get POD
# REMOTE_PORT` runs `k port-forward` to the pod and prints the first bytes
# its server answers to `GET /` (the caller defines `k`);
# `uninitialized_node NAME` registers a Node for a cloud controller manager to
# initialize.

checks_begin() {
  checks_name=$1
  passed=0
}

fail() {
  echo "FAIL: $1"
  echo "$2"
  echo "$checks_name: $passed passed, 1 failed"
  exit 1
}

check() { # check <description> <expected substring> <command...>
  local what=$1 want=$2
  shift 2
  local out
  out=$("$@" 2>&1) || fail "$what: command failed: $*" "$out"
  [[ "$out" == *"$want"* ]] || fail "$what: wanted '$want' in:" "$out"
  passed=$((passed + 1))
  echo "ok: $what"
}

eventually() { # eventually <description> <expected substring> <command...>
  local what=$1 want=$2
  shift 2
  local out=""
  for _ in $(seq 1 150); do
    out=$("$@" 2>&1) || true
    if [[ "$out" == *"$want"* ]]; then
      passed=$((passed + 1))
      echo "ok: $what"
      return 0
    fi
    sleep 0.2
  done
  fail "$what: wanted '$want' in:" "$out"
}

checks_end() {
  echo "$checks_name: $passed passed, 0 failed"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

forward_get() { # forward_get <pod> <remote port>
  local pod=$1 remote_port=$2 local_port log forwarder
  local_port=$(free_port)
  log=$(mktemp)
  k port-forward "pod/$pod" "$local_port:$remote_port" >"$log" 2>&1 &
  forwarder=$!
  for _ in $(seq 1 100); do grep -q Forwarding "$log" && break; sleep 0.1; done
  python3 - "$local_port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
print(s.recv(64).decode(errors="replace"))
PY
  local status=$?
  kill "$forwarder" 2>/dev/null || true
  wait "$forwarder" 2>/dev/null || true
  rm -f "$log"
  return $status
}

uninitialized_node() { # uninitialized_node NAME: a Node as a kubelet registers it with --cloud-provider=external, for a cloud controller manager to initialize
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: $1}
spec:
  taints: [{key: node.cloudprovider.kubernetes.io/uninitialized, value: "true", effect: NoSchedule}]
YAML
}
