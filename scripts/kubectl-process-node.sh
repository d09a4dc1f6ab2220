#!/usr/bin/env bash
# Drives the newest kubectl (kubectl.1.33 beside the real path of `kubectl`)
# against a process node (`cargo xtask apiserver --process-node`): pods that
# are real processes on this machine. Checks Ready, logs, exec (stdin, a
# terminal), a ConfigMap volume, port-forward to a real HTTP server, a failed
# container's exit code, and deletion. Prints "kubectl-process-node: N
# passed, 0 failed"; exits non-zero on the first failed check.
set -euo pipefail
cd "$(dirname "$0")/.."

real=$(readlink -f "$(command -v kubectl)") || { echo "kubectl is not installed" >&2; exit 1; }
newest="$(dirname "$real")/kubectl.1.33"
[ -x "$newest" ] || { echo "kubectl.1.33 is missing beside $real" >&2; exit 1; }
k() { "$newest" "$@"; }

# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
start_harness_server --process-node vk-process

passed=0
fail() { echo "FAIL: $1"; echo "$2"; echo "kubectl-process-node: $passed passed, 1 failed"; exit 1; }
check() { # check <description> <expected substring> <command...>
  local what=$1 want=$2; shift 2
  local out
  out=$("$@" 2>&1) || fail "$what: command failed: $*" "$out"
  [[ "$out" == *"$want"* ]] || fail "$what: wanted '$want' in:" "$out"
  passed=$((passed + 1)); echo "ok: $what"
}

server_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
k create configmap greeting --from-literal=text=bonjour >/dev/null
cat >"$work/pods.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  nodeName: vk-process
  terminationGracePeriodSeconds: 2
  volumes: [{name: cfg, configMap: {name: greeting}}]
  containers:
  - name: app
    image: busybox
    args: ['echo "hello from \$HOSTNAME"; while true; do sleep 1; done']
    volumeMounts: [{name: cfg, mountPath: /etc/greeting}]
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: vk-process
  terminationGracePeriodSeconds: 2
  containers:
  - name: server
    image: python:3
    args: ["-u", "-m", "http.server", "$server_port", "--bind", "127.0.0.1"]
    readinessProbe: {tcpSocket: {port: $server_port}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: failing}
spec:
  nodeName: vk-process
  restartPolicy: Never
  containers: [{name: app, image: busybox, args: ["exit 3"]}]
YAML
check "create pods on the process node" 'pod/web created' k apply -f "$work/pods.yaml"
check "wait Ready (readiness probe on a real port)" "condition met" k wait --for=condition=Ready pod/hello pod/web --timeout=60s
check "logs" "hello from hello" k logs hello
check "exec in the container's directory" "/containers/app" k exec hello -- pwd
check "exec -i with stdin" "piped" bash -c "echo piped | '$newest' exec -i hello -- cat"
check "exec -it on a terminal" "/dev/pts/" script -qec "'$newest' exec -it hello -- tty" /dev/null
check "a ConfigMap volume as a file" "bonjour" k exec hello -- cat etc/greeting/text
check "a failed container's phase" "condition met" k wait --for=jsonpath='{.status.phase}'=Failed pod/failing --timeout=30s
check "its exit code" "3" k get pod failing -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}'

local_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
k port-forward pod/web "$local_port:$server_port" >"$work/forward.log" 2>&1 &
forwarder=$!
for _ in $(seq 1 100); do grep -q Forwarding "$work/forward.log" && break; sleep 0.1; done
check "port-forward to a real HTTP server" "HTTP/1.0 200" python3 - "$local_port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
print(s.recv(64).decode(errors="replace"))
PY
kill "$forwarder" 2>/dev/null || true
wait "$forwarder" 2>/dev/null || true
check "the server logged the request" '"GET / HTTP/1.0" 200' k logs web

check "delete waits for the processes" 'deleted' k delete pod hello web failing --timeout=60s
out=$(k get pods -o name 2>&1)
[ -z "$out" ] || fail "no pod left" "$out"
passed=$((passed + 1)); echo "ok: no pod left"

echo "kubectl-process-node: $passed passed, 0 failed"
