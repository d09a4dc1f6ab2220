//! Shared controller machinery for Stratus.
//!
//! - [`leader_election`]: Lease-based leader election with client-go's
//!   semantics, interoperable with Go managers on the same Lease.
//! - [`events`]: `core/v1` Event recording with Go's component names.
//! - [`workqueue`]: a work queue with client-go's dedup, backoff and
//!   bounded-worker semantics (the overall bucket applies to retries only).
//!
//! This crate grows with the controllers: client setup, the admin server and
//! metrics are being added.

pub mod events;
pub mod leader_election;
pub mod workqueue;

pub use leader_election::{ElectionConfig, ElectionError, LeaderElector, Leadership, LeaseLock};
