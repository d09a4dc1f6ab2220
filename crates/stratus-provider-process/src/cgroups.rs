//! CPU (and, on cgroup v2, memory) limits through cgroups, where this
//! process may write them: each container with `resources.limits.cpu` (or
//! a memory limit the cgroup enforces) gets a cgroup
//! `stratus-process/<pod uid>/<container>` below the node's own, with the
//! kubelet's CFS quota (millicores × 100 µs per 100 ms period, at least
//! 1 ms), and its process — and every command `exec` starts in the
//! container — is moved into it right after it starts. The pod's cgroups
//! are removed with the pod.
//!
//! - cgroup v1 (the `cpu` hierarchy): `cpu.cfs_period_us` and
//!   `cpu.cfs_quota_us`; memory stays an `RLIMIT_DATA` ([`crate::limits`]).
//! - cgroup v2 (the unified hierarchy with the `cpu` controller, the node's
//!   cgroup delegated to it — a systemd unit with `Delegate=yes`, a
//!   container with its own cgroup namespace): `cpu.max` (`<quota>
//!   100000`), and where the `memory` controller is delegated too,
//!   `memory.max` (the limit in bytes) and `memory.swap.max` `0`, as the
//!   kubelet writes them: a container over its limit is killed by the
//!   kernel and reported `OOMKilled` (`memory.events`' `oom_kill` grew).
//!   A cgroup with processes cannot enable controllers for its children,
//!   so the node first moves itself into a leaf `<own cgroup>/stratus-node`
//!   (only when it is alone in its cgroup), then enables `+cpu` (and
//!   `+memory`) on the way down to each container's cgroup.
//!
//! A node whose cgroups are read-only (an unprivileged user, a v2 cgroup
//! not delegated or shared with other processes) does not limit CPU and
//! says so in its annotation (`process.stratus.dev/limits`).

use std::path::{Path, PathBuf};

/// The kubelet's CFS period.
const PERIOD_US: u64 = 100_000;
/// The kubelet's smallest quota.
const MIN_QUOTA_US: u64 = 1_000;

/// The leaf a v2 node moves itself into.
const NODE_LEAF: &str = "stratus-node";

/// Which cgroup hierarchy limits CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hierarchy {
    /// The v1 `cpu` controller.
    V1,
    /// The v2 unified hierarchy.
    V2,
}

/// Where this node makes its containers' cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cgroups {
    /// `<the node's cpu cgroup>/stratus-process`.
    parent: PathBuf,
    hierarchy: Hierarchy,
    /// The v2 `memory` controller is delegated: memory limits are
    /// `memory.max`.
    memory: bool,
}

