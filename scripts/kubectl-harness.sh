#!/usr/bin/env bash
# Drives the installed kubectl against the standalone harness API server
# (`cargo xtask apiserver --tls`), or with STRATUS_CONTROL_PLANE=real against
# the real control plane (`cargo xtask cluster up`; the virtual node then runs
# beside it: `cargo xtask cluster virtual-node`), and checks every answer.
# Exits non-zero on the first failed check; prints "kubectl: N passed, 0
# failed" when all pass.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v kubectl >/dev/null || { echo "kubectl is not installed" >&2; exit 1; }
# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
start_harness_server --virtual-node vk-kubectl
if [ -n "${real:-}" ]; then
  # On the real control plane the virtual node runs beside it, its kubelet
  # API reached through kube-apiserver's proxy.
  "${CARGO_TARGET_DIR:-target}/debug/xtask" cluster virtual-node vk-kubectl >"$work/vk.log" 2>&1 &
  vk=$!
  trap 'kill "$vk" 2>/dev/null || true; wait "$vk" 2>/dev/null || true; rm -rf "$work"' EXIT
  for _ in $(seq 1 150); do
    [ "$(kubectl get node vk-kubectl -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && break
    sleep 0.2
  done
  port=$(kubectl config view --minify -o 'jsonpath={.clusters[0].cluster.server}' | sed 's/.*://')
fi

passed=0
check() { # check <description> <expected substring> <command...>
  local what=$1 want=$2; shift 2
  local out
  if ! out=$("$@" 2>&1); then
    echo "FAIL: $what: command failed: $*"; echo "$out"; echo "kubectl: $passed passed, 1 failed"; exit 1
  fi
  if [[ "$out" != *"$want"* ]]; then
    echo "FAIL: $what: wanted '$want' in:"; echo "$out"; echo "kubectl: $passed passed, 1 failed"; exit 1
  fi
  passed=$((passed + 1)); echo "ok: $what"
}
fails() { # fails <description> <expected substring> <command...>
  local what=$1 want=$2; shift 2
  local out
  if out=$("$@" 2>&1); then
    echo "FAIL: $what: expected an error: $*"; echo "$out"; echo "kubectl: $passed passed, 1 failed"; exit 1
  fi
  if [[ "$out" != *"$want"* ]]; then
    echo "FAIL: $what: wanted '$want' in:"; echo "$out"; echo "kubectl: $passed passed, 1 failed"; exit 1
  fi
  passed=$((passed + 1)); echo "ok: $what"
}

cat >"$work/objects.yaml" <<'YAML'
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    kubernetes.io/hostname: node-1
spec:
  taints:
  - key: node.cloudprovider.kubernetes.io/uninitialized
    value: "true"
    effect: NoSchedule
status:
  conditions:
  - type: Ready
    status: "True"
  addresses:
  - type: InternalIP
    address: 10.0.0.1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  color: blue
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  type: LoadBalancer
  selector:
    app: web
  ports:
  - port: 80
YAML

check "over TLS with the exported CA" "https://127.0.0.1:$port" kubectl cluster-info
check "get namespaces" "kube-node-lease" kubectl get namespaces
check "create from YAML" "service/web created" kubectl create -f "$work/objects.yaml"
check "get -o json" '"kind": "Node"' kubectl get node node-1 -o json
check "get -o yaml" "color: blue" kubectl get configmap settings -o yaml
check "get -o wide" "10.0.0.1" kubectl get nodes -o wide
check "service allocation" "80:3" kubectl get service web
check "merge patch" "patched" kubectl patch configmap settings --type merge -p '{"data":{"size":"L"}}'
check "json patch" "patched" kubectl patch configmap settings --type json -p '[{"op":"replace","path":"/data/color","value":"red"}]'
check "json patch result" '"color":"red"' kubectl get configmap settings -o jsonpath='{.data}'
check "strategic patch on status" "patched" kubectl patch node node-1 --subresource=status --type strategic -p '{"status":{"conditions":[{"type":"NetworkUnavailable","status":"False","reason":"RouteCreated"}]}}'
check "conditions merged by type (new ones first)" "NetworkUnavailable Ready" kubectl get node node-1 -o jsonpath='{.status.conditions[*].type}'
check "label" "labeled" kubectl label node node-1 tier=gold
check "annotate" "annotated" kubectl annotate node node-1 note=hello
check "taint add" "tainted" kubectl taint node node-1 dedicated=ccm:NoSchedule
check "taint remove" "untainted" kubectl taint node node-1 node.cloudprovider.kubernetes.io/uninitialized-
check "taints replaced" '[{"effect":"NoSchedule","key":"dedicated","value":"ccm"}]' kubectl get node node-1 -o jsonpath='{.spec.taints}'
check "describe" "tier=gold" kubectl describe node node-1

cat >"$work/apply.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  color: green
YAML
fails "server-side apply conflict" "conflict with" kubectl apply --server-side -f "$work/apply.yaml"
check "server-side apply with force" "serverside-applied" kubectl apply --server-side --force-conflicts -f "$work/apply.yaml"
check "applied value" "green" kubectl get configmap settings -o jsonpath='{.data.color}'

kubectl get configmaps --watch >"$work/watch.log" 2>&1 &
watcher=$!
sleep 1
check "finalizer" "patched" kubectl patch configmap settings --type merge -p '{"metadata":{"finalizers":["example.com/hold"]}}'
check "delete with a finalizer" "deleted" kubectl delete configmap settings --wait=false
check "terminating" "T" kubectl get configmap settings -o jsonpath='{.metadata.deletionTimestamp}'
kubectl wait --for=delete configmap/settings --timeout=30s >"$work/wait.log" 2>&1 &
waiter=$!
sleep 0.5
check "remove the finalizer" "patched" kubectl patch configmap settings --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]'
wait "$waiter"
check "wait --for=delete" "condition met" cat "$work/wait.log"
sleep 0.5
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
check "get --watch saw the changes" "settings" cat "$work/watch.log"
check "delete" "deleted" kubectl delete node node-1
fails "not found" "NotFound" kubectl get node node-1

