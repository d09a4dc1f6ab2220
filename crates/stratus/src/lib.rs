//! Stratus: build Kubernetes cloud controller managers and virtual kubelets
//! in Rust. This crate re-exports the Stratus crates behind features, as
//! kube-rs's `kube` facade does:
//!
//! | module | crate | feature |
//! |---|---|---|
//! | [`cloud`] | `stratus-cloud`: the cloud-provider interfaces | always |
//! | `ccm` | `stratus-ccm`: the controllers and the manager command | `ccm` (default) |
//! | `runtime` | `stratus-runtime`: work queues, leader election, metrics, admin server | `ccm` or `kubelet` |
//! | `pod` | `stratus-pod`: the pod-provider interfaces | `kubelet` |
//! | `kubelet` | `stratus-kubelet`: the virtual node (Node, Lease, pods) | `kubelet` |
//! | `testing` | `stratus-testing`: API server, FakeCloud, conformance | `testing` |
//! | `cloud::mock`, `pod::mock` | mockall mocks of the interfaces | `mock` |
//!
//! A cloud controller manager's whole `main`:
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus::ccm::app::register_cloud_provider;
//! use stratus::cloud::CloudProvider;
//!
//! /// The vendor's provider; it implements the capability traits its cloud
//! /// has and returns them from the matching accessors.
//! struct MyCloud;
//!
//! impl CloudProvider for MyCloud {
//!     fn provider_name(&self) -> &str {
//!         "my-cloud"
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     register_cloud_provider("my-cloud", |_config| Ok(Arc::new(MyCloud) as Arc<dyn CloudProvider>))
//!         .expect("registered once");
//!     stratus::ccm::app::run_main()
//! }
//! ```
//!
//! The names in this crate are checked at compile time:
//!
//! ```
//! assert_eq!(stratus::cloud::names::taints::UNINITIALIZED, "node.cloudprovider.kubernetes.io/uninitialized");
//! ```

pub use stratus_cloud as cloud;

#[cfg(feature = "ccm")]
pub use stratus_ccm as ccm;

#[cfg(any(feature = "ccm", feature = "kubelet"))]
pub use stratus_runtime as runtime;

#[cfg(feature = "kubelet")]
pub use stratus_pod as pod;

#[cfg(feature = "kubelet")]
pub use stratus_kubelet as kubelet;

#[cfg(feature = "testing")]
pub use stratus_testing as testing;