impl Cgroups {
    /// The node's CPU cgroups, when this process may make them: the cgroup
    /// v1 `cpu` hierarchy mounted under `/sys/fs/cgroup` and this process's
    /// cgroup there writable.
    pub(crate) fn detect() -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        Self::detect_in(Path::new("/sys/fs/cgroup"), &own)
    }

    /// What the node's annotation says it enforces, and how.
    pub(crate) fn enforced(&self) -> &'static str {
        match (self.hierarchy, self.memory) {
            (Hierarchy::V1, _) => "memory=rlimit-data,cpu=cgroup-v1",
            (Hierarchy::V2, false) => "memory=rlimit-data,cpu=cgroup-v2",
            (Hierarchy::V2, true) => "memory=cgroup-v2,cpu=cgroup-v2",
        }
    }

    /// Whether memory limits are the cgroups' (`memory.max`) rather than
    /// an `RLIMIT_DATA`.
    pub(crate) fn limits_memory(&self) -> bool {
        self.memory
    }

    /// [`Cgroups::detect`] with the mount root and `/proc/self/cgroup`'s
    /// text given: v1 where it has the `cpu` controller, else v2.
    fn detect_in(mounts: &Path, own: &str) -> Option<Self> {
        Self::detect_v1(mounts, own).or_else(|| Self::detect_v2(mounts, own, std::process::id()))
    }

    /// The v2 hierarchy mounted at `mounts` with the `cpu` controller, this
    /// process's cgroup (`0::<path>`) writable and holding no other
    /// process; the node (`pid`) moves itself into its leaf and enables
    /// `cpu` for its cgroup's children.
    fn detect_v2(mounts: &Path, own: &str, pid: u32) -> Option<Self> {
        let path = own
            .lines()
            .find_map(|line| line.strip_prefix("0::"))?
            .trim()
            .trim_start_matches('/');
        let has = |dir: &Path, controller: &str| {
            std::fs::read_to_string(dir.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == controller))
        };
        let has_cpu = |dir: &Path| has(dir, "cpu");
        if !has_cpu(mounts) {
            return None;
        }
        // Once moved, the node's cgroup is its leaf; its own is the parent.
        let own_dir = Some(mounts.join(path))
            .filter(|d| d.exists())
            .unwrap_or_else(|| mounts.to_path_buf());
        let own_dir = match own_dir.file_name() {
            Some(name) if name == NODE_LEAF => own_dir.parent()?.to_path_buf(),
            _ => own_dir,
        };
        if !has_cpu(&own_dir) {
            return None;
        }
        rustix::fs::access(&own_dir, rustix::fs::Access::WRITE_OK).ok()?;
        let leaf = own_dir.join(NODE_LEAF);
        let members = std::fs::read_to_string(own_dir.join("cgroup.procs")).unwrap_or_default();
        let others = members.split_whitespace().any(|p| p != pid.to_string());
        if others {
            tracing::info!(cgroup = %own_dir.display(), "not limiting CPU: the node shares its cgroup v2 with other processes");
            return None;
        }
        if members.split_whitespace().next().is_some() {
            let moved = std::fs::create_dir_all(&leaf)
                .and_then(|()| std::fs::write(leaf.join("cgroup.procs"), pid.to_string()));
            if let Err(e) = moved {
                tracing::info!(cgroup = %leaf.display(), %e, "not limiting CPU: cannot move the node into a leaf cgroup");
                return None;
            }
        }
        if let Err(e) = enable(&own_dir, "cpu") {
            tracing::info!(cgroup = %own_dir.display(), %e, "not limiting CPU: cannot enable the cpu controller");
            return None;
        }
        let memory = has(&own_dir, "memory")
            && enable(&own_dir, "memory")
                .inspect_err(|e| {
                    tracing::info!(cgroup = %own_dir.display(), %e, "memory limits stay RLIMIT_DATA: cannot enable the memory controller");
                })
                .is_ok();
        Some(Self {
            parent: own_dir.join("stratus-process"),
            hierarchy: Hierarchy::V2,
            memory,
        })
    }

    /// The v1 `cpu` hierarchy under `mounts`.
    fn detect_v1(mounts: &Path, own: &str) -> Option<Self> {
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
            hierarchy: Hierarchy::V1,
            memory: false,
        })
    }

    /// The cgroup of `container` of the pod with UID `uid`, limited to
    /// `millicores` of CPU and (where [`Cgroups::limits_memory`]) `memory`
    /// bytes; `None` when neither limit is the cgroups' to enforce.
    pub(crate) fn limit(
        &self,
        uid: &str,
        container: &str,
        millicores: Option<u64>,
        memory: Option<u64>,
    ) -> Option<ContainerCgroup> {
        let memory_max = memory.filter(|_| self.memory);
        if millicores.is_none() && memory_max.is_none() {
            return None;
        }
        Some(ContainerCgroup {
            dir: self.pod_dir(uid).join(crate::naming::safe(container)),
            quota_us: millicores.map(|m| (m * PERIOD_US / 1000).max(MIN_QUOTA_US)),
            memory_max,
            hierarchy: self.hierarchy,
        })
    }

    fn pod_dir(&self, uid: &str) -> PathBuf {
        self.parent.join(crate::naming::safe(uid))
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

/// Let the children of v2 cgroup `dir` use `controller`.
fn enable(dir: &Path, controller: &str) -> std::io::Result<()> {
    std::fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}"))
}

/// One container's cgroup: its CPU quota and memory limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerCgroup {
    dir: PathBuf,
    quota_us: Option<u64>,
    memory_max: Option<u64>,
    hierarchy: Hierarchy,
}

