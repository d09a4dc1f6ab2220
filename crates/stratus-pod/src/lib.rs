//! Pod-lifecycle interfaces for Stratus virtual kubelets.
//!
//! A vendor implements [`PodLifecycleHandler`] (and, optionally, the
//! capabilities it exposes: [`PodNotifier`], [`ContainerLogs`],
//! [`ContainerExec`], [`ContainerAttach`], [`PortForward`], [`StatsSummary`],
//! [`ResourceMetrics`]) plus a [`NodeProvider`], and hands them to the
//! Stratus virtual node, which registers the Node, keeps its lease, runs the
//! pods bound to it on the provider, reports their status and serves the
//! kubelet API. This crate is all a provider crate needs: no Kubernetes
//! client, no async runtime, no HTTP stack.
//!
//! Providers never talk to the API server: Secrets, ConfigMaps and Services
//! reach them through [`PodResources`], and [`env::resolve_pod_env`] resolves a
//! pod's environment and downward API with them.
//!
//! # Example
//!
//! A toy provider that "runs" pods in memory and pushes their status:
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Mutex;
//! use async_trait::async_trait;
//! use k8s_openapi::api::core::v1::{Pod, PodStatus};
//! use stratus_pod::{PodLifecycleHandler, PodNotifier, PodStatusCallback, Result};
//!
//! #[derive(Default)]
//! struct ToyBackend {
//!     pods: Mutex<BTreeMap<(String, String), Pod>>,
//!     callback: Mutex<Option<PodStatusCallback>>,
//! }
//!
//! fn key(pod: &Pod) -> (String, String) {
//!     (pod.metadata.namespace.clone().unwrap_or_default(), pod.metadata.name.clone().unwrap_or_default())
//! }
//!
//! #[async_trait]
//! impl PodLifecycleHandler for ToyBackend {
//!     async fn create_pod(&self, pod: &Pod) -> Result<()> {
//!         let mut running = pod.clone();
//!         running.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
//!         self.pods.lock().unwrap().insert(key(pod), running.clone());
//!         if let Some(cb) = self.callback.lock().unwrap().as_ref() {
//!             cb.notify(running);
//!         }
//!         Ok(())
//!     }
//!     async fn update_pod(&self, pod: &Pod) -> Result<()> {
//!         self.create_pod(pod).await
//!     }
//!     async fn delete_pod(&self, pod: &Pod) -> Result<()> {
//!         // This pod only: a successor of the same name (another UID) stays.
//!         let mut pods = self.pods.lock().unwrap();
//!         if pods.get(&key(pod)).is_some_and(|held| held.metadata.uid == pod.metadata.uid) {
//!             pods.remove(&key(pod));
//!         }
//!         Ok(())
//!     }
//!     async fn get_pod(&self, ns: &str, name: &str) -> Result<Option<Pod>> {
//!         Ok(self.pods.lock().unwrap().get(&(ns.into(), name.into())).cloned())
//!     }
//!     async fn get_pod_status(&self, ns: &str, name: &str) -> Result<Option<PodStatus>> {
//!         Ok(self.get_pod(ns, name).await?.and_then(|p| p.status))
//!     }
//!     async fn get_pods(&self) -> Result<Vec<Pod>> {
//!         Ok(self.pods.lock().unwrap().values().cloned().collect())
//!     }
//!     fn notifier(&self) -> Option<&dyn PodNotifier> {
//!         Some(self)
//!     }
//! }
//!
//! impl PodNotifier for ToyBackend {
//!     fn notify_pods(&self, callback: PodStatusCallback) {
//!         *self.callback.lock().unwrap() = Some(callback);
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let backend = ToyBackend::default();
//! let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
//! let sink = seen.clone();
//! backend.notifier().unwrap().notify_pods(PodStatusCallback::new(move |pod| {
//!     sink.lock().unwrap().push(pod.status.and_then(|s| s.phase));
//! }));
//!
//! let mut pod = Pod::default();
//! pod.metadata.namespace = Some("default".into());
//! pod.metadata.name = Some("web".into());
//! backend.create_pod(&pod).await.unwrap();
//! assert_eq!(*seen.lock().unwrap(), vec![Some("Running".to_string())]);
//! assert_eq!(backend.get_pods().await.unwrap().len(), 1);
//! assert!(backend.container_logs().is_none()); // the kubelet API answers 501
//! backend.delete_pod(&pod).await.unwrap();
//! backend.delete_pod(&pod).await.unwrap(); // repeated deletes are fine
//! # });
//! ```
//!
//! # Features
//!
//! - `mock`: [mockall](https://docs.rs/mockall) mocks of every trait, in
//!   `stratus_pod::mock`.

mod changes;
mod container;
pub mod env;
mod error;
mod exec;
mod lifecycle;
mod logs;
mod metrics;
#[cfg(feature = "mock")]
pub mod mock;
mod node;
mod notifier;
mod port_forward;
mod resources;
mod stats;
mod streams;

pub use changes::{ResourceChange, ResourceChanges, ResourceKind};
pub use container::ContainerRef;
pub use error::{PodError, PodErrorKind, Result, classify};
pub use exec::{ContainerAttach, ContainerExec, ExitCode};
pub use lifecycle::{PodAddresses, PodLifecycleHandler};
pub use logs::{ContainerLogOptions, ContainerLogs};
pub use metrics::{ResourceMetrics, render_resource_metrics};
pub use node::{NaiveNodeProvider, NodeProvider, NodeStatusCallback};
pub use notifier::{PodNotifier, PodStatusCallback};
pub use port_forward::{PortForward, PortForwardStream};
pub use resources::{InMemoryResources, PodResources};
pub use stats::{
    AcceleratorStats, ContainerStats, CpuStats, FsStats, InterfaceStats, IoStats, MemoryStats,
    NetworkStats, NodeStats, PodReference, PodStats, ProcessStats, PsiData, PsiStats, PvcReference,
    RlimitStats, RuntimeStats, StatsSummary, Summary, SwapStats, UserDefinedMetric,
    UserDefinedMetricType, VolumeHealthStats, VolumeStats,
};
pub use streams::{
    AttachIo, ByteSink, ByteStream, OutputStream, ResizeStream, TermSize, VecSink,
    stream_from_chunks,
};
