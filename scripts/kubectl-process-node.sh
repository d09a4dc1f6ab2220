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
# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh
checks_begin kubectl-process-node

server_port=$(free_port)
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

check "port-forward to a real HTTP server" "HTTP/1.0 200" forward_get web "$server_port"
check "the server logged the request" '"GET / HTTP/1.0" 200' k logs web

check "delete waits for the processes" 'deleted' k delete pod hello web failing --timeout=60s
out=$(k get pods -o name 2>&1)
[ -z "$out" ] || fail "no pod left" "$out"
passed=$((passed + 1)); echo "ok: no pod left"

checks_end
