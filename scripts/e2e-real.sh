#!/usr/bin/env bash
# Stratus on a real control plane: `cargo xtask cluster up` (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler built from the Go
# modules of tools/kubernetes/go.mod), the demo on it (`demo --control-plane
# real --keep-running`: the cloud controller manager as its ServiceAccount
# under docs/deploy/rbac.yaml, simulated kubelets, the virtual nodes vk-demo
# (MockPodProvider), vk-process (real processes) and vk-offload (offloading
# to a second, harness API server)), then:
# - the e2e runner (`cargo xtask e2e --ccm --virtual-node ...`);
# - the newest kubectl: Deployments that the real controller manager turns
#   into ReplicaSets and Pods and the real scheduler binds to the virtual
#   nodes; logs, logs -f, exec (-i, -it), attach, port-forward, cp and the
#   stats summary through kube-apiserver's proxy to our kubelet API;
#   graceful and forced deletion; drain through evictions; a namespace
#   deleted with its pods;
# - faults: kube-apiserver restarted (the manager's writes to the cloud are
#   not repeated when its watches re-list), etcd stopped for 10 s, the
#   scheduler stopped (pods stay Pending, then bind);
# - the audit log: no request of the manager forbidden over the whole run;
# - docs/deploy/deployment.yaml and virtual-kubelet-deployment.yaml admitted
#   under PodSecurity `restricted`.
# Prints "e2e-real: N passed, 0 failed"; exits non-zero on the first failed
# check (with the demo's log).
set -euo pipefail
cd "$(dirname "$0")/.."

real=$(readlink -f "$(command -v kubectl)") || { echo "kubectl is not installed" >&2; exit 1; }
newest="$(dirname "$real")/kubectl.1.33"
[ -x "$newest" ] || newest=$real
work=$(mktemp -d)
kubeconfig="$work/kubeconfig"
k() { "$newest" --kubeconfig "$kubeconfig" "$@"; }

cargo build -q -p xtask
xtask="${CARGO_TARGET_DIR:-target}/debug/xtask"
"$xtask" cluster down >/dev/null 2>&1 || true
started=$(date +%s)
"$xtask" cluster up --kubeconfig "$kubeconfig"
echo "e2e-real: control plane up after $(($(date +%s) - started))s"

"$xtask" demo --control-plane real --keep-running --timeout 120 --kubeconfig "$kubeconfig" >"$work/demo.log" 2>&1 &
demo=$!
cleanup() {
  kill -INT "$demo" 2>/dev/null || true
  wait "$demo" 2>/dev/null || true
  "$xtask" cluster down || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 240); do
  grep -q "serving until Ctrl-C" "$work/demo.log" 2>/dev/null && break
  kill -0 "$demo" 2>/dev/null || break
  sleep 0.5
done
if ! grep -q "serving until Ctrl-C" "$work/demo.log"; then
  cat "$work/demo.log"
  echo "e2e-real: the demo did not converge on the real control plane"
  echo "e2e-real: 0 passed, 1 failed"
  exit 1
fi
sed -n '/^summary:/,/time taken/p' "$work/demo.log"

# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh
checks_begin e2e-real
# `forward_get` runs `k port-forward pod/NAME`: the pods are in `apps`.
k config set-context --current --namespace=apps >/dev/null
# On a failure, the demo's log says what the components saw.
fail_with_log() { echo "--- the demo's log (last 60 lines)"; tail -n 60 "$work/demo.log"; }
trap 'status=$?; [ $status -ne 0 ] && fail_with_log; cleanup; exit $status' EXIT

check "server version" "v1.37" k version
# The manager's Deployment as shipped passes the restricted Pod Security
# Standard (kube-apiserver's PodSecurity admission warns of nothing).
k create namespace restricted-check >/dev/null
k label namespace restricted-check pod-security.kubernetes.io/warn=restricted >/dev/null
check "docs/deploy/deployment.yaml passes PodSecurity restricted" "created (server dry run)" \
  bash -c "out=\$(sed 's/namespace: kube-system/namespace: restricted-check/' docs/deploy/deployment.yaml \
    | '$newest' --kubeconfig '$kubeconfig' apply --dry-run=server -f - 2>&1); echo \"\$out\"; ! grep -q Warning <<<\"\$out\""
