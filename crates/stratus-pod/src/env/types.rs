//! The public types of environment resolution: what it reports (events,
//! errors, failures), what it resolves (each container's environment) and
//! its options.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::{PodError, PodErrorKind};

/// The event reasons of environment resolution, exactly as the Go
/// virtual-kubelet records them (all are `Warning` events on the pod).
pub mod reasons {
    /// An optional ConfigMap does not exist.
    pub const OPTIONAL_CONFIG_MAP_NOT_FOUND: &str = "OptionalConfigMapNotFound";
    /// A key of an optional ConfigMap reference does not exist.
    pub const OPTIONAL_CONFIG_MAP_KEY_NOT_FOUND: &str = "OptionalConfigMapKeyNotFound";
    /// An optional ConfigMap could not be read.
    pub const FAILED_TO_READ_OPTIONAL_CONFIG_MAP: &str = "FailedToReadOptionalConfigMap";
    /// An optional Secret does not exist.
    pub const OPTIONAL_SECRET_NOT_FOUND: &str = "OptionalSecretNotFound";
    /// A key of an optional Secret reference does not exist.
    pub const OPTIONAL_SECRET_KEY_NOT_FOUND: &str = "OptionalSecretKeyNotFound";
    /// An optional Secret could not be read.
    pub const FAILED_TO_READ_OPTIONAL_SECRET: &str = "FailedToReadOptionalSecret";
    /// A mandatory ConfigMap does not exist.
    pub const MANDATORY_CONFIG_MAP_NOT_FOUND: &str = "MandatoryConfigMapNotFound";
    /// A key of a mandatory ConfigMap reference does not exist.
    pub const MANDATORY_CONFIG_MAP_KEY_NOT_FOUND: &str = "MandatoryConfigMapKeyNotFound";
    /// A mandatory ConfigMap could not be read.
    pub const FAILED_TO_READ_MANDATORY_CONFIG_MAP: &str = "FailedToReadMandatoryConfigMap";
    /// A mandatory Secret does not exist.
    pub const MANDATORY_SECRET_NOT_FOUND: &str = "MandatorySecretNotFound";
    /// A key of a mandatory Secret reference does not exist.
    pub const MANDATORY_SECRET_KEY_NOT_FOUND: &str = "MandatorySecretKeyNotFound";
    /// A mandatory Secret could not be read.
    pub const FAILED_TO_READ_MANDATORY_SECRET: &str = "FailedToReadMandatorySecret";
    /// Keys of an `envFrom` source were skipped as invalid names.
    pub const INVALID_ENVIRONMENT_VARIABLE_NAMES: &str = "InvalidEnvironmentVariableNames";
}

/// An event to record on the pod (type `Warning`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvEvent {
    /// One of [`reasons`].
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// Which list of the pod spec a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// `spec.initContainers`.
    Init,
    /// `spec.containers`.
    Regular,
    /// `spec.ephemeralContainers`.
    Ephemeral,
}

/// One container's resolved environment.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerEnv {
    /// The container's list.
    pub kind: ContainerKind,
    /// The container's name.
    pub name: String,
    /// Plain `name = value` variables, in declaration order (`envFrom`
    /// first, then `env`, then service links).
    pub env: Vec<EnvVar>,
}

/// A variable left empty because a status field it reads is not known yet
/// (see [`ResolveOptions::defer_unknown_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredVar {
    /// The container.
    pub container: String,
    /// The variable.
    pub name: String,
    /// The field path, e.g. `status.podIP`.
    pub field_path: String,
}

/// The resolved environment of a pod.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResolvedEnv {
    /// Init, regular and ephemeral containers, in that order.
    pub containers: Vec<ContainerEnv>,
    /// Events to record on the pod.
    pub events: Vec<EnvEvent>,
    /// Variables waiting for a status field.
    pub deferred: Vec<DeferredVar>,
}

