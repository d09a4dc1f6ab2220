#!/usr/bin/env bash
# The client scripts that run against the harness, run unchanged against the
# real control plane (`cargo xtask cluster up`, STRATUS_CONTROL_PLANE=real):
# every kubectl from 1.27 to 1.33 (scripts/kubectl-versions.sh), the
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
trap '"$xtask" cluster down; rm -rf "$work"' EXIT
# The workspace's test build (the `test` step's features), so nothing is
# compiled again.
STRATUS_TEST_KUBECONFIG="$work/kubeconfig" cargo test -q --workspace --all-features --test kube_runtime
export STRATUS_CONTROL_PLANE=real
bash scripts/kubectl-versions.sh
bash scripts/python-client.sh
bash scripts/js-client.sh
bash scripts/kubectl-harness.sh
