//! The process group of a command started beside a container (`kubectl
//! exec`, an exec probe, a terminal session): recorded while it runs, and
//! killed when its session ends.

use rustix::process::{Pid, Signal, kill_process_group};

/// Kills the exec'd command's process group when the session ends or the
/// client goes away (the session's future is dropped), and removes its
/// record for `reap_leftovers`.
pub(crate) struct GroupGuard {
    group: Option<Pid>,
    record: Option<std::path::PathBuf>,
}

impl GroupGuard {
    /// The group `child` leads, recorded in the pod's directory (see
    /// `leftovers`) while it runs, so a node that dies meanwhile kills it
    /// when it starts again.
    pub(crate) async fn recorded(
        child: &tokio::process::Child,
        launch: &crate::plan::Launch,
    ) -> Self {
        let group = process_group(child);
        let record = match (group, launch.pod_dir()) {
            (Some(group), Some(dir)) => {
                Some(crate::leftovers::record_command(dir, group.as_raw_nonzero().get()).await)
            }
            _ => None,
        };
        Self { group, record }
    }
}

/// The process group `child` leads (it was started in a group of its own,
/// see `Launch::command`), while it has not been reaped.
pub(crate) fn process_group(child: &tokio::process::Child) -> Option<Pid> {
    child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.group {
            let _ = kill_process_group(group, Signal::KILL);
        }
        if let Some(record) = &self.record {
            let _ = std::fs::remove_file(record);
        }
    }
}
