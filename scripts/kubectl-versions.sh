#!/usr/bin/env bash
# Runs everyday kubectl commands with every kubectl from 1.27 to 1.33 (the
# kubectl.1.NN binaries beside the real path of `kubectl`) against the
# standalone harness API server over TLS (creates, dry runs, labels, selectors,
# get all, apply of docs/deploy/, YAML round trips, cordon, drain through
# evictions, scale, certificate approval, auth can-i / whoami, a ServiceAccount
# token under RBAC (the server runs with --authorization-mode RBAC),
# impersonation (--as), a CRD with
# schema defaults and validation, explain (OpenAPI v3), diff, unknown fields
# refused (strict) and warned, namespace deletion). kubectl 1.32 and newer send
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
start_harness_server --authorization-mode RBAC

# A certificate request for `kubectl certificate approve` (a protobuf GET
# and PUT of the approval subresource with kubectl 1.32+).
openssl req -new -newkey rsa:2048 -nodes -keyout "$work/alice.key" -subj "/CN=alice" \
  -out "$work/alice.csr" 2>/dev/null
csr_request=$(base64 -w0 "$work/alice.csr")

# A CustomResourceDefinition with a schema (a default, bounds, an enum), a
# printer column and a short name; a valid, an invalid and an unknown-field
# object of it.
cat >"$work/crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd]}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Mode, type: string, jsonPath: .spec.mode}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [replicas]
            properties:
              replicas: {type: integer, minimum: 1, maximum: 5}
              mode: {type: string, enum: [fast, slow], default: slow}
YAML
gadget() { # gadget <name> <spec fields as YAML flow>
  printf 'apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: %s}\nspec: %s\n' "$1" "$2"
}
gadget g1 '{replicas: 3}' >"$work/gadget.yaml"
gadget g2 '{replicas: 9, mode: warp}' >"$work/gadget-invalid.yaml"
gadget g3 '{replicas: 1, bogus: true}' >"$work/gadget-unknown.yaml"

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

differs() { # differs <description> <expected substring> <kubectl args...>: exit 1 with a diff
  local what=$1 want=$2; shift 2
  local out rc=0
  out=$("$k" "$@" 2>&1) || rc=$?
  [[ $rc == 1 ]] || failed "$what (kubectl 1.$v): wanted exit code 1, got $rc" "$out"
  [[ "$out" == *"$want"* ]] || failed "$what (kubectl 1.$v): wanted '$want'" "$out"
  passed=$((passed + 1))
}
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndat: {a: b}\n' >"$work/typo.yaml"

differs() { # differs <description> <expected substring> <kubectl args...>: exit 1 with a diff
  local what=$1 want=$2; shift 2
  local out rc=0
  out=$("$k" "$@" 2>&1) || rc=$?
  [[ $rc == 1 ]] || failed "$what (kubectl 1.$v): wanted exit code 1, got $rc" "$out"
  [[ "$out" == *"$want"* ]] || failed "$what (kubectl 1.$v): wanted '$want'" "$out"
  passed=$((passed + 1))
}
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndat: {a: b}\n' >"$work/typo.yaml"

