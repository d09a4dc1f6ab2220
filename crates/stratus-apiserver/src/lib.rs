//! An in-memory Kubernetes API server that `kube::Client`, kube-runtime,
//! kubectl and the official Python and JavaScript clients talk to over
//! real HTTP (or HTTPS): JSON and protobuf, watch, server-side apply, the
//! built-in API groups, CustomResourceDefinitions, optional RBAC, and
//! faults to inject. Add it alone as a dev-dependency of any kube-rs
//! project; it depends on no other Stratus crate except three small
//! leaves: the shared stream protocols of `stratus-httpstream`, the
//! certificate authority of `stratus-pki` and the accept loop of
//! `stratus-accept`.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//! use stratus_apiserver::ApiServer;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let server = ApiServer::start().await.unwrap();
//! let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! let created = api.create(&PostParams::default(), &cm).await.unwrap();
//! assert!(created.metadata.uid.is_some());
//! assert_eq!(api.get("settings").await.unwrap().metadata.name.as_deref(), Some("settings"));
//! server.shutdown().await;
//! # });
//! ```
//!
//! [`protobuf`] is the wire-format codec on its own: Kubernetes' protobuf
//! encoding (`application/vnd.kubernetes.protobuf`) for every built-in
//! type, translated to and from the JSON form of the same object.
//!
//! See `docs/testing.md` in the Stratus repository for what the server
//! matches of kube-apiserver and where it differs.

mod admission;
mod auth;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod bench_support;
mod body;
mod controls;
pub mod converge;
mod error;
mod fields;
mod flowcontrol;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod fuzz_support;
pub mod insecure;
mod kubelet_client;
mod meta;
mod openapi;
pub mod protobuf;
mod registry;
mod resources;
mod rest;
mod selectors;
mod serving;
mod state;
mod storage;
mod tables;
mod version;

pub use controls::{AccessRequest, Fault, FaultAction, RequestRecord, ReviewUser, Verb};
pub use converge::{Check, ConvergeError, eventually, poll};
pub use kubelet_client::KUBELET_CLIENT_USER;
pub use serving::server::{ApiServer, ApiServerBuilder, ApiServerError, CaSigner};
/// The limits on the server's connections ([`ApiServerBuilder::connections`]).
pub use stratus_accept::ConnectionLimits;