impl ContainerCgroup {
    /// Make the cgroup (once) and move process `pid` into it.
    pub(crate) fn enter(&self, pid: u32) -> std::io::Result<()> {
        if !self.dir.exists() {
            match self.hierarchy {
                Hierarchy::V1 => {
                    std::fs::create_dir_all(&self.dir)?;
                    if let Some(quota) = self.quota_us {
                        std::fs::write(self.dir.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
                        std::fs::write(self.dir.join("cpu.cfs_quota_us"), quota.to_string())?;
                    }
                }
                Hierarchy::V2 => self.make_v2()?,
            }
        }
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }

    /// Make the v2 cgroup: `stratus-process` and the pod's cgroup pass the
    /// controllers down; only the container's holds a process.
    fn make_v2(&self) -> std::io::Result<()> {
        let pod = self
            .dir
            .parent()
            .ok_or_else(|| std::io::Error::other("a container cgroup has a parent"))?;
        let wanted: Vec<&str> = [
            self.quota_us.map(|_| "cpu"),
            self.memory_max.map(|_| "memory"),
        ]
        .into_iter()
        .flatten()
        .collect();
        for level in [pod.parent(), Some(pod)].into_iter().flatten() {
            let enabled =
                std::fs::read_to_string(level.join("cgroup.subtree_control")).unwrap_or_default();
            std::fs::create_dir_all(level)?;
            for controller in &wanted {
                if !enabled
                    .split_whitespace()
                    .any(|c| c.trim_start_matches('+') == *controller)
                {
                    enable(level, controller)?;
                }
            }
        }
        std::fs::create_dir_all(&self.dir)?;
        if let Some(quota) = self.quota_us {
            std::fs::write(self.dir.join("cpu.max"), format!("{quota} {PERIOD_US}"))?;
        }
        if let Some(bytes) = self.memory_max {
            std::fs::write(self.dir.join("memory.max"), bytes.to_string())?;
            // No swap beyond the limit, as the kubelet without swap; a
            // kernel without swap accounting has no such file.
            let _ = std::fs::write(self.dir.join("memory.swap.max"), "0");
        }
        Ok(())
    }

    /// How many times the kernel killed a process of this cgroup for going
    /// over `memory.max` (`memory.events`' `oom_kill`); 0 without a memory
    /// limit or the file.
    pub(crate) fn oom_kills(&self) -> u64 {
        if self.memory_max.is_none() {
            return 0;
        }
        std::fs::read_to_string(self.dir.join("memory.events"))
            .ok()
            .and_then(|events| {
                events.lines().find_map(|line| {
                    let (key, value) = line.split_once(' ')?;
                    (key == "oom_kill").then(|| value.trim().parse().ok())?
                })
            })
            .unwrap_or(0)
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
        let found = Cgroups::detect_in(&root, own).unwrap();
        assert_eq!(
            found.parent,
            root.join("cpu,cpuacct/kubepods/node/stratus-process")
        );
        // In a container the mount's root is the own cgroup.
        let own = "4:cpu,cpuacct:/docker/abc\n";
        let found = Cgroups::detect_in(&root, own).unwrap();
        assert_eq!(found.parent, root.join("cpu,cpuacct/stratus-process"));
        // No cpu controller in v1: nothing to limit with.
        assert_eq!(Cgroups::detect_in(&root, "0::/user.slice\n"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn quotas_follow_the_kubelet() {
        let cgroups = Cgroups {
            parent: PathBuf::from("/cg/stratus-process"),
            hierarchy: Hierarchy::V1,
            memory: false,
        };
        let quota = |m| cgroups.limit("u", "a", Some(m), None).unwrap().quota_us;
        let half = cgroups.limit("uid-1", "app", Some(500), None).unwrap();
        assert_eq!(half.quota_us, Some(50_000));
        assert_eq!(half.dir, PathBuf::from("/cg/stratus-process/uid-1/app"));
        assert_eq!(quota(2), Some(1_000));
        assert_eq!(quota(2500), Some(250_000));
        // v1 leaves memory to RLIMIT_DATA: a memory limit alone is no cgroup.
        assert_eq!(cgroups.limit("u", "a", None, Some(64 << 20)), None);
        assert_eq!(cgroups.enforced(), "memory=rlimit-data,cpu=cgroup-v1");
    }

    #[test]
    fn entering_writes_the_quota_once_and_the_pid() {
        let root = fake_mount("enter");
        let cgroups = Cgroups::detect_in(&root, "4:cpu:/kubepods/node\n").unwrap();
        let limit = cgroups.limit("uid-2", "app", Some(250), None).unwrap();
        limit.enter(42).unwrap();
        let read = |f: &str| std::fs::read_to_string(limit.dir.join(f)).unwrap();
        assert_eq!(read("cpu.cfs_quota_us"), "25000");
        assert_eq!(read("cpu.cfs_period_us"), "100000");
        assert_eq!(read("cgroup.procs"), "42");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A directory laid out as a cgroup v2 mount whose `node` cgroup holds
    /// `procs`.
    fn fake_unified(test: &str, procs: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("stratus-cgroups-{test}-{}", std::process::id()));
        let own = root.join("system.slice/node.service");
        std::fs::create_dir_all(&own).unwrap();
        for dir in [&root, &own] {
            std::fs::write(dir.join("cgroup.controllers"), "cpuset cpu io memory pids").unwrap();
            std::fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
        }
        std::fs::write(own.join("cgroup.procs"), procs).unwrap();
        root
    }

    #[test]
    fn on_cgroup_v2_the_node_moves_into_a_leaf_and_delegates_cpu() {
        let root = fake_unified("v2", "4242\n");
        let own = "0::/system.slice/node.service\n";
        let found = Cgroups::detect_v2(&root, own, 4242).unwrap();
        let node = root.join("system.slice/node.service");
        assert_eq!(found.parent, node.join("stratus-process"));
        assert_eq!(found.enforced(), "memory=cgroup-v2,cpu=cgroup-v2");
        assert!(found.limits_memory());
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(&node.join("stratus-node/cgroup.procs")), "4242");
        // The fake file keeps the last write: cpu was enabled, then memory.
        assert_eq!(read(&node.join("cgroup.subtree_control")), "+memory");
        // Detected again from the leaf, the same cgroups (not nested).
        let again = Cgroups::detect_v2(&root, "0::/system.slice/node.service/stratus-node\n", 4242);
        assert_eq!(again, Some(found.clone()));

        let limit = found.limit("uid-3", "app", Some(250), None).unwrap();
        limit.enter(77).unwrap();
        assert_eq!(read(&limit.dir.join("cpu.max")), "25000 100000");
        assert!(!limit.dir.join("memory.max").exists());
        assert_eq!(read(&limit.dir.join("cgroup.procs")), "77");
        assert_eq!(
            read(&node.join("stratus-process/cgroup.subtree_control")),
            "+cpu"
        );
        assert_eq!(
            read(&node.join("stratus-process/uid-3/cgroup.subtree_control")),
            "+cpu"
        );

        // A memory limit alone: memory.max, no swap, no cpu.max; the
        // kernel's OOM kills are read from memory.events.
        let memory = found.limit("uid-4", "db", None, Some(64 << 20)).unwrap();
        memory.enter(78).unwrap();
        assert_eq!(read(&memory.dir.join("memory.max")), "67108864");
        assert_eq!(read(&memory.dir.join("memory.swap.max")), "0");
        assert!(!memory.dir.join("cpu.max").exists());
        assert_eq!(
            read(&node.join("stratus-process/uid-4/cgroup.subtree_control")),
            "+memory"
        );
        assert_eq!(memory.oom_kills(), 0);
        std::fs::write(
            memory.dir.join("memory.events"),
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
        )
        .unwrap();
        assert_eq!(memory.oom_kills(), 1);
        // Without a memory limit the events are not the container's.
        assert_eq!(limit.oom_kills(), 0);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn on_cgroup_v2_a_shared_or_controllerless_cgroup_is_not_used() {
        let root = fake_unified("v2-shared", "4242\n1\n");
        let own = "0::/system.slice/node.service\n";
        assert_eq!(Cgroups::detect_v2(&root, own, 4242), None);
        let _ = std::fs::remove_dir_all(&root);
        let root = fake_unified("v2-nocpu", "4242\n");
        std::fs::write(root.join("cgroup.controllers"), "memory pids").unwrap();
        assert_eq!(Cgroups::detect_v2(&root, own, 4242), None);
        // cpu delegated without memory: memory stays RLIMIT_DATA.
        let _ = std::fs::remove_dir_all(&root);
        let root = fake_unified("v2-nomemory", "4242\n");
        for dir in [root.clone(), root.join("system.slice/node.service")] {
            std::fs::write(dir.join("cgroup.controllers"), "cpu pids").unwrap();
        }
        let found = Cgroups::detect_v2(&root, own, 4242).unwrap();
        assert_eq!(found.enforced(), "memory=rlimit-data,cpu=cgroup-v2");
        assert_eq!(found.limit("u", "a", None, Some(1 << 20)), None);
        let _ = std::fs::remove_dir_all(&root);
        let root = fake_unified("v2-nocpu2", "4242\n");
        std::fs::write(root.join("cgroup.controllers"), "memory pids").unwrap();
        // No v1 cpu line and no v2 cpu: nothing to limit with.
        assert_eq!(Cgroups::detect_in(&root, own), None);
        let _ = std::fs::remove_dir_all(&root);
    }
}
