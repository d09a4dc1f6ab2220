#!/usr/bin/env bash
# Runs everyday kubectl commands with every kubectl from 1.27 to 1.33 (the
# kubectl.1.NN binaries beside the real path of `kubectl`) against the
# standalone harness API server over TLS (creates, dry runs, labels, selectors,
# get all, apply of docs/deploy/, YAML round trips, cordon, drain through
# evictions, certificate approval, namespace deletion). kubectl 1.32 and newer send
# protobuf request bodies; older ones JSON. Prints
# "kubectl-versions: N passed, 0 failed" when all pass; exits non-zero on the
# first failed check.
set -euo pipefail
cd "$(dirname "$0")/.."

real=$(readlink -f "$(command -v kubectl)") || { echo "kubectl is not installed" >&2; exit 1; }
bindir=$(dirname "$real")
versions=(27 28 29 30 31 32 33)
for v in "${versions[@]}"; do
  [ -x "$bindir/kubectl.1.$v" ] || { echo "kubectl.1.$v is missing beside $real" >&2; exit 1; }
done

# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
start_harness_server

# A certificate request for `kubectl certificate approve` (a protobuf GET
# and PUT of the approval subresource with kubectl 1.32+).
openssl req -new -newkey rsa:2048 -nodes -keyout "$work/alice.key" -subj "/CN=alice" \
  -out "$work/alice.csr" 2>/dev/null
csr_request=$(base64 -w0 "$work/alice.csr")

passed=0
failed() { echo "FAIL: $1"; echo "$2"; echo "kubectl-versions: $passed passed, 1 failed"; exit 1; }
check() { # check <description> <expected substring> <kubectl args...>
  local what=$1 want=$2; shift 2
  local out
  out=$("$k" "$@" 2>&1) || failed "$what (kubectl 1.$v): $k $*" "$out"
  [[ "$out" == *"$want"* ]] || failed "$what (kubectl 1.$v): wanted '$want'" "$out"
  passed=$((passed + 1))
}
fails() { # fails <description> <expected substring> <kubectl args...>
  local what=$1 want=$2; shift 2
  local out
  if out=$("$k" "$@" 2>&1); then failed "$what (kubectl 1.$v): expected an error" "$out"; fi
  [[ "$out" == *"$want"* ]] || failed "$what (kubectl 1.$v): wanted '$want'" "$out"
  passed=$((passed + 1))
}

for v in "${versions[@]}"; do
  k="$bindir/kubectl.1.$v"
  ns="team-$v"
  check "create namespace" "namespace/$ns created" create namespace "$ns"
  check "create configmap" "configmap/settings created" -n "$ns" create configmap settings --from-literal=color=blue
  check "configmap data" "blue" -n "$ns" get configmap settings -o 'jsonpath={.data.color}'
  check "create secret" "secret/token created" -n "$ns" create secret generic token --from-literal=key=s3cret
  check "secret bytes" "czNjcmV0" -n "$ns" get secret token -o 'jsonpath={.data.key}'
  check "create serviceaccount" "serviceaccount/robot created" -n "$ns" create serviceaccount robot
  check "create token (TokenRequest)" "harness-sa-" -n "$ns" create token robot --duration=20m
  fails "a token shorter than 10 minutes" "less than 600 seconds" -n "$ns" create token robot --duration=1m
  check "create service" "service/web created" -n "$ns" create service clusterip web --tcp=80:8080
  check "service port" "8080" -n "$ns" get service web -o 'jsonpath={.spec.ports[0].targetPort}'
  check "create deployment" "deployment.apps/web created" -n "$ns" create deployment web --image=nginx --replicas=2
  check "deployment replicas" "2" -n "$ns" get deployment web -o 'jsonpath={.spec.replicas}'
  check "create job" "job.batch/once created" -n "$ns" create job once --image=busybox
  check "create role" "role.rbac.authorization.k8s.io/reader created" -n "$ns" create role reader --verb=get --resource=pods
  check "create rolebinding" "rolebinding.rbac.authorization.k8s.io/reader created" -n "$ns" create rolebinding reader --role=reader --serviceaccount="$ns:robot"
  check "create priorityclass" "priorityclass.scheduling.k8s.io/high-$v created" create priorityclass "high-$v" --value=1000
  check "create pdb" "poddisruptionbudget.policy/web created" -n "$ns" create pdb web --selector=app=web --min-available=1
  check "server dry run" "(server dry run)" -n "$ns" create configmap dry --from-literal=a=b --dry-run=server
  fails "dry run stored nothing" "NotFound" -n "$ns" get configmap dry -o name
  check "label" "configmap/settings labeled" -n "$ns" label configmap settings tier=gold
  check "annotate" "configmap/settings annotate" -n "$ns" annotate configmap settings note=hi
  check "selector" "settings" -n "$ns" get configmaps -l tier=gold -o name
  check "get all" "deployment.apps/web" get all -n "$ns"
  check "apply the deploy manifests" "cloud-controller-manager" apply -f docs/deploy/
  check "yaml round trip" "color: blue" -n "$ns" get configmap settings -o yaml
  "$k" -n "$ns" get configmap settings -o yaml >"$work/settings.yaml"
  check "replace from yaml" "configmap/settings replaced" replace -f "$work/settings.yaml"
  cat >"$work/node-$v.yaml" <<YAML
apiVersion: v1
kind: Node
metadata:
  name: node-$v
---
apiVersion: v1
kind: Pod
metadata:
  name: stray
  namespace: $ns
spec:
  nodeName: node-$v
  containers:
  - name: app
    image: nginx
---
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: alice-$v
spec:
  request: $csr_request
  signerName: kubernetes.io/kube-apiserver-client
  usages: [client auth]
YAML
  check "create a node, a pod on it and a CSR" "pod/stray created" create -f "$work/node-$v.yaml"
  check "cordon" "node/node-$v cordoned" cordon "node-$v"
  check "cordoned" "true" get node "node-$v" -o 'jsonpath={.spec.unschedulable}'
  check "drain (eviction)" "node/node-$v drained" drain "node-$v" --force --grace-period=0 --timeout=30s
  check "drained" "No resources found" -n "$ns" get pods
  check "uncordon" "node/node-$v uncordoned" uncordon "node-$v"
  check "certificate approve" "approved" certificate approve "alice-$v"
  check "approved" "Approved" get csr "alice-$v" -o 'jsonpath={.status.conditions[0].type}'
  check "delete namespace" "namespace \"$ns\" deleted" delete namespace "$ns"
done

echo "kubectl-versions: $passed passed, 0 failed"