check "docs/deploy/virtual-kubelet-deployment.yaml passes PodSecurity restricted" "created (server dry run)" \
  bash -c "out=\$(sed 's/namespace: kube-system/namespace: restricted-check/' docs/deploy/virtual-kubelet-deployment.yaml \
    | '$newest' --kubeconfig '$kubeconfig' apply --dry-run=server -f - 2>&1); echo \"\$out\"; ! grep -q Warning <<<\"\$out\""
check "the e2e runner: the manager and three virtual nodes" " 0 failed" \
  "$xtask" e2e --kubeconfig "$kubeconfig" --ccm --virtual-node vk-demo --virtual-node vk-process \
  --virtual-node vk-offload --junit target/e2e-real.junit.xml

# Deployments: the real controller manager makes the ReplicaSets and Pods,
# the real scheduler binds them by node selector and toleration.
server_port=$(free_port)
k create namespace apps >/dev/null
for _ in $(seq 1 100); do k -n apps get serviceaccount default >/dev/null 2>&1 && break; sleep 0.1; done
cat >"$work/apps.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: mock, namespace: apps}
spec:
  replicas: 3
  selector: {matchLabels: {app: mock}}
  template:
    metadata: {labels: {app: mock}}
    spec:
      nodeSelector: {type: virtual-kubelet, kubernetes.io/hostname: vk-demo}
      tolerations: [{key: virtual-kubelet.io/provider, operator: Exists, effect: NoSchedule}]
      terminationGracePeriodSeconds: 5
      containers: [{name: app, image: nginx}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello, namespace: apps}
spec:
  replicas: 2
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec:
      nodeSelector: {kubernetes.io/hostname: vk-process}
      tolerations: [{key: virtual-kubelet.io/provider, operator: Exists, effect: NoSchedule}]
      terminationGracePeriodSeconds: 2
      containers:
      - name: app
        image: busybox
        args: ['echo "hello from \$HOSTNAME"; i=0; while true; do i=\$((i+1)); echo "tick \$i"; sleep 1; done']
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: vk-process}
      tolerations: [{key: virtual-kubelet.io/provider, operator: Exists, effect: NoSchedule}]
      terminationGracePeriodSeconds: 2
      containers:
      - name: server
        image: python:3
        # The node's address, known before the pod starts; probes and
        # port-forward go there, as the kubelet's do.
        args: ["-u", "-m", "http.server", "$server_port", "--bind", "\$(POD_IP)"]
        env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]
        readinessProbe: {tcpSocket: {port: $server_port}, periodSeconds: 1}
YAML
check "kubectl apply three Deployments" "deployment.apps/web created" k apply -f "$work/apps.yaml"
for d in mock hello web; do
  check "Deployment $d rolled out (ReplicaSet and Pods by the controller manager)" "successfully rolled out" \
    k -n apps rollout status "deployment/$d" --timeout=90s
done
check "the scheduler bound the mock pods to vk-demo" "vk-demo vk-demo vk-demo" \
  k -n apps get pods -l app=mock -o 'jsonpath={.items[*].spec.nodeName}'
check "the scheduler bound the process pods to vk-process" "vk-process vk-process" \
  k -n apps get pods -l app=hello -o 'jsonpath={.items[*].spec.nodeName}'
check "every pod Ready" "condition met" k -n apps wait --for=condition=Ready pod --all --timeout=60s
hello=$(k -n apps get pods -l app=hello -o 'jsonpath={.items[0].metadata.name}')
web=$(k -n apps get pods -l app=web -o 'jsonpath={.items[0].metadata.name}')
mock=$(k -n apps get pods -l app=mock -o 'jsonpath={.items[0].metadata.name}')

