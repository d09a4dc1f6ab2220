//! The operator's configuration: where the remote cluster is, how home
//! namespaces and placement map onto it, and the node's caps.
//!
//! The file (`--provider-config`) is YAML or JSON; every key is optional and
//! an unknown key is an error (a typo must not pass silently):
//!
//! ```yaml
//! kubeconfig: /etc/stratus/remote.kubeconfig   # or kubeconfigSecret below
//! kubeconfigSecret: {namespace: kube-system, name: remote-cluster, key: kubeconfig}
//! namespaces: {mode: prefix, value: "home-"}    # same | prefix | single
//! placement: drop                                # drop | keep | translate
//! labelTranslation: {topology.kubernetes.io/zone: remote.example.com/zone}
//! persistentVolumeClaims: {data: remote-data}     # home claim → remote claim
//! automountRemoteToken: false
//! caps: {cpu: "64", memory: 256Gi, pods: 500}
//! capacityRefreshSeconds: 30
//! qps: 50
//! burst: 100
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use stratus_pod::env::ParsedQuantity;

/// A configuration that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a valid configuration.
    #[error("invalid kubernetes provider configuration: {0}")]
    Invalid(String),
}

/// How a home namespace is named in the remote cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(tag = "mode", content = "value", rename_all = "camelCase")]
pub enum NamespaceMapping {
    /// The same name (the default).
    #[default]
    Same,
    /// The home name behind a prefix (`home-` + `default`).
    Prefix(String),
    /// Every pod in one remote namespace.
    Single(String),
}

impl NamespaceMapping {
    /// The remote namespace of home namespace `home`.
    ///
    /// ```
    /// use stratus_provider_kubernetes::NamespaceMapping;
    ///
    /// assert_eq!(NamespaceMapping::Same.remote("web"), "web");
    /// assert_eq!(NamespaceMapping::Prefix("home-".into()).remote("web"), "home-web");
    /// assert_eq!(NamespaceMapping::Single("offload".into()).remote("web"), "offload");
    /// ```
    pub fn remote(&self, home: &str) -> String {
        match self {
            Self::Same => home.to_owned(),
            Self::Prefix(prefix) => format!("{prefix}{home}"),
            Self::Single(namespace) => namespace.clone(),
        }
    }
}

/// What becomes of a pod's `nodeSelector` and node affinity remotely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PlacementPolicy {
    /// Dropped: the remote scheduler places the pod anywhere (the default;
    /// home node labels rarely exist remotely).
    #[default]
    Drop,
    /// Kept as written.
    Keep,
    /// Kept with each label key renamed through `labelTranslation`; a key
    /// without a translation is dropped (with its term).
    Translate,
}

/// Upper bounds on what the node offers, whatever the remote cluster has.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Caps {
    /// CPU, as a quantity (`"64"`, `"500m"`).
    pub cpu: Option<String>,
    /// Memory, as a quantity (`"256Gi"`).
    pub memory: Option<String>,
    /// Pods.
    pub pods: Option<i64>,
}

/// A Secret holding the remote kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The key (default `kubeconfig`).
    #[serde(default = "default_key")]
    pub key: String,
}

fn default_key() -> String {
    "kubeconfig".into()
}

/// How the provider offloads pods (see the module docs for the file).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OffloadConfig {
    /// The remote cluster's kubeconfig file.
    pub kubeconfig: Option<PathBuf>,
    /// Or a home-cluster Secret holding it.
    pub kubeconfig_secret: Option<SecretKeyRef>,
    /// How namespaces are named remotely.
    pub namespaces: NamespaceMapping,
    /// What becomes of node selectors and node affinity.
    pub placement: PlacementPolicy,
    /// Home label key → remote label key, for [`PlacementPolicy::Translate`].
    pub label_translation: BTreeMap<String, String>,
    /// Home PersistentVolumeClaim name → remote claim name. A pod using a
    /// claim not listed here is refused.
    pub persistent_volume_claims: BTreeMap<String, String>,
    /// Let remote pods mount the remote namespace's default ServiceAccount
    /// token (default false: a remote pod gets no token at all, and never a
    /// home-cluster one).
    pub automount_remote_token: bool,
    /// Upper bounds on the node's capacity.
    pub caps: Caps,
    /// How often capacity is recomputed from the remote nodes, in seconds.
    pub capacity_refresh_seconds: u64,
    /// The remote client's sustained requests per second (0: no limit).
    pub qps: f32,
    /// The remote client's burst.
    pub burst: u32,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            kubeconfig_secret: None,
            namespaces: NamespaceMapping::Same,
            placement: PlacementPolicy::Drop,
            label_translation: BTreeMap::new(),
            persistent_volume_claims: BTreeMap::new(),
            automount_remote_token: false,
            caps: Caps::default(),
            capacity_refresh_seconds: 30,
            qps: 50.0,
            burst: 100,
        }
    }
}

impl OffloadConfig {
    /// The configuration in `text` (YAML or JSON); empty text is the
    /// default.
    ///
    /// ```
    /// use stratus_provider_kubernetes::{NamespaceMapping, OffloadConfig};
    ///
    /// let config = OffloadConfig::from_yaml("namespaces: {mode: prefix, value: home-}\ncaps: {pods: 20}\n").unwrap();
    /// assert_eq!(config.namespaces, NamespaceMapping::Prefix("home-".into()));
    /// assert_eq!(config.caps.pods, Some(20));
    /// assert!(OffloadConfig::from_yaml("namespace: {mode: same}").is_err());
    /// assert!(OffloadConfig::from_yaml("caps: {cpu: lots}").is_err());
    /// ```
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let config: Self = if text.trim().is_empty() {
            Self::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| ConfigError::Invalid(e.to_string()))?
        };
        config.validate()?;
        Ok(config)
    }

    /// The configuration in the file at `path`.
    pub fn from_file(path: impl Into<PathBuf>) -> Result<Self, ConfigError> {
        let path = path.into();
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// Check what serde cannot: quantities, names, budgets.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        for (what, value) in [
            ("caps.cpu", &self.caps.cpu),
            ("caps.memory", &self.caps.memory),
        ] {
            if let Some(v) = value
                && let Err(e) = ParsedQuantity::parse(v)
            {
                return invalid(format!("{what}: {v:?} is not a quantity: {e}"));
            }
        }
        if self.caps.pods.is_some_and(|p| p < 0) {
            return invalid("caps.pods must not be negative".into());
        }
        match &self.namespaces {
            NamespaceMapping::Single(ns) if !is_dns_label(ns) => {
                return invalid(format!(
                    "namespaces.value {ns:?} is not a valid namespace name"
                ));
            }
            NamespaceMapping::Prefix(p) if p.is_empty() || !is_dns_label(&format!("{p}x")) => {
                return invalid(format!(
                    "namespaces.value {p:?} is not a valid namespace prefix"
                ));
            }
            _ => {}
        }
        if self.kubeconfig.is_some() && self.kubeconfig_secret.is_some() {
            return invalid("give kubeconfig or kubeconfigSecret, not both".into());
        }
        if self.qps > 0.0 && self.burst == 0 {
            return invalid("burst must be at least 1 when qps is set".into());
        }
        if self.capacity_refresh_seconds == 0 {
            return invalid("capacityRefreshSeconds must be at least 1".into());
        }
        Ok(())
    }

    /// [`OffloadConfig::capacity_refresh_seconds`] as a duration.
    pub fn capacity_refresh(&self) -> Duration {
        Duration::from_secs(self.capacity_refresh_seconds)
    }
}

/// An RFC 1123 label: what a namespace name must be.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
