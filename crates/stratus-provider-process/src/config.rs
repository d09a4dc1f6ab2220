//! The operator's settings of a process node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::PodNetwork;

/// How a process node runs pods.
///
/// ```
/// use stratus_provider_process::ProcessConfig;
///
/// let mut config = ProcessConfig::new(std::env::temp_dir().join("stratus-process-doc"));
/// // A container of image `busybox` without a command runs `sh`.
/// config.images.insert("busybox".into(), vec!["sh".into()]);
/// assert_eq!(config.entrypoint("busybox:1.36"), Some(&["sh".to_string()][..]));
/// assert_eq!(config.entrypoint("nginx"), None);
/// ```
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// Where pods live: one directory per pod (its volumes, each
    /// container's root and logs), removed when the pod is deleted.
    pub root_dir: PathBuf,
    /// The program (and leading arguments) an image stands for, for
    /// containers without a `command`: an image reference matches its exact
    /// key first, then its name without tag or digest (`python:3.12` →
    /// `python`). A container's `args` follow the mapped program, as they
    /// follow an image's entrypoint. An image without an entry needs a
    /// `command`.
    pub images: BTreeMap<String, Vec<String>>,
    /// The node's address: every pod's `status.hostIP` and, with
    /// [`PodNetwork::NodeAddress`] (the default), every pod's IP too: pods
    /// share the host's network. A pod's IP is known before it starts
    /// (`status.podIP` in its environment), probes without a host connect
    /// to it, and so does port-forward (then the loopback). Nodes with
    /// addresses of their own (e.g. `127.0.31.1`, `127.0.31.2` on one
    /// machine) give their pods addresses that can be told apart, for
    /// servers that bind `$(POD_IP)`.
    pub pod_ip: String,
    /// Where pods get their IPs: the node's address (the default) or one
    /// each from the node's pod CIDR ([`PodNetwork::PodCidr`]).
    pub pod_network: PodNetwork,
    /// The first restart delay of a crashed container (kubelet: 10 s),
    /// doubled on each crash.
    pub backoff_initial: Duration,
    /// The longest restart delay (kubelet: 5 min).
    pub backoff_max: Duration,
    /// A container that ran this long without crashing starts its back-off
    /// over (kubelet: 10 min).
    pub backoff_reset: Duration,
    /// Host directories pods may mount as `hostPath` volumes: a path is
    /// allowed when it lies under one of these (none by default, so every
    /// `hostPath` is refused).
    pub host_path_prefixes: Vec<PathBuf>,
    /// Pods this node admits (its `pods` capacity; the kubelet's 110).
    pub max_pods: u32,
    /// Memory kept back from the node's capacity for the host itself.
    pub memory_reserve_bytes: u64,
    /// The log file of a container instance is rotated before it passes
    /// this size (the kubelet's `containerLogMaxSize`, 10 MiB).
    pub log_limit_bytes: u64,
    /// Log files kept per container instance, the current one included
    /// (the kubelet's `containerLogMaxFiles`, 5; at least 1).
    pub log_max_files: u32,
    /// `cpu` and `memory` to report instead of the host's (see
    /// [`ProcessConfig::host_capacity`]).
    pub capacity: BTreeMap<String, String>,
    /// Labels the node carries besides the virtual kubelet's.
    pub node_labels: BTreeMap<String, String>,
    /// Taints the node carries besides the provider's.
    pub node_taints: Vec<k8s_openapi::api::core::v1::Taint>,
}

impl ProcessConfig {
    /// Pods under `root_dir`, no image mapping, the kubelet's back-off,
    /// pod IP 127.0.0.1, 10 MiB of log per container instance.
    pub fn new(root_dir: impl Into<PathBuf>) -> Self {
        Self {
            root_dir: root_dir.into(),
            images: BTreeMap::new(),
            pod_ip: "127.0.0.1".into(),
            pod_network: PodNetwork::NodeAddress,
            backoff_initial: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            backoff_reset: Duration::from_secs(600),
            log_limit_bytes: 10 * 1024 * 1024,
            log_max_files: 5,
            capacity: BTreeMap::new(),
            node_labels: BTreeMap::new(),
            node_taints: Vec::new(),
            host_path_prefixes: Vec::new(),
            max_pods: 110,
            memory_reserve_bytes: 512 * 1024 * 1024,
        }
    }

    /// The node's capacity from the host: `cpu` (the cores this process may
    /// use), `memory` (the host's total minus
    /// [`ProcessConfig::memory_reserve_bytes`]) and `pods`, for
    /// `NodeConfig::capacity`; [`ProcessConfig::capacity`] overrides them.
    ///
    /// ```
    /// let mut config = stratus_provider_process::ProcessConfig::new("/tmp/pods");
    /// let capacity = config.host_capacity();
    /// assert!(capacity["cpu"].parse::<u32>().unwrap() >= 1);
    /// assert_eq!(capacity["pods"], "110");
    /// config.capacity.insert("cpu".into(), "2".into());
    /// assert_eq!(config.host_capacity()["cpu"], "2");
    /// ```
    pub fn host_capacity(&self) -> BTreeMap<String, String> {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0, |kb| kb * 1024);
        let memory = total.saturating_sub(self.memory_reserve_bytes);
        let mut capacity: BTreeMap<String, String> = [
            ("cpu".to_owned(), cores.to_string()),
            ("memory".to_owned(), format!("{}Ki", memory / 1024)),
            ("pods".to_owned(), self.max_pods.to_string()),
        ]
        .into();
        capacity.extend(self.capacity.clone());
        capacity
    }

    /// The program an image stands for (see [`ProcessConfig::images`]).
    pub fn entrypoint(&self, image: &str) -> Option<&[String]> {
        if let Some(found) = self.images.get(image) {
            return Some(found);
        }
        let without_digest = image.split('@').next().unwrap_or(image);
        // A tag follows the last ':' after the last '/' (a registry port
        // is not a tag).
        let name = match without_digest.rfind(':') {
            Some(i) if !without_digest[i..].contains('/') => &without_digest[..i],
            _ => without_digest,
        };
        self.images.get(name).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_match_exactly_then_by_name() {
        let mut config = ProcessConfig::new("/tmp/x");
        config
            .images
            .insert("python".into(), vec!["python3".into()]);
        config
            .images
            .insert("python:2".into(), vec!["python2".into()]);
        config
            .images
            .insert("registry:5000/tools".into(), vec!["tool".into()]);
        let first = |image: &str| config.entrypoint(image).map(|e| e[0].clone());
        assert_eq!(first("python:2").as_deref(), Some("python2"));
        assert_eq!(first("python:3.12").as_deref(), Some("python3"));
        assert_eq!(first("python@sha256:abc").as_deref(), Some("python3"));
        assert_eq!(first("registry:5000/tools:1").as_deref(), Some("tool"));
        assert_eq!(first("registry:5000/tools").as_deref(), Some("tool"));
        assert_eq!(first("ruby"), None);
    }
}
