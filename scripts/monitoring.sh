#!/usr/bin/env bash
# The monitoring rules of docs/deploy/monitoring against Prometheus for real:
#  1. `promtool check rules` and `promtool test rules` (Debian's Prometheus);
#  2. a cloud controller manager with the reference `local` provider (on a
#     local cloud daemon of its own) and the sample virtual kubelet run
#     as processes against the harness API server (RBAC, TLS), a node, a
#     LoadBalancer Service and a pod given them to work on, and Prometheus
#     (Debian's, started here on loopback with the rules loaded, stopped at
#     the end) scraping the manager's /metrics over HTTPS with a bearer token
#     (the manager reviews it with the API server) and the node's
#     --metrics-addr; every metric the rules and the dashboard
#     (stratus-dashboard.json) read must have samples there, and every
#     dashboard query must answer; then a pod the provider leaves Pending
#     must fire StratusVirtualKubeletPodsPending, and a cloud failing every
#     call StratusCloudProviderErrors and StratusNodesNotInitialized (the
#     rules loaded with their `for` durations cut to 3 s).
# Prints "monitoring: N passed, 0 failed"; exits non-zero on the first failed
# check. Leaves nothing behind (processes, ports, files).
set -euo pipefail
cd "$(dirname "$0")/.."
rules="$(pwd)/docs/deploy/monitoring/stratus-rules.yaml"
tests="$(pwd)/docs/deploy/monitoring/stratus-rules.test.yaml"
for tool in prometheus promtool; do
  command -v "$tool" >/dev/null || { echo "monitoring: $tool is not installed (apt-get install prometheus)" >&2; exit 1; }
done

# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh
checks_begin monitoring
check "promtool check rules" "SUCCESS" promtool check rules "$rules"
check "promtool test rules" "SUCCESS" promtool test rules "$tests"

# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
start_harness_server --authorization-mode RBAC
# The administrator's token, which Prometheus presents to the manager.
token=$(awk '/token:/ {print $2; exit}' "$KUBECONFIG")
[ -n "$token" ] || fail "the harness kubeconfig has a token" "$(cat "$KUBECONFIG")"
printf '%s' "$token" >"$work/token"

cargo build --quiet -p sample-virtual-kubelet --bin sample-virtual-kubelet \
  -p stratus-local-cloud --features stratus-local-cloud/daemon --bin stratus-local-cloud \
  -p stratus-provider-local --features stratus-provider-local/manager --bin stratus-local-cloud-controller-manager
bin="${CARGO_TARGET_DIR:-target}/debug"
# The manager: the reference `local` provider on a local cloud of its own
# (a daemon on loopback, load balancers in 127.75.0.0/24), whose faults the
# script injects below.
cloud_port=$(free_port)
"$bin/stratus-local-cloud" --listen "127.0.0.1:$cloud_port" --address-range 127.75.0.0/24 >"$work/cloud.log" 2>&1 &
background_pids+=($!)
cloud="http://127.0.0.1:$cloud_port/v1"
eventually "the local cloud answers" "items" curl -sf "$cloud/instances"
curl -sf -X PUT "$cloud/instances/i-node-0" -H 'content-type: application/json' \
  -d '{"nodeName": "node-0", "zone": "local-a", "region": "local", "instanceType": "process", "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}' >/dev/null
printf 'endpoint: %s\n' "http://127.0.0.1:$cloud_port" >"$work/local-cloud.yaml"
ccm_port=$(free_port)
"$bin/stratus-local-cloud-controller-manager" --cloud-provider=local --cloud-config="$work/local-cloud.yaml" \
  --kubeconfig="$KUBECONFIG" --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
  --bind-address=127.0.0.1 --secure-port="$ccm_port" --cluster-cidr=10.244.0.0/16 \
  --allocate-node-cidrs=true --configure-cloud-routes=false >"$work/ccm.log" 2>&1 &
background_pids+=($!)
vk_port=$(free_port)
kubelet_port=$(free_port)
KUBELET_PORT=$kubelet_port "$bin/sample-virtual-kubelet" --provider mock --kubeconfig "$KUBECONFIG" \
  --nodename vk-monitoring --metrics-addr "127.0.0.1:$vk_port" >"$work/vk.log" 2>&1 &
background_pids+=($!)

# Work for both: a node of the cloud to initialize, a Service to give a
# load balancer, a pod for the virtual node.
uninitialized_node node-0
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: watched, namespace: default}
spec:
  nodeName: vk-monitoring
  tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
  containers: [{name: app, image: busybox}]
YAML

