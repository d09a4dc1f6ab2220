#!/usr/bin/env bash
# Generate both kinds of provider crate into a temporary directory outside the
# workspace, then lint and test each there as a vendor would (path
# dependencies on this checkout), so the templates cannot rot: the manager
# with `cargo xtask new-provider`, the virtual kubelet with `cargo stratus new`
# from `cargo install --path cargo-stratus`, as a vendor installs it; each
# crate's Helm chart linted and rendered with Helm built from its module. The
# builds share the workspace's target directory.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
# Run from `cargo xtask ci`, this script inherits the workspace's
# `.cargo/config.toml` [env] (K8S_OPENAPI_ENABLED_VERSION=1.37); a crate
# outside the workspace never sees it, and with a `v1_34` feature it would
# enable two versions.
unset K8S_OPENAPI_ENABLED_VERSION

# Helm (built from tools/helm/go.mod), for the generated crates' charts.
# shellcheck source=lib/helm-build.sh
source scripts/lib/helm-build.sh
build_helm

# `cargo stratus`, installed where only this script finds it (a debug build
# from the shared target directory, with the workspace's lock file).
start=$(date +%s)
cargo install --quiet --locked --debug --path cargo-stratus --root "$work/cargo-home"
export PATH="$work/cargo-home/bin:$PATH"
echo "generated-providers: cargo-stratus installed in $(( $(date +%s) - start )) s"

# The manager on the newest Kubernetes minor (`latest`), the virtual kubelet
# on the oldest Stratus supports (`cargo_stratus::KUBERNETES_MINORS`): its
# tests then run the whole stack, the harness included, on 1.34's types.
for kind in ccm virtual-kubelet; do
  start=$(date +%s)
  if [ "$kind" = virtual-kubelet ]; then
    kubernetes=(--kubernetes 1.34)
    cargo stratus new --kind "$kind" --name acme --path "$work/$kind" --stratus-path "$repo" "${kubernetes[@]}"
  else
    kubernetes=()
    cargo xtask new-provider --kind "$kind" --name acme --path "$work/$kind"
  fi
  (
    cd "$work/$kind"
    cargo fmt --check
    cargo clippy --all-targets -- -D warnings
    cargo test
    # Its chart: lint clean, and rendered with a Deployment of its image.
    "$helm_bin" lint --strict chart
    "$helm_bin" template acme chart -n kube-system >"$work/$kind-chart.yaml"
    grep -q "image: \"registry.example.com/acme-" "$work/$kind-chart.yaml" || {
      echo "generated-providers: the $kind chart renders no Deployment of its image" >&2
      cat "$work/$kind-chart.yaml" >&2
      exit 1
    }
  )
  echo "generated-providers: $kind (${kubernetes[*]:-latest}) built and tested outside the workspace in $(( $(date +%s) - start )) s"
done