for v in "${versions[@]}"; do
  k="$bindir/kubectl.1.$v"
  ns="team-$v"
  check "create namespace" "namespace/$ns created" create namespace "$ns"
  check "create configmap" "configmap/settings created" -n "$ns" create configmap settings --from-literal=color=blue
  check "configmap data" "blue" -n "$ns" get configmap settings -o 'jsonpath={.data.color}'
  check "create secret" "secret/token created" -n "$ns" create secret generic token --from-literal=key=s3cret
  check "secret bytes" "czNjcmV0" -n "$ns" get secret token -o 'jsonpath={.data.key}'
  check "create serviceaccount" "serviceaccount/robot created" -n "$ns" create serviceaccount robot
  check "create token (TokenRequest: a signed JWT)" "eyJhbGciOiJFUzI1NiIs" -n "$ns" create token robot --duration=20m
  fails "a token shorter than 10 minutes" "may not specify a duration less than 10 minutes" -n "$ns" create token robot --duration=1m
  check "create service" "service/web created" -n "$ns" create service clusterip web --tcp=80:8080
  check "service port" "8080" -n "$ns" get service web -o 'jsonpath={.spec.ports[0].targetPort}'
  check "create deployment" "deployment.apps/web created" -n "$ns" create deployment web --image=nginx --replicas=2
  check "deployment replicas" "2" -n "$ns" get deployment web -o 'jsonpath={.spec.replicas}'
  check "scale (the scale subresource)" "deployment.apps/web scaled" -n "$ns" scale deployment web --replicas=4
  check "scaled" "4" -n "$ns" get deployment web -o 'jsonpath={.spec.replicas}'
  check "create job" "job.batch/once created" -n "$ns" create job once --image=busybox
  check "workload columns" "UP-TO-DATE" -n "$ns" get deployments
  check "a Job's generated selector" "controller-uid" -n "$ns" get job once -o 'jsonpath={.spec.selector.matchLabels}'
  check "create role" "role.rbac.authorization.k8s.io/reader created" -n "$ns" create role reader --verb=get --resource=pods
  check "create rolebinding" "rolebinding.rbac.authorization.k8s.io/reader created" -n "$ns" create rolebinding reader --role=reader --serviceaccount="$ns:robot"
  check "create priorityclass" "priorityclass.scheduling.k8s.io/high-$v created" create priorityclass "high-$v" --value=1000
  check "create pdb" "poddisruptionbudget.policy/web created" -n "$ns" create pdb web --selector=app=web --min-available=1
  # RBAC: a ServiceAccount's token may do what its RoleBinding grants.
  robot_token=$("$k" -n "$ns" create token robot --duration=20m)
  # A kubeconfig of the token alone: with a client certificate beside it
  # (the real control plane's administrator), kube-apiserver authenticates
  # the certificate first.
  robot="$work/robot-$v.kubeconfig"
  "$k" config view --minify --raw >"$robot"
  "$k" --kubeconfig "$robot" config set-credentials robot --token="$robot_token" >/dev/null
  "$k" --kubeconfig "$robot" config set-context --current --user=robot >/dev/null
  check "a bound ServiceAccount may get pods" "yes" -n "$ns" --kubeconfig "$robot" auth can-i get pods
  fails "and may not delete them" "no" -n "$ns" --kubeconfig "$robot" auth can-i delete pods
  fails "a forbidden request names the permission" "cannot list resource \"secrets\" in API group \"\" in the namespace \"$ns\"" -n "$ns" --kubeconfig "$robot" get secrets
  check "auth can-i (SelfSubjectAccessReview)" "yes" -n "$ns" auth can-i create pods
  check "auth can-i --list (SelfSubjectRulesReview)" "*.*" -n "$ns" auth can-i --list
  if [ "$v" -ge 28 ]; then
    check "auth whoami (SelfSubjectReview)" "kubernetes-admin" auth whoami
    check "auth whoami with a ServiceAccount token" "system:serviceaccount:$ns:robot" --kubeconfig "$robot" auth whoami
    check "impersonation (--as, --as-group)" "qa" --as=bob --as-group=qa auth whoami
  fi
  check "auth can-i as a ServiceAccount (--as)" "yes" -n "$ns" --as="system:serviceaccount:$ns:robot" auth can-i get pods
  fails "impersonating needs the impersonate verbs" "cannot impersonate-on:user-info:list resource \"pods\"" -n "$ns" --kubeconfig "$robot" --as=bob get pods
  fails "a ServiceAccount without rights on Roles cannot write one" "cannot create resource \"roles\"" -n "$ns" --kubeconfig "$robot" create role grab --verb=delete --resource=pods
  check "server dry run" "(server dry run)" -n "$ns" create configmap dry --from-literal=a=b --dry-run=server
  fails "dry run stored nothing" "NotFound" -n "$ns" get configmap dry -o name
  check "label" "configmap/settings labeled" -n "$ns" label configmap settings tier=gold
  check "annotate" "configmap/settings annotate" -n "$ns" annotate configmap settings note=hi
  check "selector" "settings" -n "$ns" get configmaps -l tier=gold -o name
  check "get all" "deployment.apps/web" get all -n "$ns"
  check "get all -A" "service/kubernetes" get all -A
  check "flow control (APF) objects" "catch-all" get flowschemas
  check "apply the deploy manifests" "cloud-controller-manager" apply -f docs/deploy/
  check "yaml round trip" "color: blue" -n "$ns" get configmap settings -o yaml
  "$k" -n "$ns" get configmap settings -o yaml >"$work/settings.yaml"
  check "replace from yaml" "configmap/settings replaced" replace -f "$work/settings.yaml"
  sed 's/color: blue/color: green/' "$work/settings.yaml" >"$work/settings-green.yaml"
  differs "diff (server dry run)" "+  color: green" diff -f "$work/settings-green.yaml"
  check "diff left the object alone" "blue" -n "$ns" get configmap settings -o 'jsonpath={.data.color}'
  check "explain (OpenAPI v3)" "Number of desired pods" explain deployment.spec.replicas
  check "explain a nested field" "IntOrString" explain pods.spec.containers.livenessProbe.httpGet.port
  fails "unknown field refused (strict validation)" 'unknown field "dat"' -n "$ns" create -f "$work/typo.yaml"
  check "unknown field warned (--validate=warn)" 'unknown field "dat"' -n "$ns" create -f "$work/typo.yaml" --validate=warn
  check "unknown field dropped" "typo::" -n "$ns" get configmap typo -o 'jsonpath={.metadata.name}:{.dat}:'
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
  fails "drained: the pod on it evicted" "not found" -n "$ns" get pod stray
  check "uncordon" "node/node-$v uncordoned" uncordon "node-$v"
  check "certificate approve" "approved" certificate approve "alice-$v"
  check "approved" "Approved" get csr "alice-$v" -o 'jsonpath={.status.conditions[0].type}'
  check "create a CRD" "customresourcedefinition.apiextensions.k8s.io/gadgets.example.com created" apply -f "$work/crd.yaml"
  check "CRD established" "condition met" wait --for condition=established --timeout=10s crd/gadgets.example.com
  check "create a custom object" "gadget.example.com/g1 created" -n "$ns" create -f "$work/gadget.yaml"
  check "schema default" "slow" -n "$ns" get gadget g1 -o 'jsonpath={.spec.mode}'
  check "printer columns" "REPLICAS" -n "$ns" get gadgets
  check "short name" "g1" -n "$ns" get gd -o name
  check "explain a custom resource" "GROUP:      example.com" explain gadgets.spec.mode
  fails "schema validation" "spec.replicas in body should be less than or equal to 5" -n "$ns" create -f "$work/gadget-invalid.yaml"
  fails "unknown fields refused" "bogus" -n "$ns" create -f "$work/gadget-unknown.yaml"
  check "label a custom object" "gadget.example.com/g1 labeled" -n "$ns" label gadget g1 tier=gold
  check "merge patch a custom object" "gadget.example.com/g1 patched" -n "$ns" patch gadget g1 --type=merge -p '{"spec":{"replicas":4}}'
  check "patched" "4" -n "$ns" get gadget g1 -o 'jsonpath={.spec.replicas}'
  check "delete the CRD" "deleted" delete crd gadgets.example.com
  fails "its objects went with it" "gadgets" -n "$ns" get gadgets
  check "delete namespace" "namespace \"$ns\" deleted" delete namespace "$ns"
done

echo "kubectl-versions: $passed passed, 0 failed"
