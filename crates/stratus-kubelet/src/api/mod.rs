//! The kubelet API of a virtual node: the HTTPS endpoint the API server
//! (and metrics-server, and anyone allowed) calls for `kubectl logs`,
//! `exec`, `attach`, `port-forward`, `top` and the node's pod lists.
//!
//! | path | methods | provider capability |
//! |---|---|---|
//! | `/containerLogs/{ns}/{pod}/{container}` | GET | [`ContainerLogs`](stratus_pod::ContainerLogs), streamed |
//! | `/exec/{ns}/{pod}[/{uid}]/{container}` | GET, POST (WebSocket) | [`ContainerExec`](stratus_pod::ContainerExec) |
//! | `/attach/{ns}/{pod}[/{uid}]/{container}` | GET, POST (WebSocket) | [`ContainerAttach`](stratus_pod::ContainerAttach) |
//! | `/portForward/{ns}/{pod}[/{uid}]` | GET, POST (WebSocket) | [`PortForward`](stratus_pod::PortForward) |
//! | `/stats/summary` | GET | [`StatsSummary`](stratus_pod::StatsSummary), JSON (an empty node name is filled in) |
//! | `/metrics/resource` | GET | [`ResourceMetrics`](stratus_pod::ResourceMetrics), Prometheus text |
//! | `/pods` | GET | the API server's pods bound to the node |
//! | `/runningpods/` | GET | the provider's `get_pods` |
//! | `/healthz` | GET | — |
//!
//! A capability the provider lacks answers 501; a bad parameter 400; a
//! provider error the HTTP status of its kind (404, 400, 409, 503, 500).
//! Every request is authenticated (client certificate or TokenReview)
//! and authorized (SubjectAccessReview on `nodes/<subresource>` with the
//! kubelet's verb and subresource mapping) unless the server was built
//! with [`ApiAuth::AllowAll`] explicitly.
//!
//! Exec, attach and port-forward speak the WebSocket channel protocols
//! (`v5.channel.k8s.io` with its close signal, `v4.channel.k8s.io`, the
//! base64 variants and the original `channel.k8s.io`), and SPDY/3.1 as
//! kube-apiserver's proxy and kubectl without WebSockets use it
//! ([`spdy`]: the remote-command versions up to `v5.channel.k8s.io`, and
//! `portforward.k8s.io`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_kubelet::api::{ApiAuth, KubeletApi, KubeletServer};
//! use stratus_runtime::auth::{DelegatedAuth, DelegatedAuthConfig};
//!
//! # async fn run(client: kube::Client, provider: Arc<dyn stratus_pod::PodLifecycleHandler>, client_ca: String) -> Result<(), Box<dyn std::error::Error>> {
//! let auth = DelegatedAuth::new(client.clone(), DelegatedAuthConfig::kubelet());
//! let api = KubeletApi::new("vk-0", provider, client, ApiAuth::delegated(auth));
//! let server = KubeletServer::builder(api)
//!     .bind("0.0.0.0:10250".parse()?)
//!     .client_ca(client_ca)
//!     .start()
//!     .await?;
//! println!("kubelet API on {}", server.local_addr());
//! let (_stop_tx, stop) = tokio::sync::watch::channel(false);
//! server.run(stop).await;
//! # Ok(()) }
//! ```

mod params;
mod port_forward;
mod remote_command;
mod route;
mod server;
pub mod serving_certificate;
mod session;
pub mod spdy;

use stratus_httpstream::wsstream as channel;

pub use params::{
    MAX_PORTS, ParamError, Query, StreamOptions, forward_ports, log_options, stream_options,
};
pub use route::{Route, RouteError, kubelet_attributes, subresource_of};
pub use server::{
    ApiAuth, Body, FORWARD_NOT_IMPLEMENTED, KubeletApi, KubeletServer, KubeletServerBuilder,
    KubeletServerError, NOT_DECLARED,
};
pub use stratus_httpstream::wsstream::{
    ChannelProtocol, Frame, FrameError, PORT_FORWARD_PROTOCOLS, REMOTE_COMMAND_PROTOCOLS, channels,
};
