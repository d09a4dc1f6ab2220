//! A started manager, and the spawner of its provider's tasks.

use std::net::SocketAddr;

use stratus_cloud::host::{BoxTask, Spawn};
use tokio::task::JoinHandle;

use super::ManagerError;

/// A started manager.
#[derive(Debug)]
pub struct RunningManager {
    pub(super) admin_addr: Option<SocketAddr>,
    pub(super) webhook_addr: Option<SocketAddr>,
    pub(super) task: JoinHandle<Result<(), ManagerError>>,
}

impl RunningManager {
    /// Where the admin server listens, if it serves.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Where the webhook server listens, if some webhook is enabled.
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook_addr
    }

    /// Stop at once, as a crashed process would: the controllers are
    /// aborted and the Lease is neither renewed nor released, so another
    /// manager takes over only once it expires (tests of failover).
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Wait for the manager to stop.
    pub async fn wait(self) -> Result<(), ManagerError> {
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(ManagerError::Task(e.to_string())),
        }
    }
}

/// Runs provider tasks on the current tokio runtime: what the manager puts
/// in a provider's [`InitContext`](stratus_cloud::InitContext), and what a
/// test or tool that initializes a provider itself can hand it.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSpawner;

impl Spawn for TokioSpawner {
    fn spawn(&self, name: &str, task: BoxTask) {
        tracing::debug!(task = name, "starting a provider task");
        tokio::spawn(task);
    }
}
