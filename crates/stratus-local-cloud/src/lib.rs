//! A cloud on one machine: the daemon a reference cloud provider calls, with
//! instances, routes and load balancers that carry real TCP and UDP traffic.
//!
//! Stratus's reference cloud-controller-manager provider
//! (`stratus-provider-local`, provider name `local`) calls this daemon's HTTP
//! API as a vendor's provider calls its cloud's. The daemon is separate from
//! the manager, so its load balancers survive a manager restart, as a real
//! cloud's do; with a state file they survive the daemon's restart too.
//!
//! - **Instances**: the machine's nodes, registered with an ID, a zone, an
//!   instance type and addresses.
//! - **Load balancers**: each gets an address of its own from a range of this
//!   machine's (`127.77.0.0/16` by default: Linux answers every `127/8`
//!   address on the loopback interface without set-up) and listens there on
//!   its TCP and UDP ports, forwarding to its backends round-robin, skipping
//!   the ones that do not answer and checking them again every second.
//!   Changing the backends takes effect on the next connection; open
//!   connections drain. The traffic is relayed by this process, or, with
//!   `Forwarding::Kernel`, moved by the kernel (an nftables DNAT rule per
//!   listener, sending new connections to the healthy backends in turn).
//! - **Routes**: pod CIDRs sent to instances. With a pod network configured
//!   (`Config::pod_network`), each is programmed into this machine's kernel
//!   as a local route on the loopback interface, so the pods of a node
//!   whose route exists can bind their addresses and be reached at them;
//!   without one they are only recorded.
//! - **Faults** for tests of the callers: latency, a call budget (429 with
//!   `Retry-After` beyond it), failed calls.
//!
//! The API is described in [`api`]. With the `daemon` feature off (it is on by
//! default) the crate is only those wire types, which the provider uses.
//!
//! ```
//! # #[cfg(feature = "daemon")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use stratus_local_cloud::{Config, LocalCloud};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! // A backend: a TCP server answering "hello".
//! let backend = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let port = backend.local_addr()?.port();
//! tokio::spawn(async move {
//!     while let Ok((mut s, _)) = backend.accept().await {
//!         let _ = s.write_all(b"hello").await;
//!     }
//! });
//!
//! // The cloud, and a load balancer in front of the backend.
//! let cloud = LocalCloud::start(Config {
//!     address_range: "127.77.250.0/24".parse()?,
//!     ..Config::default()
//! })
//! .await?;
//! let spec = format!(
//!     r#"{{"listeners":[{{"protocol":"TCP","port":8080,"backends":[{{"address":"127.0.0.1","port":{port}}}]}}]}}"#
//! );
//! let mut api = tokio::net::TcpStream::connect(cloud.addr()).await?;
//! api.write_all(format!(
//!     "PUT /v1/load-balancers/web HTTP/1.1\r\nHost: cloud\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{spec}",
//!     spec.len()
//! ).as_bytes()).await?;
//! let mut answer = String::new();
//! api.read_to_string(&mut answer).await?;
//! let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
//! let lb: stratus_local_cloud::api::LoadBalancer = serde_json::from_str(body)?;
//!
//! // Traffic through the load balancer's own address reaches the backend.
//! let mut through = tokio::net::TcpStream::connect((lb.address.as_str(), 8080)).await?;
//! let mut greeting = String::new();
//! through.read_to_string(&mut greeting).await?;
//! assert_eq!(greeting, "hello");
//! cloud.stop().await;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "daemon"))]
//! # fn main() {}
//! ```

pub mod api;
#[cfg(feature = "daemon")]
mod daemon;
#[cfg(feature = "daemon")]
mod kernel;
#[cfg(feature = "daemon")]
mod nat;
#[cfg(feature = "daemon")]
mod proxy;
mod range;

#[cfg(feature = "daemon")]
pub use daemon::{Config, Forwarding, LocalCloud, StartError};
#[cfg(feature = "daemon")]
pub use nat::NatError;
pub use range::{AddressRange, RangeError};
