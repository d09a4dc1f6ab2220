//! A container's memory limit on a process node: `resources.limits.memory`
//! becomes the process's `RLIMIT_DATA` (its heap and private writable
//! mappings), set on the container's process and on every command `exec`
//! starts in the container — the `setrlimit` fallback the kubelet's cgroup
//! limit has on a machine whose cgroups this node may not write.
//!
//! The limit is set right after the process starts (setting it between
//! `fork` and `exec` would need `unsafe` code), so the program's first
//! instructions run unlimited; everything it allocates after that, and
//! every process it starts, is bound. A process over its limit sees its
//! allocations fail (Python's `MemoryError`, a null `malloc`) rather than
//! being OOM-killed; its exit code is its own. CPU limits are not enforced
//! (a rate limit needs cgroups): `docs/providers/process.md`.

use k8s_openapi::api::core::v1::Container;
use rustix::process::{Pid, Resource, Rlimit, prlimit};
use stratus_pod::env::ParsedQuantity;

/// The memory limit of `container` in bytes, if it has one; an error
/// message when it is not a quantity or not positive.
pub(crate) fn memory_limit(container: &Container) -> Result<Option<u64>, String> {
    let Some(limit) = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
    else {
        return Ok(None);
    };
    let bytes = ParsedQuantity::parse(&limit.0)
        .map_err(|e| format!("memory limit {:?}: {e}", limit.0))?
        .value();
    u64::try_from(bytes)
        .ok()
        .filter(|b| *b > 0)
        .map(Some)
        .ok_or_else(|| format!("memory limit {:?} is not a positive size", limit.0))
}

/// The CPU limit of `container` in millicores, if it has one; an error
/// message when it is not a quantity or not positive.
pub(crate) fn cpu_limit(container: &Container) -> Result<Option<u64>, stratus_pod::PodError> {
    let Some(limit) = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("cpu"))
    else {
        return Ok(None);
    };
    let refuse = |why: String| {
        stratus_pod::PodError::invalid_input(format!(
            "container {:?}: cpu limit {:?}: {why}",
            container.name, limit.0
        ))
    };
    let millis = ParsedQuantity::parse(&limit.0)
        .map_err(|e| refuse(e.to_string()))?
        .milli_value();
    u64::try_from(millis)
        .ok()
        .filter(|m| *m > 0)
        .map(Some)
        .ok_or_else(|| refuse("not a positive amount".into()))
}

/// Bind process `pid` (a container's or an exec'd command's) to `bytes`.
pub(crate) fn apply(pid: u32, bytes: u64) -> std::io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::other(format!("no such process id {pid}")))?;
    prlimit(
        Some(pid),
        Resource::Data,
        Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_limit(memory: &str) -> Container {
        serde_json::from_value(serde_json::json!({
            "name": "c", "resources": {"limits": {"memory": memory}},
        }))
        .unwrap()
    }

    #[test]
    fn limits_are_read_as_bytes() {
        assert_eq!(memory_limit(&with_limit("64Mi")), Ok(Some(64 << 20)));
        assert_eq!(memory_limit(&with_limit("1G")), Ok(Some(1_000_000_000)));
        assert_eq!(memory_limit(&Container::default()), Ok(None));
    }

    #[test]
    fn bad_limits_are_named() {
        assert!(
            memory_limit(&with_limit("lots"))
                .unwrap_err()
                .contains("\"lots\"")
        );
        assert!(
            memory_limit(&with_limit("0"))
                .unwrap_err()
                .contains("positive")
        );
    }

    #[test]
    fn a_limit_binds_a_running_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        apply(child.id(), 64 << 20).unwrap();
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max data size"))
            .unwrap();
        assert!(line.contains(&(64u64 << 20).to_string()), "{line}");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
