#!/usr/bin/env bash
# The Helm charts of deploy/charts against Helm for real (built from
# tools/helm/go.mod with the Go caches, as upstream's Makefile builds it):
#  1. `helm lint --strict` of each chart, with its defaults and with every
#     option on (a provider config, a cloud config, a ServiceMonitor);
#  2. `helm template` of each, applied with `kubectl apply --dry-run=server`
#     to the harness API server (RBAC, TLS): every object is one the API
#     server accepts;
#  3. `helm install` of both into the harness, then the rendered manager's
#     and virtual node's container arguments run as processes (the sample
#     binaries; the images' entrypoints here) with a kubeconfig for the
#     harness: each serves /healthz and its work gets done (a node
#     initialized, the virtual node Ready); `helm uninstall` removes every
#     object the install made.
# Prints "helm: N passed, 0 failed"; exits non-zero on the first failed
# check. Leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
target="${CARGO_TARGET_DIR:-$repo/target}"

# shellcheck source=lib/helm-build.sh
source scripts/lib/helm-build.sh
build_helm
helm() { "$helm_bin" "$@"; }

# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh
checks_begin helm
ccm_chart=deploy/charts/stratus-cloud-controller-manager
vk_chart=deploy/charts/stratus-virtual-kubelet
ccm_all=(--set cloudConfigSecret=cloud-config --set metrics.serviceMonitor.enabled=true)
vk_all=(--set-string 'providerConfig=region: local' --set metrics.serviceMonitor.enabled=true)
for chart in "$ccm_chart" "$vk_chart"; do
  check "lint $chart" "0 chart(s) failed" helm lint --strict "$chart"
done
check "lint $ccm_chart, every option" "0 chart(s) failed" helm lint --strict "$ccm_chart" "${ccm_all[@]}"
check "lint $vk_chart, every option" "0 chart(s) failed" helm lint --strict "$vk_chart" "${vk_all[@]}"
check "the manager's options render" "kind: ServiceMonitor" helm template ccm "$ccm_chart" -n kube-system "${ccm_all[@]}"
check "the node's options render" "provider-config: |" helm template vk "$vk_chart" -n kube-system "${vk_all[@]}"

# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
start_harness_server --authorization-mode RBAC

# Every rendered object is one the API server takes (a ServiceMonitor needs
# prometheus-operator's CRD, which the harness does not have: defaults only).
for chart in "$ccm_chart" "$vk_chart"; do
  helm template "$(basename "$chart")" "$chart" -n kube-system >"$work/rendered.yaml"
  check "apply --dry-run=server $chart" "created (server dry run)" kubectl apply --dry-run=server -f "$work/rendered.yaml"
done

check "helm install the manager" "STATUS: deployed" helm install ccm "$ccm_chart" -n kube-system
check "helm install the virtual node" "STATUS: deployed" helm install vk "$vk_chart" -n kube-system --set nodeName=vk-helm
check "helm list" "vk" helm list -n kube-system
check "the installed Deployment" "cloud-controller-manager" kubectl -n kube-system get deployment cloud-controller-manager -o name

# The rendered container arguments (from the API's copy of the Deployment),
# run as the images would run them, with a kubeconfig for the harness in
# place of the in-cluster one; ports on loopback instead of 0.0.0.0.
args_of() { # the container args of Deployment $1, one a line
  kubectl -n kube-system get deployment "$1" -o json |
    python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["spec"]["template"]["spec"]["containers"][0]["args"]))'
}
cargo build --quiet -p sample-cloud-controller-manager -p sample-virtual-kubelet
bin="$target/debug"
ccm_port=$(free_port)
mapfile -t ccm_args < <(args_of cloud-controller-manager | sed -e "s/^--secure-port=.*/--secure-port=$ccm_port/" -e "s/^--bind-address=.*/--bind-address=127.0.0.1/")
"$bin/sample-cloud-controller-manager" "${ccm_args[@]}" --kubeconfig="$KUBECONFIG" \
  --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" >"$work/ccm.log" 2>&1 &
background_pids+=($!)
metrics_port=$(free_port)
kubelet_port=$(free_port)
mapfile -t vk_args < <(args_of virtual-kubelet-vk-helm | sed -e "s/^--metrics-addr=.*/--metrics-addr=127.0.0.1:$metrics_port/")
KUBELET_PORT=$kubelet_port "$bin/sample-virtual-kubelet" "${vk_args[@]}" --kubeconfig "$KUBECONFIG" >"$work/vk.log" 2>&1 &
background_pids+=($!)
uninitialized_node node-0
eventually "the manager, from the chart's flags, serves /healthz" "ok" curl -sk "https://127.0.0.1:$ccm_port/healthz"
eventually "the manager, from the chart's flags, leads" "cloud-controller-manager" \
  kubectl -n kube-system get lease cloud-controller-manager -o jsonpath='{.metadata.name}'
eventually "the manager initializes node-0" "fake://node-0" kubectl get node node-0 -o jsonpath='{.spec.providerID}'
eventually "the virtual node, from the chart's flags, serves /healthz" "ok" curl -s "http://127.0.0.1:$metrics_port/healthz"
eventually "the virtual node vk-helm is Ready" "True" \
  kubectl get node vk-helm -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'

check "helm uninstall the manager" "uninstalled" helm uninstall ccm -n kube-system
check "helm uninstall the virtual node" "uninstalled" helm uninstall vk -n kube-system
check "the Deployments are gone" "No resources found" kubectl -n kube-system get deployments
check "the manager's ClusterRoles are gone" "No resources found" kubectl get clusterroles -l app.kubernetes.io/part-of=stratus
check "the node's ClusterRole is gone" "NotFound" sh -c 'kubectl get clusterrole stratus:virtual-kubelet 2>&1 || true'
check "the releases' Secrets are gone" "No resources found" kubectl -n kube-system get secrets -l owner=helm
checks_end
