//! The Stratus test harness.
//!
//! - [`ApiServer`] / [`TestCluster`]: an in-memory Kubernetes API server, and
//!   simulated kubelets and a scheduler around it.
//! - [`FakeCloud`]: a stateful in-memory cloud implementing every
//!   `stratus-cloud` trait, with latency, error, throttling and batching
//!   knobs and a call log.
//! - [`conformance`]: the cloud-provider conformance suite.
//! - [`MockPodProvider`] and [`pod_conformance`]: an in-memory pod provider
//!   serving every kubelet-API capability, and the pod-provider conformance
//!   suite.
//! - [`kubelet_api`]: a virtual node whose kubelet API the harness proxies
//!   to (`pods/log`, `exec`, `attach`, `portforward`, `nodes/proxy`), and
//!   [`csr_signer`]: a strict approver and signer of kubelet serving
//!   certificates.
//!
//! [`ApiServer`] is an in-memory Kubernetes API server (the
//! `stratus-apiserver` crate, re-exported as [`apiserver`]): `kube::Client`,
//! kube-runtime's `watcher` / `reflector` / `Controller`, and kubectl talk to
//! it over real HTTP. It is the cluster every Stratus test runs against and
//! the embedded default of `cargo xtask demo`. See `docs/testing.md` for what
//! it matches of kube-apiserver and where it differs.
//!
//! ```
//! use k8s_openapi::api::core::v1::Namespace;
//! use kube::api::{Api, ListParams};
//! use stratus_testing::ApiServer;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let server = ApiServer::start().await.unwrap();
//! let namespaces: Api<Namespace> = Api::all(server.client());
//! let names: Vec<String> = namespaces
//!     .list(&ListParams::default())
//!     .await
//!     .unwrap()
//!     .into_iter()
//!     .filter_map(|n| n.metadata.name)
//!     .collect();
//! assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);
//! # });
//! ```

mod call_log;
pub mod churn;
pub mod cluster;
pub mod conformance;
pub mod csr_signer;
pub mod deployments;
pub mod e2e;
pub mod endpoint_slices;
pub mod fake_cloud;
pub mod hostile;
pub mod http_status;
pub mod kubelet_api;
mod metrics_text;
pub mod mock_pod_provider;
pub mod pod_conformance;
pub mod process;

pub use cluster::{NodeSpec, SimulatedKubelet, TestCluster};
pub use fake_cloud::{CloudCall, FAKE_PROVIDER, FakeCloud, FakeInstance, FakeLoadBalancer};
pub use metrics_text::metric_sample;
pub use mock_pod_provider::{MockPodProvider, PodCall};
/// The in-memory API server, the `stratus-apiserver` crate re-exported.
pub use stratus_apiserver as apiserver;
pub use stratus_apiserver::insecure;
pub use stratus_apiserver::{
    AccessRequest, ApiServer, ApiServerBuilder, ApiServerError, CaSigner, Check, ConnectionLimits,
    ConvergeError, Fault, FaultAction, RequestRecord, ReviewUser, Verb, eventually, poll,
};