# The kubelet API through kube-apiserver's proxy (its kubelet client
# certificate, authorized by SubjectAccessReview against the real RBAC).
check "logs (process pod)" "hello from $hello" k -n apps logs "$hello"
check "logs (mock pod)" "started container app" k -n apps logs "$mock"
check "logs -f streams new lines" "tick" bash -c "timeout 4 '$newest' --kubeconfig '$kubeconfig' -n apps logs -f --tail=1 '$hello' || true"
check "exec" "/containers/app" k -n apps exec "$hello" -- pwd
check "exec -i with stdin" "piped" bash -c "echo piped | '$newest' --kubeconfig '$kubeconfig' -n apps exec -i '$hello' -- cat"
check "exec -it on a terminal" "/dev/pts/" script -qec "'$newest' --kubeconfig '$kubeconfig' -n apps exec -it '$hello' -- tty" /dev/null
check "attach" "tick" bash -c "timeout 4 '$newest' --kubeconfig '$kubeconfig' -n apps attach '$hello' || true"
echo "copied by kubectl cp" >"$work/copied.txt"
check "cp into the pod" "" k -n apps cp "$work/copied.txt" "$hello:copied.txt"
check "the copied file is there" "copied by kubectl cp" k -n apps exec "$hello" -- cat copied.txt
check "cp out of the pod" "" k -n apps cp "$hello:copied.txt" "$work/back.txt"
check "the file came back" "copied by kubectl cp" cat "$work/back.txt"
check "port-forward to a real HTTP server" "HTTP/1.0 200" forward_get "$web" "$server_port"
check "stats summary (nodes/proxy)" "$hello" k get --raw "/api/v1/nodes/vk-process/proxy/stats/summary"
check "stats summary of vk-demo" "$mock" k get --raw "/api/v1/nodes/vk-demo/proxy/stats/summary"

# Deletion.
check "graceful delete" "deleted" k -n apps delete pod "$mock" --timeout=60s
forced=$(k -n apps get pods -l app=mock -o 'jsonpath={.items[0].metadata.name}')
check "forced delete" "force deleted" k -n apps delete pod "$forced" --grace-period=0 --force
check "the Deployment replaces them" "successfully rolled out" k -n apps rollout status deployment/mock --timeout=90s
check "drain vk-demo through evictions" "drained" k drain vk-demo --ignore-daemonsets --delete-emptydir-data --force --timeout=90s
eventually "evicted pods are Pending while the node is cordoned" "Pending Pending Pending" \
  k -n apps get pods -l app=mock -o 'jsonpath={.items[*].status.phase}'
check "uncordon" "uncordoned" k uncordon vk-demo
check "the pods run again" "successfully rolled out" k -n apps rollout status deployment/mock --timeout=90s

k create namespace doomed >/dev/null
for _ in $(seq 1 100); do k -n doomed get serviceaccount default >/dev/null 2>&1 && break; sleep 0.1; done
k -n doomed create deployment doomed --image=nginx --replicas=2 --dry-run=client -o json |
  python3 -c 'import json,sys; d=json.load(sys.stdin); s=d["spec"]["template"]["spec"]; s["nodeSelector"]={"kubernetes.io/hostname":"vk-demo"}; s["tolerations"]=[{"key":"virtual-kubelet.io/provider","operator":"Exists","effect":"NoSchedule"}]; print(json.dumps(d))' |
  k apply -f - >/dev/null
check "they run" "successfully rolled out" k -n doomed rollout status deployment/doomed --timeout=90s
check "a namespace deleted with its pods" "deleted" k delete namespace doomed --timeout=90s

# Faults. Across kube-apiserver's restart, the manager's writes to the cloud
# (from its metrics, read with the token of a ServiceAccount allowed to) must
# not repeat when its watches re-list: nothing changed, so nothing is due.
manager_addr=$(sed -n 's|^manager: https://\([^/]*\)/healthz.*|\1|p' "$work/demo.log" | head -n 1)
k create serviceaccount metrics-reader -n default >/dev/null
k create clusterrole metrics-reader --verb=get --non-resource-url=/metrics >/dev/null
k create clusterrolebinding metrics-reader --clusterrole=metrics-reader \
  --serviceaccount=default:metrics-reader >/dev/null
