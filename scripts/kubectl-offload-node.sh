#!/usr/bin/env bash
# Drives the newest kubectl (kubectl.1.33 beside the real path of `kubectl`)
# against an offload node (`cargo xtask apiserver --offload-node`): its pods
# run in a second in-process API server, the remote cluster, where they are
# real processes on the process node `remote-0`. Every kubectl command goes
# to the home API server; the remote cluster is only read, to check what the
# offload node made there. Checks Ready, the remote pod and its copied
# ConfigMap/Secret volumes, the environment resolved at home, logs and logs -f, exec (stdin, a terminal),
# port-forward to a real HTTP server, a failed container's exit code, a
# ConfigMap change followed remotely, and deletion on both sides. Prints
# "kubectl-offload-node: N passed, 0 failed"; exits non-zero on the first
# failed check.
set -euo pipefail
cd "$(dirname "$0")/.."

real=$(readlink -f "$(command -v kubectl)") || { echo "kubectl is not installed" >&2; exit 1; }
newest="$(dirname "$real")/kubectl.1.33"
[ -x "$newest" ] || { echo "kubectl.1.33 is missing beside $real" >&2; exit 1; }
k() { "$newest" "$@"; }

# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
# The remote kubeconfig lives in the server's work directory, removed at exit.
work=$(mktemp -d)
remote_kubeconfig="$work/remote.kubeconfig"
start_harness_server --offload-node vk-offload --remote-kubeconfig "$remote_kubeconfig"
remote() { "$newest" --kubeconfig "$remote_kubeconfig" -n remote-default "$@"; }
# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh
checks_begin kubectl-offload-node

server_port=$(free_port)
k create configmap greeting --from-literal=GREETING=bonjour >/dev/null
k create secret generic token --from-literal=value=s3cret >/dev/null
cat >"$work/pods.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  nodeName: vk-offload
  terminationGracePeriodSeconds: 2
  volumes: [{name: token, secret: {secretName: token}}, {name: settings, configMap: {name: greeting}}]
  containers:
  - name: app
    image: busybox
    args: ['echo "greeting: \$GREETING"; i=0; while true; do i=\$((i+1)); echo "tick \$i"; sleep 1; done']
    envFrom: [{configMapRef: {name: greeting}}]
    volumeMounts: [{name: token, mountPath: /etc/token}, {name: settings, mountPath: /etc/settings}]
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: vk-offload
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
  nodeName: vk-offload
  restartPolicy: Never
  containers: [{name: app, image: busybox, args: ["exit 3"]}]
YAML
check "create pods on the offload node" 'pod/web created' k apply -f "$work/pods.yaml"
check "wait Ready (the remote readiness probe on a real port)" "condition met" k wait --for=condition=Ready pod/hello pod/web --timeout=60s
check "the remote pods carry the node's label" "vk-offload" remote get pods -l offload.stratus.dev/node=vk-offload -o jsonpath='{.items[*].metadata.labels.offload\.stratus\.dev/node}'
check "three remote pods" "3" bash -c "'$newest' --kubeconfig '$remote_kubeconfig' -n remote-default get pods -l offload.stratus.dev/node=vk-offload -o name | wc -l"
check "the home pod's IP is the remote pod's" "$(remote get pods -l offload.stratus.dev/node=vk-offload -o jsonpath='{.items[0].status.podIP}')" k get pods -o jsonpath='{.items[*].status.podIP}'
check "the ConfigMap (a volume) copied remotely" "bonjour" remote get configmap greeting -o jsonpath='{.data.GREETING}'
check "the Secret (a volume) copied remotely" "czNjcmV0" remote get secret token -o jsonpath='{.data.value}'
check "logs through the home API server" "greeting: bonjour" k logs hello
check "logs -f follows the remote container" "tick 3" bash -c "timeout 6 '$newest' logs -f hello || true"
check "logs --tail" "tick" k logs hello --tail=1
check "exec in the remote container's directory" "/containers/app" k exec hello -- pwd
check "exec -i with stdin" "piped" bash -c "echo piped | '$newest' exec -i hello -- cat"
check "exec -it on a terminal" "/dev/pts/" script -qec "'$newest' exec -it hello -- tty" /dev/null
check "a Secret volume as a file" "s3cret" k exec hello -- cat etc/token/value
check "a ConfigMap volume as a file" "bonjour" k exec hello -- cat etc/settings/GREETING
check "a failed container's phase" "condition met" k wait --for=jsonpath='{.status.phase}'=Failed pod/failing --timeout=30s
check "its exit code" "3" k get pod failing -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}'

check "port-forward to a real HTTP server in the remote cluster" "HTTP/1.0 200" forward_get web "$server_port"
eventually "the server logged the request" '"GET / HTTP/1.0" 200' k logs web

k create configmap greeting --from-literal=GREETING=salut --dry-run=client -o yaml | k replace -f - >/dev/null
eventually "a ConfigMap change followed remotely" "salut" remote get configmap greeting -o jsonpath='{.data.GREETING}'
eventually "and reached the remote container's volume" "salut" k exec hello -- cat etc/settings/GREETING

check "delete waits for the remote pods" 'deleted' k delete pod hello web failing --timeout=60s
out=$(k get pods -o name 2>&1)
[ -z "$out" ] || fail "no pod left at home" "$out"
passed=$((passed + 1)); echo "ok: no pod left at home"
eventually "no pod left remotely" "No resources found" remote get pods -l offload.stratus.dev/node=vk-offload
eventually "the copies deleted remotely" "No resources found" remote get configmaps,secrets -l offload.stratus.dev/node=vk-offload

checks_end
