#!/usr/bin/env bash
# The client scripts that run against the harness, run unchanged against the
# real control plane (`cargo xtask cluster up`, STRATUS_CONTROL_PLANE=real):
# the Helm charts (scripts/helm.sh: a server-side dry run, an install whose
# rendered flags start the sample binaries, an uninstall), every kubectl
# from 1.27 to 1.33 (scripts/kubectl-versions.sh), the
# official Python client, the official JavaScript client and the installed
# kubectl with a virtual node (scripts/kubectl-harness.sh), and the
# kube-runtime idiom suite (crates/stratus-apiserver/tests/kube_runtime.rs,
# STRATUS_TEST_KUBECONFIG). Each prints its own "N passed, 0 failed"; exits
# non-zero on the first failed script.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p xtask
xtask="${CARGO_TARGET_DIR:-target}/debug/xtask"
"$xtask" cluster down >/dev/null 2>&1 || true
work=$(mktemp -d)
"$xtask" cluster up --kubeconfig "$work/kubeconfig"
vk=
trap '[ -z "$vk" ] || kill "$vk" 2>/dev/null || true; "$xtask" cluster down; rm -rf "$work"' EXIT
# The kube-runtime idiom suite, with a MockPodProvider virtual node beside
# the control plane for exec, attach and port-forward through
# kube-apiserver; the workspace's test build (the `test` step's features), so
# nothing is compiled again.
"$xtask" cluster virtual-node vk-idioms >"$work/vk-idioms.log" 2>&1 &
vk=$!
for _ in $(seq 1 150); do
  [ "$(kubectl --kubeconfig "$work/kubeconfig" get node vk-idioms -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && break
  sleep 0.2
done
STRATUS_TEST_KUBECONFIG="$work/kubeconfig" STRATUS_TEST_MOCK_NODE=vk-idioms \
  cargo test -q --workspace --all-features --test kube_runtime
kill -INT "$vk" 2>/dev/null || true
wait "$vk" 2>/dev/null || true
vk=
export STRATUS_CONTROL_PLANE=real
# First: its install must own the ClusterRoles that kubectl-versions.sh's
# apply of docs/deploy/ would otherwise have made.
bash scripts/helm.sh
bash scripts/kubectl-versions.sh
bash scripts/python-client.sh
bash scripts/js-client.sh
bash scripts/kubectl-harness.sh
