//! A virtual-kubelet provider that offloads pods to another Kubernetes
//! cluster, as Liqo, Tensile Kube and Admiralty do: each pod bound to the
//! virtual node runs as a pod in the remote cluster, and `kubectl logs`,
//! `exec`, `attach` and `port-forward` on the home pod reach the remote
//! container.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_kubelet::node::NodeConfig;
//! use stratus_kubelet::virtual_node::VirtualNode;
//! use stratus_provider_kubernetes::{KubernetesProvider, OffloadConfig, RemoteNode, PROVIDER_NAME};
//!
//! # async fn run(home: kube::Client, remote: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let config = OffloadConfig::from_yaml("namespaces: {mode: prefix, value: burst-}")?;
//! let provider = KubernetesProvider::builder(remote.clone(), "vk-burst")
//!     .config(config.clone())
//!     .start();
//! let node = VirtualNode::builder(home, NodeConfig::new("vk-burst", PROVIDER_NAME))
//!     .provider(Arc::new(provider))
//!     .node_provider(Arc::new(RemoteNode::connect(remote, "vk-burst", &config).await?))
//!     .build()?;
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! node.run(stopped).await?;
//! # Ok(()) }
//! ```
//!
//! What happens to a pod:
//! - **Mapping**: the remote pod lives in the namespace
//!   [`NamespaceMapping`] gives (created when missing), named
//!   [`naming::remote_pod_name`] from the home namespace, name and UID, and
//!   labelled with the node and the home UID (annotations hold the home
//!   namespace and name). A restarted provider lists the remote pods with
//!   its label and adopts them; nothing is created twice.
//! - **Rewritten**: see the `translate` rules in
//!   `docs/providers/kubernetes.md` (node name, scheduler, priority, the
//!   virtual node's toleration, the home ServiceAccount token, host
//!   network, node placement by [`PlacementPolicy`], claims by
//!   [`OffloadConfig::persistent_volume_claims`]).
//! - **Dependencies**: ConfigMaps and Secrets the pod's spec names
//!   (volumes, projected sources, image pull secrets, and env references
//!   when the node does not resolve the environment itself) are copied into
//!   the remote namespace first, rewritten when the home object changes
//!   (the node's resource-change hook), and deleted when no remote pod of
//!   the node uses them. A remote object of the same name the node did not
//!   make is used as it is, never touched.
//! - **Status**: one watch on the remote pods with the node's label, in
//!   every namespace, resumed after drops and listed again after 410; each
//!   change is pushed to the home pod through the notifier.
//! - **Deletion**: the home deletion's grace period goes to the remote
//!   delete (with the remote UID as precondition: the node never deletes a
//!   pod it did not make); the home pod ends when the remote one is gone.
//!   A remote pod deleted or evicted by someone else ends the home pod
//!   `Failed` with reason `Evicted` or [`REMOTE_POD_DELETED`].
//! - **Kubelet API**: logs, exec, attach and port-forward proxied to the
//!   remote API server; the stats summary read through its node proxy.
//!
//! The node side ([`RemoteNode`]) reports the remote cluster's free
//! capacity and fails its ping while the remote API does not answer.

mod command;
mod config;
mod dependencies;
pub mod naming;
mod node;
mod provider;
pub mod rbac;
mod remote_client;
mod remote_events;
mod remote_watch;
mod stats;
mod streams;
mod translate;

pub use command::providers_from_init;
pub use config::{
    Caps, ConfigError, NamespaceMapping, OffloadConfig, PlacementPolicy, SecretKeyRef,
};
pub use node::{Capacity, RemoteNode, remote_capacity};
pub use provider::{
    KubernetesProvider, KubernetesProviderBuilder, OFFLOADED_POD_DELETED, REMOTE_POD_DELETED,
};
pub use remote_client::{RemoteClientError, remote_client};

/// The provider name: nodes carry the taint
/// `virtual-kubelet.io/provider=kubernetes:NoSchedule`.
pub const PROVIDER_NAME: &str = "kubernetes";
