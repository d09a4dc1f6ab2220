//! Cloud-provider interfaces for Stratus cloud controller managers.
//!
//! A vendor implements [`CloudProvider`] and the capability traits its cloud
//! supports ([`InstancesV2`], [`LoadBalancer`], [`Routes`], ...), registers a
//! factory by name, and hands the name to the Stratus manager, which runs the
//! generic controllers against it. This crate is all a provider crate needs:
//! it pulls in no Kubernetes client, no async runtime and no HTTP stack.
//!
//! The traits match the interfaces of the Go library `k8s.io/cloud-provider`
//! that its controllers call, method for method (`Interface`,
//! `LoadBalancer`, `InstancesV2`, `Instances`, `Zones`, `Routes`,
//! `Clusters`). Two Go interfaces have no trait: `PVLabeler`, used only by
//! the PersistentVolumeLabel admission plugin that Kubernetes removed, and
//! `InformerUser`, replaced by informers on the client the
//! [`InitContext`] carries. Beyond Go the traits add typed errors that survive wrapping ([`CloudError`]),
//! batched instance lookups ([`InstancesBatch`]), a single-answer instance
//! state ([`InstanceState`]) and `loadBalancerClass` support
//! ([`LoadBalancerClasses`]).
//!
//! # Example
//!
//! A toy provider with instances and load balancers, called as the
//! manager's controllers call it:
//!
//! ```
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service};
//! use stratus_cloud::{
//!     CloudError, CloudProvider, InstanceMetadata, InstancesV2, LoadBalancer, ProviderId, Result,
//! };
//!
//! struct ToyCloud;
//!
//! #[async_trait]
//! impl InstancesV2 for ToyCloud {
//!     async fn instance_exists(&self, node: &Node) -> Result<bool> {
//!         Ok(node.metadata.name.as_deref() != Some("gone"))
//!     }
//!     async fn instance_shutdown(&self, _node: &Node) -> Result<bool> {
//!         Ok(false)
//!     }
//!     async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
//!         let name = node.metadata.name.clone().unwrap_or_default();
//!         Ok(Some(InstanceMetadata {
//!             provider_id: ProviderId::new("toy", name)?.to_string(),
//!             instance_type: "toy.small".into(),
//!             node_addresses: vec![NodeAddress { type_: "InternalIP".into(), address: "10.0.0.1".into() }],
//!             zone: "toy-1a".into(),
//!             region: "toy-1".into(),
//!             ..Default::default()
//!         }))
//!     }
//! }
//!
//! #[async_trait]
//! impl LoadBalancer for ToyCloud {
//!     async fn get_load_balancer(&self, _cluster: &str, _svc: &Service) -> Result<Option<LoadBalancerStatus>> {
//!         Ok(None)
//!     }
//!     async fn ensure_load_balancer(&self, _cluster: &str, _svc: &Service, nodes: &[Node]) -> Result<LoadBalancerStatus> {
//!         if nodes.is_empty() {
//!             return Err(CloudError::invalid_input("no backends"));
//!         }
//!         Ok(LoadBalancerStatus {
//!             ingress: Some(vec![LoadBalancerIngress { ip: Some("203.0.113.10".into()), ..Default::default() }]),
//!         })
//!     }
//!     async fn update_load_balancer(&self, _cluster: &str, _svc: &Service, _nodes: &[Node]) -> Result<()> {
//!         Ok(())
//!     }
//!     async fn ensure_load_balancer_deleted(&self, _cluster: &str, _svc: &Service) -> Result<()> {
//!         Ok(())
//!     }
//! }
//!
//! impl CloudProvider for ToyCloud {
//!     fn provider_name(&self) -> &str { "toy" }
//!     fn instances_v2(&self) -> Option<&dyn InstancesV2> { Some(self) }
//!     fn load_balancer(&self) -> Option<&dyn LoadBalancer> { Some(self) }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! // What a factory registered with the manager returns.
//! let cloud: Arc<dyn CloudProvider> = Arc::new(ToyCloud);
//! assert_eq!(cloud.provider_name(), "toy");
//!
//! let mut node = Node::default();
//! node.metadata.name = Some("node-1".into());
//! let instances = cloud.instances_v2().expect("instances");
//! let meta = instances.instance_metadata(&node).await?.expect("metadata");
//! assert_eq!(meta.provider_id, "toy://node-1");
//!
//! let lb = cloud.load_balancer().expect("load balancers");
//! let err = lb.ensure_load_balancer("kubernetes", &Service::default(), &[]).await.unwrap_err();
//! assert!(err.is_invalid_input());
//! let status = lb.ensure_load_balancer("kubernetes", &Service::default(), &[node]).await?;
//! assert_eq!(status.ingress.unwrap()[0].ip.as_deref(), Some("203.0.113.10"));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Features
//!
//! - `mock`: [mockall](https://docs.rs/mockall) mocks of every trait, in
//!   `stratus_cloud::mock`.
//!
//! # Kubernetes version
//!
//! This crate uses `k8s-openapi` types without choosing a Kubernetes version;
//! the final binary enables one (for example `k8s-openapi/latest`).

mod clusters;
mod error;
pub mod helpers;
pub mod host;
mod instances;
mod instances_legacy;
pub mod legacy;
mod load_balancer;
#[cfg(feature = "mock")]
pub mod mock;
pub mod names;
mod provider;
mod routes;
mod shutdown;
mod zones;

pub use clusters::Clusters;
pub use error::{CloudError, CloudErrorKind, Result, classify};
pub use helpers::{ProviderId, ProviderIdError, default_load_balancer_name};
pub use instances::{
    InstanceMetadata, InstanceState, InstancesBatch, InstancesV2, check_batch_len,
};
pub use instances_legacy::Instances;
pub use load_balancer::{LoadBalancer, LoadBalancerClasses};
pub use provider::{CloudProvider, Extensions, InitContext};
pub use routes::{Route, Routes};
pub use shutdown::ShutdownSignal;
pub use zones::{Zone, Zones};