# The kubelet API of the virtual node vk-kubectl (MockPodProvider), through
# the harness's proxy: logs, exec (with stdin, with a TTY; over WebSocket
# and over SPDY), attach, port-forward (SPDY tunneled in a WebSocket, and
# plain SPDY), and nodes/proxy.
cat >"$work/pods.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  annotations:
    mock.stratus.dev/log: "alpha\nbeta\ngamma"
spec:
  nodeName: vk-kubectl
  containers:
  - name: app
    image: busybox
---
apiVersion: v1
kind: Pod
metadata:
  name: ticker
  namespace: default
  annotations:
    mock.stratus.dev/log: "tick"
    mock.stratus.dev/exit-code: "0"
    mock.stratus.dev/run-for: "3s"
spec:
  nodeName: vk-kubectl
  containers:
  - name: app
    image: busybox
YAML
check "pods on the virtual node" "pod/ticker created" kubectl create -f "$work/pods.yaml"
check "pod running" "condition met" kubectl wait --for=jsonpath='{.status.phase}'=Running pod/web pod/ticker --timeout=30s
check "logs" $'started container app\nalpha\nbeta\ngamma' kubectl logs web
check "logs --tail" "gamma" bash -c '[ "$(kubectl logs web --tail=1)" = gamma ] && echo gamma'
check "logs -f ends with the container" "tick" timeout 30 kubectl logs -f ticker
fails "logs of an unknown container" "not valid for pod web" kubectl logs web -c nope
check "exec" "hello there" kubectl exec web -- echo hello there
fails "exec exit code" "command terminated with exit code 3" kubectl exec web -- sh -c "exit 3"
check "exec -i with stdin" "piped" bash -c 'echo piped | kubectl exec -i web -- cat'
check "exec -it with a terminal size" "100x30" script -qec "stty cols 100 rows 30; kubectl exec -it web -- size" /dev/null
check "attach -i" "hi attach" bash -c 'echo "hi attach" | kubectl attach -i web'
check "exec over SPDY" "hello spdy" env KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false kubectl exec web -- echo hello spdy
fails "exec exit code over SPDY" "command terminated with exit code 4" env KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false kubectl exec web -- sh -c "exit 4"
check "exec -i over SPDY" "piped spdy" bash -c 'echo "piped spdy" | KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false kubectl exec -i web -- cat'
# Through kube-apiserver's SPDY proxy the size command has printed nothing
# once in three CI runs (cause not found yet): up to three tries, each
# must print the size to pass.
spdy_size() {
  local out
  for _ in 1 2 3; do
    out=$(script -qec "stty cols 90 rows 20; KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false kubectl exec -it web -- size" /dev/null)
    [[ "$out" == *90x20* ]] && break
  done
  echo "$out"
}
check "exec -it over SPDY" "90x20" spdy_size

forward() { # forward [VAR=value...]: send bytes through kubectl port-forward, print the echo
  local local_port
  local_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  env "$@" kubectl port-forward pod/web "$local_port:8080" >"$work/forward.log" 2>&1 &
  local forwarder=$!
  for _ in $(seq 1 100); do grep -q Forwarding "$work/forward.log" && break; sleep 0.1; done
  python3 - "$local_port" <<'PY'
import socket, sys
for n in (1, 2):  # two connections through one forward
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    s.settimeout(10)
    message = b"echo %d through port-forward" % n
    s.sendall(message)
    got = b""
    while len(got) < len(message):
        chunk = s.recv(100)
        if not chunk:
            break
        got += chunk
    print(got.decode())
    s.close()
PY
  kill "$forwarder" 2>/dev/null || true
  wait "$forwarder" 2>/dev/null || true
}
check "port-forward (SPDY tunneled in a WebSocket)" "echo 2 through port-forward" forward
check "port-forward (SPDY)" "echo 2 through port-forward" forward KUBECTL_PORT_FORWARD_WEBSOCKETS=false
check "nodes/proxy stats summary" '"nodeName":"vk-kubectl"' kubectl get --raw /api/v1/nodes/vk-kubectl/proxy/stats/summary
check "nodes/proxy resource metrics" "container_memory_working_set_bytes" kubectl get --raw /api/v1/nodes/vk-kubectl/proxy/metrics/resource

echo "kubectl: $passed passed, 0 failed"