prom_port=$(free_port)
mkdir -p "$work/prometheus"
# The rules as shipped but for their `for` durations (minutes; 3 s here), so
# that an alert fires within the script; `promtool test rules` covers the
# shipped durations.
sed -E 's/^( +for: ).*/\13s/' "$rules" >"$work/rules.yaml"
cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$work/rules.yaml"]
scrape_configs:
  - job_name: cloud-controller-manager
    scheme: https
    tls_config: {insecure_skip_verify: true}
    authorization: {credentials_file: "$work/token"}
    static_configs: [{targets: ["127.0.0.1:$ccm_port"]}]
  - job_name: virtual-kubelet
    static_configs: [{targets: ["127.0.0.1:$vk_port"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
background_pids+=($!)
api="http://127.0.0.1:$prom_port/api/v1"
query() { curl -sf --get "$api/query" --data-urlencode "query=$1"; }

eventually "Prometheus is ready" "Ready" curl -sf "http://127.0.0.1:$prom_port/-/ready"
eventually "node-0 initialized by the manager" "local://i-node-0" kubectl get node node-0 -o jsonpath='{.spec.providerID}'
eventually "the pod Running on the virtual node" "Running" kubectl get pod watched -o jsonpath='{.status.phase}'
# The kubelet API: a caller without credentials (refused), the
# administrator (served); each request counted.
check "the kubelet API refuses a caller without credentials" "401" \
  curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$kubelet_port/pods"
check "the kubelet API serves the administrator" "200" \
  curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "https://127.0.0.1:$kubelet_port/pods"
# `up` is 1 only after a scrape that authenticated (a 401 or 403 is 0).
for job in cloud-controller-manager virtual-kubelet; do
  eventually "$job scraped" '"value":[' query "up{job=\"$job\"} == 1"
done

# Every metric the loaded rules read (from Prometheus's own parse of them)
# and every metric the dashboard's queries read; each must have samples,
# and each dashboard query must return data.
dashboard="$(pwd)/docs/deploy/monitoring/stratus-dashboard.json"
queries() {
  curl -sf "$api/rules" | python3 -c '
import json, sys
for group in json.load(sys.stdin)["data"]["groups"]:
    for rule in group["rules"]:
        print(" ".join(rule["query"].split()))'
  python3 -c '
import json, sys
for panel in json.load(open(sys.argv[1]))["panels"]:
    for target in panel.get("targets", []):
        print(" ".join(target["expr"].split()))' "$dashboard"
}
metric_names() { # the metric names the PromQL queries on stdin read
  python3 -c '
import re, sys
keywords = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk",
            "quantile", "count_values", "group", "by", "without", "on", "ignoring",
            "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
names = set()
for q in sys.stdin:
    q = re.sub(r"\"[^\"]*\"", "", q)
    q = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", q)
    q = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", q)
    for token in re.findall(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*(?![A-Za-z0-9_:])(?!\s*\()", q):
        if token not in keywords and ":" not in token:
            names.add(token)
print("\n".join(sorted(names)))'
}
metrics=$(queries | metric_names)
[ "$(echo "$metrics" | wc -l)" -ge 10 ] || fail "the rules and the dashboard read metrics" "$metrics"
for metric in $metrics; do
  eventually "$metric has samples" '"value":[' query "count({__name__=\"$metric\"})"
done
# Rates need two scrapes in their window: the dashboard's queries are asked
# until they answer (a histogram quantile of nothing observed is NaN, which
# still counts as an answer).
while IFS= read -r expr; do
  eventually "dashboard: $expr" '"value":[' query "$expr"
done < <(python3 -c '
import json, sys
for panel in json.load(open(sys.argv[1]))["panels"]:
    for target in panel.get("targets", []):
        print(" ".join(target["expr"].split()))' "$dashboard")

# A fault: the provider leaves a pod Pending (MockPodProvider's
# `mock.stratus.dev/pending`), and the pods-pending alert fires for the node.
alert='ALERTS{alertname="StratusVirtualKubeletPodsPending",node="vk-monitoring",alertstate="firing"}'
check "no pods-pending alert before the fault" '"result":[]' query "$alert"
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: stuck
  namespace: default
  annotations: {mock.stratus.dev/pending: "true"}
spec:
  nodeName: vk-monitoring
  tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
  containers: [{name: app, image: busybox}]
YAML
eventually "StratusVirtualKubeletPodsPending fires for vk-monitoring" '"alertstate":"firing"' query "$alert"

# A fault: the cloud fails every call (the local cloud's `failNext`), and a
# new node cannot be initialized: the cloud-error and the
# nodes-not-initialized alerts fire.
cloud_alert='ALERTS{alertname="StratusCloudProviderErrors",alertstate="firing"}'
nodes_alert='ALERTS{alertname="StratusNodesNotInitialized",alertstate="firing"}'
check "no cloud-error alert before the fault" '"result":[]' query "$cloud_alert"
check "no nodes-not-initialized alert before the fault" '"result":[]' query "$nodes_alert"
check "the local cloud fails every call" '"failNext":1000000' \
  curl -sf -X PUT "$cloud/faults" -H 'content-type: application/json' -d '{"failNext": 1000000}'
uninitialized_node node-1
eventually "StratusCloudProviderErrors fires" '"alertstate":"firing"' query "$cloud_alert"
eventually "StratusNodesNotInitialized fires" '"alertstate":"firing"' query "$nodes_alert"
check "node-1 is still tainted" "uninitialized" kubectl get node node-1 -o jsonpath='{.spec.taints[*].key}'
checks_end
