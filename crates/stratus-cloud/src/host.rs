//! What hosts a provider (the manager, a test harness) uses to give it a
//! context: a provider author never needs this module. The manager keeps
//! the [`ShutdownTrigger`] of the [`ShutdownSignal`](crate::ShutdownSignal)
//! in a provider's [`InitContext`](crate::InitContext), and runs the tasks a
//! provider spawns through its [`Spawn`].
//!
//! ```
//! use std::sync::Arc;
//! use stratus_cloud::host::{BoxTask, Spawn};
//! use stratus_cloud::{InitContext, ShutdownSignal};
//!
//! /// Runs nothing: a harness that needs no background tasks.
//! struct Discard;
//! impl Spawn for Discard {
//!     fn spawn(&self, _name: &str, _task: BoxTask) {}
//! }
//!
//! let (trigger, signal) = ShutdownSignal::new();
//! let context = InitContext::new("kubernetes", signal, Arc::new(Discard));
//! assert!(!context.shutdown().is_triggered());
//! trigger.trigger();
//! assert!(context.shutdown().is_triggered());
//! ```

pub use crate::provider::{BoxTask, Spawn};
pub use crate::shutdown::{ShutdownTrigger, Wait};
