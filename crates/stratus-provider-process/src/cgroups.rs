//! CPU limits through the cgroup v1 `cpu` controller, where this process
//! may write it: each container with `resources.limits.cpu` gets a cgroup
//! `stratus-process/<pod uid>/<container>` below the node's own, with the
//! kubelet's CFS quota (`cpu.cfs_quota_us` = millicores × 100 µs per
//! 100 ms period, at least 1 ms), and its process — and every command
//! `exec` starts in the container — is moved into it right after it
//! starts. The pod's cgroups are removed with the pod.
//!
//! A node whose cgroups are read-only (an unprivileged user, a cgroup v2
//! host without delegation) does not limit CPU and says so in its
//! annotation (`process.stratus.dev/limits`).

use std::path::{Path, PathBuf};

/// The kubelet's CFS period.
const PERIOD_US: u64 = 100_000;
/// The kubelet's smallest quota.
const MIN_QUOTA_US: u64 = 1_000;

/// Where this node makes its containers' CPU cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CpuCgroups {
    /// `<the node's cpu cgroup>/stratus-process`.
    parent: PathBuf,
}

impl CpuCgroups {
    /// The node's CPU cgroups, when this process may make them: the cgroup
    /// v1 `cpu` hierarchy mounted under `/sys/fs/cgroup` and this process's
    /// cgroup there writable.
    pub(crate) fn detect() -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        Self::detect_in(Path::new("/sys/fs/cgroup"), &own)
    }

    /// [`CpuCgroups::detect`] with the mount root and `/proc/self/cgroup`'s
    /// text given.
    fn detect_in(mounts: &Path, own: &str) -> Option<Self> {
        // `<id>:<controllers>:<path>`; the v1 line whose controllers name cpu.
        let path = own.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            controllers
                .split(',')
                .any(|c| c == "cpu")
                .then(|| path.trim_start_matches('/').to_owned())
        })?;
        let mount = ["cpu", "cpu,cpuacct", "cpuacct,cpu"]
            .iter()
            .map(|m| mounts.join(m))
            .find(|m| m.join("cpu.cfs_quota_us").exists())?;
        // Inside a container the mount's root is often the process's own
        // cgroup already.
        let own_dir = Some(mount.join(&path))
            .filter(|d| d.join("cpu.cfs_quota_us").exists())
            .unwrap_or(mount);
        rustix::fs::access(&own_dir, rustix::fs::Access::WRITE_OK).ok()?;
        Some(Self {
            parent: own_dir.join("stratus-process"),
        })
    }

    /// The cgroup of `container` of the pod with UID `uid`, limited to
    /// `millicores`.
    pub(crate) fn limit(&self, uid: &str, container: &str, millicores: u64) -> CpuLimit {
        CpuLimit {
            dir: self.pod_dir(uid).join(crate::plan::safe(container)),
            quota_us: (millicores * PERIOD_US / 1000).max(MIN_QUOTA_US),
        }
    }

    fn pod_dir(&self, uid: &str) -> PathBuf {
        self.parent.join(crate::plan::safe(uid))
    }

    /// Remove every pod's cgroups that no process is in (a node starting
    /// after its predecessor's leftovers were killed).
    pub(crate) fn remove_all(&self) {
        let Ok(pods) = std::fs::read_dir(&self.parent) else {
            return;
        };
        for pod in pods.flatten() {
            if pod.file_type().is_ok_and(|t| t.is_dir()) {
                remove_dir(&pod.path());
            }
        }
    }

    /// Remove the cgroups of the pod with UID `uid` (its processes ended).
    pub(crate) fn remove_pod(&self, uid: &str) {
        remove_dir(&self.pod_dir(uid));
    }
}

/// Remove pod cgroup `dir` and its containers' cgroups.
fn remove_dir(dir: &Path) {
    let Ok(containers) = std::fs::read_dir(dir) else {
        return;
    };
    // A cgroup is removed with rmdir (its files cannot be deleted).
    for entry in containers.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && let Err(e) = std::fs::remove_dir(entry.path())
        {
            tracing::warn!(cgroup = %entry.path().display(), %e, "cannot remove a container's cgroup");
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// One container's CPU cgroup and quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CpuLimit {
    dir: PathBuf,
    quota_us: u64,
}

impl CpuLimit {
    /// Make the cgroup (once) and move process `pid` into it.
    pub(crate) fn enter(&self, pid: u32) -> std::io::Result<()> {
        if !self.dir.exists() {
            std::fs::create_dir_all(&self.dir)?;
            std::fs::write(self.dir.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
            std::fs::write(self.dir.join("cpu.cfs_quota_us"), self.quota_us.to_string())?;
        }
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory laid out as a cgroup v1 `cpu` mount.
    fn fake_mount(test: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("stratus-cgroups-{test}-{}", std::process::id()));
        let cpu = root.join("cpu,cpuacct");
        std::fs::create_dir_all(cpu.join("kubepods/node")).unwrap();
        std::fs::write(cpu.join("cpu.cfs_quota_us"), "-1").unwrap();
        std::fs::write(cpu.join("kubepods/node/cpu.cfs_quota_us"), "-1").unwrap();
        root
    }

    #[test]
    fn the_own_cgroup_is_found_under_the_mount() {
        let root = fake_mount("found");
        let own = "12:memory:/kubepods/node\n4:cpu,cpuacct:/kubepods/node\n0::/\n";
        let found = CpuCgroups::detect_in(&root, own).unwrap();
        assert_eq!(
            found.parent,
            root.join("cpu,cpuacct/kubepods/node/stratus-process")
        );
        // In a container the mount's root is the own cgroup.
        let own = "4:cpu,cpuacct:/docker/abc\n";
        let found = CpuCgroups::detect_in(&root, own).unwrap();
        assert_eq!(found.parent, root.join("cpu,cpuacct/stratus-process"));
        // No cpu controller in v1: nothing to limit with.
        assert_eq!(CpuCgroups::detect_in(&root, "0::/user.slice\n"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn quotas_follow_the_kubelet() {
        let cgroups = CpuCgroups {
            parent: PathBuf::from("/cg/stratus-process"),
        };
        let half = cgroups.limit("uid-1", "app", 500);
        assert_eq!(half.quota_us, 50_000);
        assert_eq!(half.dir, PathBuf::from("/cg/stratus-process/uid-1/app"));
        assert_eq!(cgroups.limit("u", "a", 2).quota_us, 1_000);
        assert_eq!(cgroups.limit("u", "a", 2500).quota_us, 250_000);
    }

    #[test]
    fn entering_writes_the_quota_once_and_the_pid() {
        let root = fake_mount("enter");
        let cgroups = CpuCgroups::detect_in(&root, "4:cpu:/kubepods/node\n").unwrap();
        let limit = cgroups.limit("uid-2", "app", 250);
        limit.enter(42).unwrap();
        let read = |f: &str| std::fs::read_to_string(limit.dir.join(f)).unwrap();
        assert_eq!(read("cpu.cfs_quota_us"), "25000");
        assert_eq!(read("cpu.cfs_period_us"), "100000");
        assert_eq!(read("cgroup.procs"), "42");
        let _ = std::fs::remove_dir_all(&root);
    }
}