metrics_token=$(k create token metrics-reader -n default)
cloud_writes() {
  curl -sfk -H "Authorization: Bearer $metrics_token" "https://$manager_addr/metrics" |
    awk '/^stratus_cloud_provider_requests_total[{]method="(ensure_load_balancer|update_load_balancer|ensure_load_balancer_deleted|create_route|delete_route)"/ {s += $2}
         END {print "cloud writes: " s + 0 "."}'
}
check "a LoadBalancer Service" "exposed" \
  k -n apps expose deployment/mock --name=mock-lb --type=LoadBalancer --port=80
eventually "its ingress" "." k -n apps get service mock-lb -o 'jsonpath={.status.loadBalancer.ingress[0].ip}'
# Each method's count, for the log.
cloud_calls() {
  curl -sfk -H "Authorization: Bearer $metrics_token" "https://$manager_addr/metrics" |
    grep '^stratus_cloud_provider_requests_total' | tr '\n' ' '
}
sleep 2
before=$(cloud_writes)
echo "before the restart: $before"
echo "cloud calls before the restart: $(cloud_calls)"
echo "kube-apiserver restarted at $(date -u +%H:%M:%S.%N)"
check "kube-apiserver restarted" "healthy" "$xtask" cluster restart kube-apiserver
check "after the restart, a scale-up runs on vk-demo" "successfully rolled out" \
  bash -c "'$newest' --kubeconfig '$kubeconfig' -n apps scale deployment/mock --replicas=4 >/dev/null && '$newest' --kubeconfig '$kubeconfig' -n apps rollout status deployment/mock --timeout=90s"
# Time for every watch of the manager to have re-listed.
sleep 5
echo "cloud calls after the restart: $(cloud_calls)"
check "no cloud write repeated after the restart" "$before" cloud_writes
check "after the restart, a second LoadBalancer Service" "exposed" \
  k -n apps expose deployment/mock --name=mock-lb2 --type=LoadBalancer --port=81
eventually "its ingress" "." k -n apps get service mock-lb2 -o 'jsonpath={.status.loadBalancer.ingress[0].ip}'
echo "etcd stopped at $(date -u +%H:%M:%S.%N)"
check "etcd stopped" "" "$xtask" cluster stop etcd
sleep 10
check "etcd started after 10 s" "healthy" "$xtask" cluster start etcd
eventually "kube-apiserver ready again" "ok" k get --raw /readyz
eventually "the virtual nodes are Ready" "True True True" \
  k get nodes vk-demo vk-process vk-offload -o 'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}'
check "after etcd's outage, a scale-up runs" "successfully rolled out" \
  bash -c "'$newest' --kubeconfig '$kubeconfig' -n apps scale deployment/mock --replicas=5 >/dev/null && '$newest' --kubeconfig '$kubeconfig' -n apps rollout status deployment/mock --timeout=90s"
check "the scheduler stopped" "" "$xtask" cluster stop kube-scheduler
check "a scale-up while it is down" "scaled" k -n apps scale deployment/mock --replicas=6
sleep 5
check "the new pod stays Pending, unbound" "Pending:" \
  bash -c "'$newest' --kubeconfig '$kubeconfig' -n apps get pods -l app=mock -o go-template='{{range .items}}{{if not .spec.nodeName}}{{.status.phase}}:{{end}}{{end}}'"
check "the scheduler started" "healthy" "$xtask" cluster start kube-scheduler
check "the pod is bound and runs" "successfully rolled out" k -n apps rollout status deployment/mock --timeout=90s

check "the manager: no forbidden request in the audit log" " 0 forbidden" "$xtask" cluster audit --user-agent cloud-controller-manager
checks_end
