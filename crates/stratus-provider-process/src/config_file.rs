//! The operator's configuration file (`--provider-config`), YAML or JSON:
//!
//! ```yaml
//! rootDir: /var/lib/stratus-process      # where pods live
//! podIP: 10.0.0.5                          # the node's address, every pod's IP
//! images:                                  # image → program, for containers without a command
//!   busybox: [sh, -c]
//!   python: [python3]
//! hostPathPrefixes: [/srv/shared]          # hostPath volumes allowed under these
//! maxPods: 50
//! memoryReserveBytes: 1073741824
//! logLimitBytes: 10485760
//! logMaxFiles: 5
//! capacity: {cpu: "4", memory: 8Gi}      # instead of the host's
//! nodeLabels: {topology.kubernetes.io/zone: lab-1}
//! nodeTaints: [{key: dedicated, value: batch, effect: NoSchedule}]
//! backoffInitialSeconds: 10
//! backoffMaxSeconds: 300
//! ```
//!
//! Every key is optional; an unknown key is an error (a typo must not pass
//! silently).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::ProcessConfig;

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a valid configuration.
    #[error("invalid process provider configuration: {0}")]
    Invalid(String),
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    root_dir: Option<PathBuf>,
    #[serde(rename = "podIP")]
    pod_ip: Option<String>,
    pod_network: Option<FilePodNetwork>,
    images: Option<BTreeMap<String, Vec<String>>>,
    host_path_prefixes: Option<Vec<PathBuf>>,
    max_pods: Option<u32>,
    memory_reserve_bytes: Option<u64>,
    log_limit_bytes: Option<u64>,
    log_max_files: Option<u32>,
    capacity: Option<BTreeMap<String, String>>,
    node_labels: Option<BTreeMap<String, String>>,
    node_taints: Option<Vec<FileTaint>>,
    backoff_initial_seconds: Option<u64>,
    backoff_max_seconds: Option<u64>,
}

/// `podNetwork`: `node` (every pod has `podIP`) or `podCIDR` (one address
/// each from the node's pod CIDR).
#[derive(Debug, serde::Deserialize)]
enum FilePodNetwork {
    #[serde(rename = "node")]
    Node,
    #[serde(rename = "podCIDR")]
    PodCidr,
}

/// A taint as the file writes it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTaint {
    key: String,
    #[serde(default)]
    value: Option<String>,
    effect: String,
}

