//! Exec and attach.

use async_trait::async_trait;

use crate::{AttachIo, ContainerRef, Result};

/// How an exec'd command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExitCode(pub i32);

impl ExitCode {
    /// Exit code 0.
    pub const SUCCESS: ExitCode = ExitCode(0);

    /// True for exit code 0.
    pub fn success(self) -> bool {
        self.0 == 0
    }
}

/// Runs commands in containers (Go: `RunInContainer`).
#[async_trait]
pub trait ContainerExec: Send + Sync {
    /// Run `command` in the container with the given streams and return its
    /// exit code. The kubelet API reports a non-zero code to the client as
    /// `NonZeroExitCode`. The future is dropped when the client disconnects.
    async fn exec(
        &self,
        container: &ContainerRef,
        command: &[String],
        io: AttachIo,
    ) -> Result<ExitCode>;
}

/// Attaches to a container's main process (Go: `AttachToContainer`).
#[async_trait]
pub trait ContainerAttach: Send + Sync {
    /// Attach the streams to the running container until it ends or the
    /// client detaches (the future is then dropped).
    async fn attach(&self, container: &ContainerRef, io: AttachIo) -> Result<()>;
}
