# Sourced by the scripts that run Helm. `build_helm` builds Helm from
# tools/helm/go.mod into $CARGO_TARGET_DIR/helm/helm (target/ by default)
# unless the binary is newer than go.mod and go.sum, with the version
# strings upstream's Makefile sets (Helm's own, and the Kubernetes minor of
# its client-go, which `helm template` assumes without a cluster), and sets
# `helm_bin` to it. Run from the workspace root.

build_helm() {
  helm_bin="${CARGO_TARGET_DIR:-$(pwd)/target}/helm/helm"
  case "$helm_bin" in /*) ;; *) helm_bin="$(pwd)/$helm_bin" ;; esac
  if [ -x "$helm_bin" ] && [ "$helm_bin" -nt tools/helm/go.mod ] && [ "$helm_bin" -nt tools/helm/go.sum ]; then
    return 0
  fi
  command -v go >/dev/null || { echo "helm: Go is not installed" >&2; return 1; }
  local helm_version k8s_minor start
  helm_version=$(awk '$1 == "helm.sh/helm/v3" {print $2}' tools/helm/go.mod)
  k8s_minor=$(awk '$1 == "k8s.io/client-go" {split($2, v, "."); print v[2]}' tools/helm/go.mod)
  start=$(date +%s)
  (cd tools/helm && GOFLAGS=-mod=mod go build -trimpath -o "$helm_bin" -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$helm_version \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor" \
    helm.sh/helm/v3/cmd/helm)
  echo "helm: built $helm_version in $(( $(date +%s) - start )) s"
}
