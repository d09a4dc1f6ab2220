//! The virtual-kubelet command (Go: `cmd/virtual-kubelet` with its
//! provider registry): a provider registers a factory under its name, and
//! `run_main()` does the rest — Go virtual-kubelet's flags and environment
//! variables, the API client, the kubelet API with its TLS and
//! authentication, the `VirtualNode`, SIGTERM. `--metrics-addr` (Go's
//! flag, unused in Go; `127.0.0.1:10255` by default) serves the node's own
//! `/metrics` ([`crate::metrics`]), `/healthz` and `/readyz`: over plain
//! HTTP without authentication on a loopback address, over HTTPS behind
//! the kubelet API's authentication and authorization on any other (the
//! probes open); `--metrics-addr ""` turns it off.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_kubelet::app::{ProviderInit, register_pod_provider};
//! # struct MyProvider;
//! # #[async_trait::async_trait]
//! # impl stratus_pod::PodLifecycleHandler for MyProvider {
//! #     async fn create_pod(&self, _: &k8s_openapi::api::core::v1::Pod) -> stratus_pod::Result<()> { Ok(()) }
//! #     async fn update_pod(&self, _: &k8s_openapi::api::core::v1::Pod) -> stratus_pod::Result<()> { Ok(()) }
//! #     async fn delete_pod(&self, _: &k8s_openapi::api::core::v1::Pod) -> stratus_pod::Result<()> { Ok(()) }
//! #     async fn get_pod(&self, _: &str, _: &str) -> stratus_pod::Result<Option<k8s_openapi::api::core::v1::Pod>> { Ok(None) }
//! #     async fn get_pod_status(&self, _: &str, _: &str) -> stratus_pod::Result<Option<k8s_openapi::api::core::v1::PodStatus>> { Ok(None) }
//! #     async fn get_pods(&self) -> stratus_pod::Result<Vec<k8s_openapi::api::core::v1::Pod>> { Ok(vec![]) }
//! # }
//!
//! fn main() -> std::process::ExitCode {
//!     register_pod_provider("my-cloud", |init: ProviderInit| {
//!         // Read init.config_file, build the cloud's client...
//!         Ok(Arc::new(MyProvider) as _)
//!     })
//!     .expect("registered once");
//!     stratus_kubelet::app::run_main()
//! }
//! ```

mod command;
pub mod deploy;
mod options;
pub mod rbac;
mod registry;

pub use command::{Command, CommandError, NoFlags, run_main, run_with_args};
pub use options::{KubeletOptions, ListenAddr, parse_listen_addr};
pub use registry::{
    ProviderFactory, ProviderInit, Providers, ProvidersFuture, RegistryError,
    register_pod_provider, register_provider, registered_providers,
};
