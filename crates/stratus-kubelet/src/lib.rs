//! The virtual-node controllers of Stratus: a vendor implements the
//! `stratus-pod` traits, and these controllers register the Node, keep its
//! status and Lease, run the pods bound to it and serve its kubelet API.
//!
//! ```
//! use stratus_kubelet::node::{NodeConfig, node_template};
//!
//! let mut config = NodeConfig::new("vk-acme-0", "acme");
//! config.internal_ip = Some("10.0.0.7".into());
//! config.capacity.insert("pods".into(), "5000".into());
//! let node = node_template(&config);
//! let status = node.status.unwrap();
//! assert_eq!(status.capacity.unwrap()["pods"].0, "5000");
//! assert_eq!(status.addresses.unwrap()[0].address, "10.0.0.7");
//! ```
//!
//! - [`api`]: the kubelet API (container logs, exec, attach, port-forward
//!   over WebSocket and SPDY, stats summary, resource metrics, pods) with the
//!   kubelet's authentication and authorization, and serving certificates
//!   from files, a CSR, or self-signed.
//! - [`metrics`]: queue, provider-call, phase and status-write metrics.
//! - [`node`]: the Node (create or adopt, status heartbeats keeping others'
//!   conditions, re-registration after a deletion) and its Lease in
//!   `kube-node-lease`, gated by the provider's ping.
//! - [`pods`]: the pods bound to the node, created, updated and deleted in
//!   the provider, their status written back from its notifications (or
//!   polls), dangling provider pods cleaned up.
//! - [`virtual_node`]: [`VirtualNode`], both controllers of one node from a
//!   provider, built then run; several per process.
//! - [`resources`]: Secrets, ConfigMaps and Services for env resolution and
//!   the provider, read on demand per namespace with a TTL cache.
//! - [`references`]: which ConfigMaps and Secrets a pod uses; a provider
//!   with the `resource_changes` hook is told when one of them changes
//!   (metadata-only watches of the namespaces that need it).
//! - [`streams`]: copying between a provider's Tokio I/O and the kubelet
//!   API's exec, attach and port-forward streams.
//! - [`app`]: the virtual-kubelet command (Go's `virtual-kubelet`): the
//!   provider registry, Go's flags and environment variables, the API
//!   client, the kubelet API with its TLS and authentication, the
//!   [`VirtualNode`] and SIGTERM, from `run_main()`.

pub mod api;
pub mod app;
pub mod metrics;
pub mod node;
pub mod pods;
pub mod references;
pub mod resources;
pub mod streams;
pub mod virtual_node;

pub use virtual_node::{VirtualNode, VirtualNodeBuilder, VirtualNodeError};
