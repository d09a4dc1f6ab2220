//! Shared controller machinery for Stratus.
//!
//! - [`client`]: a `kube::Client` with a QPS / burst budget and a user agent.
//! - [`events`]: `core/v1` Event recording with Go's component names.
//! - [`health`]: named health checks, one per controller, rendered as
//!   `/healthz` answers.
//! - [`leader_election`]: Lease-based leader election with client-go's
//!   semantics, interoperable with Go managers on the same Lease.
//! - [`metrics`]: prometheus-client families for work queues (client-go's
//!   `workqueue_*` names), reconciles and cloud calls.
//! - [`workqueue`]: a work queue with client-go's dedup, backoff and
//!   bounded-worker semantics (the overall bucket applies to retries only).
//!
//! The admin server that serves the health checks and metrics comes with the
//! manager command.

pub mod client;
pub mod events;
pub mod health;
pub mod leader_election;
pub mod metrics;
pub mod workqueue;

pub use leader_election::{ElectionConfig, ElectionError, LeaderElector, Leadership, LeaseLock};
