//! Shared controller machinery for Stratus.
//!
//! - [`leader_election`]: Lease-based leader election with client-go's
//!   semantics, interoperable with Go managers on the same Lease.
//!
//! This crate grows with the controllers: work queues, event recording,
//! client setup, the admin server and metrics are being added.

pub mod leader_election;

pub use leader_election::{ElectionConfig, ElectionError, LeaderElector, Leadership, LeaseLock};
