#!/usr/bin/env bash
# The end-to-end runner against the demo cluster: `cargo xtask demo
# --keep-running` in the background (a cloud controller manager with the
# local cloud's provider; the virtual nodes vk-demo (MockPodProvider), vk-process (real
# processes) and vk-offload (pods offloaded to a second API server)), then
# `cargo xtask e2e` with the cloud-controller-manager checks and the
# virtual-node checks, as a vendor runs them against a real cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
kubeconfig="$work/kubeconfig"
log="$work/demo.log"
cargo build -q -p xtask
cargo xtask demo --keep-running --kubeconfig "$kubeconfig" >"$log" 2>&1 &
demo=$!
cleanup() {
  kill -INT "$demo" 2>/dev/null || true
  wait "$demo" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 180); do
  grep -q "serving until Ctrl-C" "$log" 2>/dev/null && break
  if ! kill -0 "$demo" 2>/dev/null; then
    cat "$log"; echo "e2e-demo: the demo stopped before it converged"; exit 1
  fi
  sleep 1
done
grep -q "serving until Ctrl-C" "$log" || { cat "$log"; echo "e2e-demo: the demo did not converge"; exit 1; }
cargo xtask e2e --kubeconfig "$kubeconfig" --ccm --virtual-node vk-demo --virtual-node vk-process --virtual-node vk-offload --junit target/e2e-demo.junit.xml
