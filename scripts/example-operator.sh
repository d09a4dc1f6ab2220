#!/usr/bin/env bash
# The example kube-rs operator (examples/kube-rs-operator), a crate with a
# workspace of its own whose only Stratus dependency is `stratus-apiserver`
# as a dev-dependency: formatted, linted and tested there as a kube-rs user
# would. It takes the workspace's Cargo.lock (the same versions, so the
# shared target directory already holds most of its dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
start=$(date +%s)
cp Cargo.lock examples/kube-rs-operator/Cargo.lock
cd examples/kube-rs-operator
cargo fmt --check
cargo clippy --all-targets -- -D warnings
cargo test
echo "example-operator: built and tested outside the workspace in $(( $(date +%s) - start )) s"