/// Why a pod's environment cannot be resolved. The messages are the Go
/// virtual-kubelet's where it has one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// A mandatory ConfigMap does not exist.
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    /// A mandatory ConfigMap could not be read.
    #[error("failed to read configmap {name:?}: {source}")]
    ConfigMapRead {
        /// The ConfigMap.
        name: String,
        /// The lookup error.
        #[source]
        source: PodError,
    },
    /// A mandatory ConfigMap key does not exist.
    #[error("configmap {name:?} doesn't contain the {key:?} key required by pod {pod}")]
    ConfigMapKeyNotFound {
        /// The ConfigMap.
        name: String,
        /// The key.
        key: String,
        /// The pod's name.
        pod: String,
    },
    /// A mandatory Secret does not exist.
    #[error("secret {0:?} not found")]
    SecretNotFound(String),
    /// A mandatory Secret could not be read.
    #[error("failed to read secret {name:?}: {source}")]
    SecretRead {
        /// The Secret.
        name: String,
        /// The lookup error.
        #[source]
        source: PodError,
    },
    /// A mandatory Secret key does not exist.
    #[error("secret {name:?} doesn't contain the {key:?} key required by pod {pod}")]
    SecretKeyNotFound {
        /// The Secret.
        name: String,
        /// The key.
        key: String,
        /// The pod's name.
        pod: String,
    },
    /// The Services could not be listed for service links.
    #[error("failed to list services for service links: {0}")]
    ServiceList(#[source] PodError),
    /// A `fieldRef` path cannot be resolved.
    #[error("variable {name}: {message}")]
    FieldRef {
        /// The variable.
        name: String,
        /// Why.
        message: String,
    },
    /// A status field is not known yet and deferral is off.
    #[error("variable {name}: {field_path} is not known yet")]
    StatusNotKnown {
        /// The variable.
        name: String,
        /// The field path.
        field_path: String,
    },
    /// A `resourceFieldRef` cannot be resolved.
    #[error("variable {name}: {message}")]
    ResourceFieldRef {
        /// The variable.
        name: String,
        /// Why.
        message: String,
    },
    /// A `valueFrom` source this library does not resolve (for example
    /// `fileKeyRef`, which reads a volume on the node).
    #[error("variable {0}: unsupported valueFrom source")]
    UnsupportedSource(String),
}

impl EnvError {
    /// How the node should treat the error: missing objects are `NotFound`
    /// (retry later), unresolvable references `InvalidInput`.
    pub fn kind(&self) -> PodErrorKind {
        match self {
            Self::ConfigMapNotFound(_)
            | Self::ConfigMapKeyNotFound { .. }
            | Self::SecretNotFound(_)
            | Self::SecretKeyNotFound { .. } => PodErrorKind::NotFound,
            Self::ConfigMapRead { .. } | Self::SecretRead { .. } | Self::ServiceList(_) => {
                PodErrorKind::Other
            }
            Self::StatusNotKnown { .. } => PodErrorKind::Unavailable { retry_after: None },
            Self::FieldRef { .. } | Self::ResourceFieldRef { .. } | Self::UnsupportedSource(_) => {
                PodErrorKind::InvalidInput
            }
        }
    }
}

/// A failed resolution: the error, the container it happened in, and the
/// events recorded up to and including the failure (record them too).
#[derive(Debug)]
pub struct EnvFailure {
    /// The container being resolved.
    pub container: String,
    /// What went wrong.
    pub error: EnvError,
    /// Events to record on the pod.
    pub events: Vec<EnvEvent>,
}

impl fmt::Display for EnvFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "container {}: {}", self.container, self.error)
    }
}

impl std::error::Error for EnvFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<EnvFailure> for PodError {
    fn from(failure: EnvFailure) -> Self {
        let kind = failure.error.kind();
        PodError::new(kind, failure.to_string()).with_source(failure)
    }
}

/// Options of [`resolve_pod_env`](super::resolve_pod_env).
#[derive(Debug, Clone, Default)]
pub struct ResolveOptions {
    /// The node's allocatable resources: the value of `limits.cpu`,
    /// `limits.memory` and `limits.ephemeral-storage` references when the
    /// container sets no limit, as the kubelet does.
    pub node_allocatable: Option<BTreeMap<String, Quantity>>,
    /// When a `fieldRef` reads `status.podIP`, `status.podIPs`,
    /// `status.hostIP` or `status.hostIPs` and the pod does not carry it yet:
    /// `false` (the default) fails with [`EnvError::StatusNotKnown`]; `true`
    /// sets the variable to `""` and lists it in [`ResolvedEnv::deferred`], so
    /// a provider can create the pod and resolve again once it has an IP.
    pub defer_unknown_status: bool,
    /// Accept `envFrom` keys under Kubernetes 1.34's relaxed name rules
    /// (printable ASCII except `=`) instead of the strict rules the Go
    /// virtual-kubelet applies.
    pub relaxed_names: bool,
}