impl ProcessConfig {
    /// The configuration in `text` (YAML or JSON), on top of
    /// [`ProcessConfig::new`]`(default_root)`.
    ///
    /// ```
    /// use stratus_provider_process::ProcessConfig;
    ///
    /// let config = ProcessConfig::from_yaml("images: {busybox: [sh, -c]}\nmaxPods: 20\n", "/tmp/pods").unwrap();
    /// assert_eq!(config.max_pods, 20);
    /// assert_eq!(config.entrypoint("busybox:1.36"), Some(&["sh".to_string(), "-c".to_string()][..]));
    /// assert!(ProcessConfig::from_yaml("maxPod: 20", "/tmp/pods").is_err());
    /// ```
    pub fn from_yaml(
        text: &str,
        default_root: impl Into<PathBuf>,
    ) -> Result<Self, ConfigFileError> {
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| ConfigFileError::Invalid(e.to_string()))?
        };
        let mut config = ProcessConfig::new(file.root_dir.unwrap_or_else(|| default_root.into()));
        if !config.root_dir.is_absolute() {
            return Err(ConfigFileError::Invalid(format!(
                "rootDir {} must be an absolute path",
                config.root_dir.display()
            )));
        }
        if let Some(ip) = file.pod_ip {
            ip.parse::<std::net::IpAddr>().map_err(|_| {
                ConfigFileError::Invalid(format!("podIP {ip:?} is not an IP address"))
            })?;
            config.pod_ip = ip;
        }
        if let Some(network) = file.pod_network {
            config.pod_network = match network {
                FilePodNetwork::Node => crate::PodNetwork::NodeAddress,
                FilePodNetwork::PodCidr => crate::PodNetwork::PodCidr(Default::default()),
            };
        }
        if let Some(images) = file.images {
            if let Some((image, _)) = images.iter().find(|(_, program)| program.is_empty()) {
                return Err(ConfigFileError::Invalid(format!(
                    "images: {image:?} maps to no program"
                )));
            }
            config.images = images;
        }
        if let Some(prefixes) = file.host_path_prefixes {
            if let Some(bad) = prefixes.iter().find(|p| !p.is_absolute()) {
                return Err(ConfigFileError::Invalid(format!(
                    "hostPathPrefixes: {} must be an absolute path",
                    bad.display()
                )));
            }
            config.host_path_prefixes = prefixes;
        }
        if let Some(n) = file.max_pods {
            config.max_pods = n;
        }
        if let Some(n) = file.memory_reserve_bytes {
            config.memory_reserve_bytes = n;
        }
        if let Some(n) = file.log_limit_bytes {
            config.log_limit_bytes = n;
        }
        if let Some(n) = file.log_max_files {
            if n == 0 {
                return Err(ConfigFileError::Invalid(
                    "logMaxFiles: at least 1 (the current file)".into(),
                ));
            }
            config.log_max_files = n;
        }
        if let Some(capacity) = file.capacity {
            for (name, value) in &capacity {
                if !matches!(name.as_str(), "cpu" | "memory") {
                    return Err(ConfigFileError::Invalid(format!(
                        "capacity: {name:?} is not cpu or memory (pods: maxPods)"
                    )));
                }
                stratus_pod::env::ParsedQuantity::parse(value).map_err(|e| {
                    ConfigFileError::Invalid(format!("capacity.{name}: {value:?}: {e}"))
                })?;
            }
            config.capacity = capacity;
        }
        if let Some(labels) = file.node_labels {
            if labels.keys().any(String::is_empty) {
                return Err(ConfigFileError::Invalid("nodeLabels: an empty key".into()));
            }
            config.node_labels = labels;
        }
        if let Some(taints) = file.node_taints {
            config.node_taints = taints
                .into_iter()
                .map(|t| {
                    if !matches!(t.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                        return Err(ConfigFileError::Invalid(format!(
                            "nodeTaints: effect {:?} of {:?} is not NoSchedule, PreferNoSchedule or NoExecute",
                            t.effect, t.key
                        )));
                    }
                    if t.key.is_empty() {
                        return Err(ConfigFileError::Invalid("nodeTaints: an empty key".into()));
                    }
                    Ok(k8s_openapi::api::core::v1::Taint {
                        key: t.key,
                        value: t.value,
                        effect: t.effect,
                        time_added: None,
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(s) = file.backoff_initial_seconds {
            config.backoff_initial = Duration::from_secs(s);
        }
        if let Some(s) = file.backoff_max_seconds {
            config.backoff_max = Duration::from_secs(s);
        }
        Ok(config)
    }

    /// The configuration in the file `path` (see
    /// [`ProcessConfig::from_yaml`]).
    pub fn from_file(
        path: &std::path::Path,
        default_root: impl Into<PathBuf>,
    ) -> Result<Self, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text, default_root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_clear_errors() {
        for (text, expected) in [
            ("rootDir: relative/path", "must be an absolute path"),
            ("podIP: nope", "is not an ip address"),
            ("images: {busybox: []}", "maps to no program"),
            ("hostPathPrefixes: [srv]", "must be an absolute path"),
            ("maxPods: -1", "invalid"),
            ("unknownKey: 1", "unknown"),
            ("logMaxFiles: 0", "at least 1"),
            ("capacity: {pods: \"3\"}", "is not cpu or memory"),
            ("capacity: {cpu: lots}", "capacity.cpu"),
            ("nodeLabels: {\"\": x}", "empty key"),
            (
                "nodeTaints: [{key: a, effect: Sometimes}]",
                "is not noschedule",
            ),
            ("nodeTaints: [{key: a}]", "effect"),
            ("podNetwork: bridge", "unknown variant"),
        ] {
            let err = ProcessConfig::from_yaml(text, "/tmp/pods")
                .unwrap_err()
                .to_string();
            assert!(err.to_lowercase().contains(expected), "{text}: {err}");
        }
        let empty = ProcessConfig::from_yaml("", "/tmp/pods").unwrap();
        assert_eq!(empty.root_dir, PathBuf::from("/tmp/pods"));
        let node = ProcessConfig::from_yaml(
            "capacity: {cpu: \"3\", memory: 2Gi}\nnodeLabels: {zone: lab}\n\
             nodeTaints: [{key: dedicated, value: batch, effect: NoSchedule}]\nlogMaxFiles: 2",
            "/tmp/pods",
        )
        .unwrap();
        assert_eq!(node.host_capacity()["memory"], "2Gi");
        assert_eq!(node.node_labels["zone"], "lab");
        assert_eq!(node.node_taints[0].value.as_deref(), Some("batch"));
        assert_eq!(node.log_max_files, 2);
        assert!(matches!(empty.pod_network, crate::PodNetwork::NodeAddress));
        let own = ProcessConfig::from_yaml("podNetwork: podCIDR", "/tmp/pods").unwrap();
        assert!(matches!(own.pod_network, crate::PodNetwork::PodCidr(_)));
    }
}
