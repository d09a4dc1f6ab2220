//! Where the control plane lives: its components, addresses and
//! directories.

use std::path::PathBuf;

/// The components, in start order.
pub(crate) const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The address added to the loopback device for nodes' kubelet APIs: from
/// 198.18.0.0/15, the range set aside for tests of network equipment
/// (RFC 2544), so it names no host anywhere; it lives on this machine's
/// loopback device only while the cluster is up.
pub const DEFAULT_NODE_ADDRESS: &str = "198.18.83.1";

/// The Service IP range (kubeadm's default).
pub(crate) const SERVICE_CIDR: &str = "10.96.0.0/12";

/// The Go module that pins the control plane.
pub(crate) fn go_module() -> PathBuf {
    crate::workspace_root().join("tools/kubernetes")
}

/// `<target>/kubernetes`.
pub(crate) fn home() -> PathBuf {
    let root = crate::workspace_root();
    let root = root.canonicalize().unwrap_or(root);
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    target.join("kubernetes")
}

/// Where the binaries are built.
pub(crate) fn bin_dir() -> PathBuf {
    home().join("bin")
}

/// The running cluster's directory.
pub fn cluster_dir() -> PathBuf {
    home().join("cluster")
}

/// The user the API server's kubelet client certificate names.
pub(crate) const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";

pub(crate) fn binary(name: &str) -> PathBuf {
    bin_dir().join(name)
}
