//! What a node that died left running. Each container instance's process
//! group is recorded in its pod's directory (`run/<container>`: the group
//! id and the leader's start time, so a recycled process id is never
//! mistaken for it), and so is each command `kubectl exec` or an exec
//! probe starts there while it runs; a provider starting on the same root
//! directory kills
//! the groups still alive and removes the pod directories, before it runs
//! anything. This stands in for `PR_SET_PDEATHSIG`, which needs code
//! between `fork` and `exec`.

use std::path::{Path, PathBuf};

use rustix::process::{Pid, Signal, kill_process_group};

/// The record of container `container` of the pod living in `pod_dir`.
fn record_path(pod_dir: &Path, container: &str) -> PathBuf {
    pod_dir.join("run").join(container)
}

/// The start time of process `pid` (clock ticks after boot, field 22 of
/// `/proc/<pid>/stat`), if it exists.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after ')'.
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Record that `pid` leads the process group of `container`.
pub(crate) async fn record(pod_dir: &Path, container: &str, pid: i32) {
    let Some(started) = start_time(pid) else {
        return;
    };
    let path = record_path(pod_dir, container);
    let written = async {
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        tokio::fs::write(&path, format!("{pid} {started}\n")).await
    }
    .await;
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), %e, "cannot record a container's process group");
    }
}

/// Record a command started in a container (`kubectl exec`, an exec probe)
/// as the group `pid` leads, under a name no container can have
/// (`.exec-<pid>`); the answer is the record to remove when it ends.
pub(crate) async fn record_command(pod_dir: &Path, pid: i32) -> PathBuf {
    let name = format!(".exec-{pid}");
    record(pod_dir, &name, pid).await;
    record_path(pod_dir, &name)
}

/// Kill the process groups a previous run of a node left under
/// `config.root_dir` whose leader still runs, and remove the pod
/// directories holding their records and the pods' empty CPU cgroups; how
/// many groups were killed. Call it
/// once when the node starts, before the provider runs anything
/// (`stratus-process-node` does); never while a provider runs pods there.
///
/// ```
/// use stratus_provider_process::{ProcessConfig, reap_leftovers};
///
/// let config = ProcessConfig::new(std::env::temp_dir().join("stratus-reap-doc"));
/// assert_eq!(reap_leftovers(&config), 0);
/// ```
pub fn reap_leftovers(config: &crate::ProcessConfig) -> usize {
    let killed = reap(&config.root_dir);
    // Their CPU cgroups are empty now.
    if let Some(cgroups) = crate::cgroups::Cgroups::detect() {
        cgroups.remove_all();
    }
    killed
}

fn reap(root: &Path) -> usize {
    let Ok(pods) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut killed = 0;
    for pod in pods.flatten() {
        let run = pod.path().join("run");
        let Ok(records) = std::fs::read_dir(&run) else {
            continue;
        };
        for record in records.flatten() {
            let text = std::fs::read_to_string(record.path()).unwrap_or_default();
            let mut fields = text.split_whitespace();
            let (Some(pid), Some(started)) = (
                fields.next().and_then(|p| p.parse::<i32>().ok()),
                fields.next().and_then(|s| s.parse::<u64>().ok()),
            ) else {
                continue;
            };
            if start_time(pid) == Some(started)
                && let Some(group) = Pid::from_raw(pid)
                && kill_process_group(group, Signal::KILL).is_ok()
            {
                tracing::warn!(pod = %pod.path().display(), pid, "killed a process group left by an earlier run");
                killed += 1;
            }
        }
        if let Err(e) = std::fs::remove_dir_all(pod.path()) {
            tracing::warn!(pod = %pod.path().display(), %e, "cannot remove a pod directory left by an earlier run");
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_recorded_group_still_running_is_killed_and_its_pod_removed() {
        use std::os::unix::process::CommandExt;
        let root = std::env::temp_dir().join(format!("stratus-leftovers-{}", std::process::id()));
        let pod = root.join("default_left_uid");
        let mut child = std::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        record(&pod, "app", pid).await;
        // A record of a process id now used by another process (a start
        // time that does not match) is left alone.
        tokio::fs::write(
            record_path(&pod, "stale"),
            format!("{} 1\n", std::process::id()),
        )
        .await
        .unwrap();
        assert_eq!(reap(&root), 1);
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(!pod.exists());
        assert_eq!(reap(&root), 0);
        let _ = std::fs::remove_dir_all(&root);
    }
}
