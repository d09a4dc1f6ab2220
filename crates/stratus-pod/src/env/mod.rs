//! Environment and downward-API resolution, as a library a provider can call
//! (also again once it knows the pod's IP).
//!
//! [`resolve_pod_env`] computes every container's environment the way the
//! kubelet does: `envFrom` (with prefixes; invalid names skipped with an
//! `InvalidEnvironmentVariableNames` event), `env` values with `$(VAR)`
//! expansion, `configMapKeyRef` / `secretKeyRef` with Go's optional-versus-
//! mandatory rules and the virtual-kubelet's event reasons, `fieldRef` for the
//! metadata, spec and status fields (including `status.podIP`, which the Go
//! virtual-kubelet cannot resolve), `resourceFieldRef` with divisors (which it
//! silently drops), and service-link variables. Secrets, ConfigMaps and
//! Services come through [`PodResources`], never from the API directly.
//!
//! It returns the environment and the events to record; it never panics on
//! odd input.
//!
//! ```
//! use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, EnvVarSource, ConfigMapKeySelector, Pod, PodSpec};
//! use stratus_pod::env::{resolve_pod_env, ResolveOptions};
//! use stratus_pod::InMemoryResources;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let resources = InMemoryResources::new();
//! let mut cm = ConfigMap::default();
//! cm.metadata.namespace = Some("default".into());
//! cm.metadata.name = Some("settings".into());
//! cm.data = Some([("greeting".to_string(), "hello".to_string())].into());
//! resources.insert_config_map(cm);
//!
//! let pod = Pod {
//!     metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
//!         name: Some("web".into()), namespace: Some("default".into()), ..Default::default()
//!     },
//!     spec: Some(PodSpec {
//!         enable_service_links: Some(false),
//!         containers: vec![Container {
//!             name: "app".into(),
//!             env: Some(vec![
//!                 EnvVar {
//!                     name: "GREETING".into(),
//!                     value_from: Some(EnvVarSource {
//!                         config_map_key_ref: Some(ConfigMapKeySelector {
//!                             name: "settings".into(), key: "greeting".into(), optional: None,
//!                         }),
//!                         ..Default::default()
//!                     }),
//!                     ..Default::default()
//!                 },
//!                 EnvVar { name: "MESSAGE".into(), value: Some("$(GREETING), world".into()), ..Default::default() },
//!             ]),
//!             ..Default::default()
//!         }],
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//!
//! let resolved = resolve_pod_env(&pod, &resources, &ResolveOptions::default()).await.unwrap();
//! let env = &resolved.containers[0].env;
//! assert_eq!(env[1].name, "MESSAGE");
//! assert_eq!(env[1].value.as_deref(), Some("hello, world"));
//! assert!(resolved.events.is_empty());
//! # });
//! ```

mod expansion;
mod field_ref;
mod names;
mod quantity;
mod resource_ref;
mod service_links;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use k8s_openapi::api::core::v1::{
    ConfigMap, EnvFromSource, EnvVar, Pod, ResourceRequirements, Secret, Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use expansion::expand;
pub use names::{is_env_var_name, is_relaxed_env_var_name};
pub use quantity::{ParsedQuantity, QuantityError};

use crate::{PodError, PodErrorKind, PodResources};
use field_ref::{FieldValue, resolve_field};
use resource_ref::resolve_resource;

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

/// Options of [`resolve_pod_env`].
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

/// Variables in insertion order; a repeated name keeps its first position.
#[derive(Default)]
struct OrderedEnv {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl OrderedEnv {
    fn set(&mut self, name: String, value: String) {
        match self.index.get(&name) {
            Some(&i) => self.vars[i].1 = value,
            None => {
                self.index.insert(name.clone(), self.vars.len());
                self.vars.push((name, value));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.index.get(name).map(|&i| self.vars[i].1.as_str())
    }
}

struct ContainerView<'a> {
    kind: ContainerKind,
    name: &'a str,
    env: &'a [EnvVar],
    env_from: &'a [EnvFromSource],
    resources: Option<&'a ResourceRequirements>,
}

fn containers(pod: &Pod) -> Vec<ContainerView<'_>> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in spec.init_containers.iter().flatten() {
        out.push(ContainerView {
            kind: ContainerKind::Init,
            name: &c.name,
            env: c.env.as_deref().unwrap_or_default(),
            env_from: c.env_from.as_deref().unwrap_or_default(),
            resources: c.resources.as_ref(),
        });
    }
    for c in &spec.containers {
        out.push(ContainerView {
            kind: ContainerKind::Regular,
            name: &c.name,
            env: c.env.as_deref().unwrap_or_default(),
            env_from: c.env_from.as_deref().unwrap_or_default(),
            resources: c.resources.as_ref(),
        });
    }
    for c in spec.ephemeral_containers.iter().flatten() {
        out.push(ContainerView {
            kind: ContainerKind::Ephemeral,
            name: &c.name,
            env: c.env.as_deref().unwrap_or_default(),
            env_from: c.env_from.as_deref().unwrap_or_default(),
            resources: c.resources.as_ref(),
        });
    }
    out
}

/// The state of one resolution: lookups are cached per pod, as the kubelet
/// caches them per container start.
struct Resolver<'a> {
    pod: &'a Pod,
    namespace: &'a str,
    pod_name: &'a str,
    resources: &'a dyn PodResources,
    options: &'a ResolveOptions,
    config_maps: HashMap<String, Option<ConfigMap>>,
    secrets: HashMap<String, Option<Secret>>,
    events: Vec<EnvEvent>,
    deferred: Vec<DeferredVar>,
}

enum Lookup<T> {
    Found(T),
    Missing,
    Failed(PodError),
}

impl Resolver<'_> {
    fn event(&mut self, reason: &'static str, message: String) {
        self.events.push(EnvEvent { reason, message });
    }

    async fn config_map(&mut self, name: &str) -> Lookup<ConfigMap> {
        if let Some(cached) = self.config_maps.get(name) {
            return cached.clone().map_or(Lookup::Missing, Lookup::Found);
        }
        match self.resources.get_config_map(self.namespace, name).await {
            Ok(found) => {
                self.config_maps.insert(name.to_owned(), found.clone());
                found.map_or(Lookup::Missing, Lookup::Found)
            }
            Err(e) if e.is_not_found() => {
                self.config_maps.insert(name.to_owned(), None);
                Lookup::Missing
            }
            Err(e) => Lookup::Failed(e),
        }
    }

    async fn secret(&mut self, name: &str) -> Lookup<Secret> {
        if let Some(cached) = self.secrets.get(name) {
            return cached.clone().map_or(Lookup::Missing, Lookup::Found);
        }
        match self.resources.get_secret(self.namespace, name).await {
            Ok(found) => {
                self.secrets.insert(name.to_owned(), found.clone());
                found.map_or(Lookup::Missing, Lookup::Found)
            }
            Err(e) if e.is_not_found() => {
                self.secrets.insert(name.to_owned(), None);
                Lookup::Missing
            }
            Err(e) => Lookup::Failed(e),
        }
    }

    async fn service_env(&self) -> Result<Vec<(String, String)>, EnvError> {
        let links = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links)
            .unwrap_or(true);
        let mut services: Vec<Service> = Vec::new();
        if links {
            services = self
                .resources
                .list_services(self.namespace)
                .await
                .map_err(EnvError::ServiceList)?;
        }
        // The master service is always linked, even without service links.
        let master_listed = links && self.namespace == service_links::MASTER_NAMESPACE;
        if !master_listed {
            let defaults = self
                .resources
                .list_services(service_links::MASTER_NAMESPACE)
                .await
                .map_err(EnvError::ServiceList)?;
            services.extend(
                defaults
                    .into_iter()
                    .filter(|s| s.metadata.name.as_deref() == Some(service_links::MASTER_SERVICE)),
            );
        }
        let mut by_name: BTreeMap<&str, &Service> = BTreeMap::new();
        for svc in &services {
            let name = svc.metadata.name.as_deref().unwrap_or_default();
            let in_default = svc.metadata.namespace.as_deref().unwrap_or(self.namespace)
                == service_links::MASTER_NAMESPACE;
            // The master service wins over a same-named service of the pod's namespace.
            if name == service_links::MASTER_SERVICE && in_default {
                by_name.insert(name, svc);
            } else {
                by_name.entry(name).or_insert(svc);
            }
        }
        let ordered: Vec<&Service> = by_name.into_values().collect();
        Ok(service_links::from_services(&ordered))
    }

    fn valid_name(&self, name: &str) -> bool {
        if self.options.relaxed_names {
            is_relaxed_env_var_name(name)
        } else {
            is_env_var_name(name)
        }
    }

    async fn env_from(
        &mut self,
        env: &mut OrderedEnv,
        sources: &[EnvFromSource],
    ) -> Result<(), EnvError> {
        for source in sources {
            let prefix = source.prefix.as_deref().unwrap_or_default();
            let (kind, name, data): (&str, String, Vec<(String, String)>) =
                if let Some(cm_ref) = &source.config_map_ref {
                    let name = cm_ref.name.clone();
                    let optional = cm_ref.optional.unwrap_or(false);
                    match self.config_map(&name).await {
                        Lookup::Found(cm) => (
                            "configmap",
                            name,
                            cm.data.unwrap_or_default().into_iter().collect(),
                        ),
                        Lookup::Missing if optional => {
                            self.event(
                                reasons::OPTIONAL_CONFIG_MAP_NOT_FOUND,
                                format!("configmap {name:?} not found"),
                            );
                            continue;
                        }
                        Lookup::Missing => {
                            self.event(
                                reasons::MANDATORY_CONFIG_MAP_NOT_FOUND,
                                format!("configmap {name:?} not found"),
                            );
                            return Err(EnvError::ConfigMapNotFound(name));
                        }
                        Lookup::Failed(source) => {
                            let reason = if optional {
                                reasons::FAILED_TO_READ_OPTIONAL_CONFIG_MAP
                            } else {
                                reasons::FAILED_TO_READ_MANDATORY_CONFIG_MAP
                            };
                            self.event(
                                reason,
                                format!("failed to read configmap {name:?}: {source}"),
                            );
                            if optional {
                                continue;
                            }
                            return Err(EnvError::ConfigMapRead { name, source });
                        }
                    }
                } else if let Some(secret_ref) = &source.secret_ref {
                    let name = secret_ref.name.clone();
                    let optional = secret_ref.optional.unwrap_or(false);
                    match self.secret(&name).await {
                        Lookup::Found(secret) => (
                            "secret",
                            name,
                            secret
                                .data
                                .unwrap_or_default()
                                .into_iter()
                                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                                .collect(),
                        ),
                        Lookup::Missing if optional => {
                            self.event(
                                reasons::OPTIONAL_SECRET_NOT_FOUND,
                                format!("secret {name:?} not found"),
                            );
                            continue;
                        }
                        Lookup::Missing => {
                            self.event(
                                reasons::MANDATORY_SECRET_NOT_FOUND,
                                format!("secret {name:?} not found"),
                            );
                            return Err(EnvError::SecretNotFound(name));
                        }
                        Lookup::Failed(source) => {
                            let reason = if optional {
                                reasons::FAILED_TO_READ_OPTIONAL_SECRET
                            } else {
                                reasons::FAILED_TO_READ_MANDATORY_SECRET
                            };
                            self.event(reason, format!("failed to read secret {name:?}: {source}"));
                            if optional {
                                continue;
                            }
                            return Err(EnvError::SecretRead { name, source });
                        }
                    }
                } else {
                    continue;
                };
            let mut invalid = Vec::new();
            for (key, value) in data {
                let full = format!("{prefix}{key}");
                if self.valid_name(&full) {
                    env.set(full, value);
                } else {
                    invalid.push(full);
                }
            }
            if !invalid.is_empty() {
                invalid.sort();
                self.event(
                    reasons::INVALID_ENVIRONMENT_VARIABLE_NAMES,
                    format!(
                        "keys [{}] from {kind} {}/{name} were skipped since they are invalid as environment variable names",
                        invalid.join(", "),
                        self.namespace
                    ),
                );
            }
        }
        Ok(())
    }

    /// The value of one `env` entry; `None` skips the variable.
    async fn env_var(
        &mut self,
        container: &ContainerView<'_>,
        var: &EnvVar,
        env: &OrderedEnv,
        service_env: &[(String, String)],
    ) -> Result<Option<String>, EnvError> {
        let literal = var.value.as_deref().unwrap_or_default();
        let source = match var.value_from.as_ref() {
            Some(source) if literal.is_empty() => source,
            _ => {
                let lookup = |name: &str| {
                    env.get(name).map(str::to_owned).or_else(|| {
                        service_env
                            .iter()
                            .find(|(k, _)| k == name)
                            .map(|(_, v)| v.clone())
                    })
                };
                return Ok(Some(expand(literal, lookup)));
            }
        };
        if let Some(selector) = &source.config_map_key_ref {
            let optional = selector.optional.unwrap_or(false);
            let name = selector.name.clone();
            let key = selector.key.clone();
            return match self.config_map(&name).await {
                Lookup::Found(cm) => match cm.data.as_ref().and_then(|d| d.get(&key)) {
                    Some(value) => Ok(Some(value.clone())),
                    None if optional => {
                        self.event(
                            reasons::OPTIONAL_CONFIG_MAP_KEY_NOT_FOUND,
                            format!(
                                "skipping optional envvar {:?}: key {key:?} does not exist in configmap {name:?}",
                                var.name
                            ),
                        );
                        Ok(None)
                    }
                    None => {
                        self.event(
                            reasons::MANDATORY_CONFIG_MAP_KEY_NOT_FOUND,
                            format!("key {key:?} does not exist in configmap {name:?}"),
                        );
                        Err(EnvError::ConfigMapKeyNotFound {
                            name,
                            key,
                            pod: self.pod_name.to_owned(),
                        })
                    }
                },
                Lookup::Missing if optional => {
                    self.event(
                        reasons::OPTIONAL_CONFIG_MAP_NOT_FOUND,
                        format!(
                            "skipping optional envvar {:?}: configmap {name:?} not found",
                            var.name
                        ),
                    );
                    Ok(None)
                }
                Lookup::Missing => {
                    self.event(
                        reasons::MANDATORY_CONFIG_MAP_NOT_FOUND,
                        format!("configmap {name:?} not found"),
                    );
                    Err(EnvError::ConfigMapNotFound(name))
                }
                Lookup::Failed(e) if optional => {
                    self.event(
                        reasons::FAILED_TO_READ_OPTIONAL_CONFIG_MAP,
                        format!(
                            "skipping optional envvar {:?}: failed to read configmap {name:?}: {e}",
                            var.name
                        ),
                    );
                    Ok(None)
                }
                Lookup::Failed(source) => {
                    self.event(
                        reasons::FAILED_TO_READ_MANDATORY_CONFIG_MAP,
                        format!("failed to read configmap {name:?}: {source}"),
                    );
                    Err(EnvError::ConfigMapRead { name, source })
                }
            };
        }
        if let Some(selector) = &source.secret_key_ref {
            let optional = selector.optional.unwrap_or(false);
            let name = selector.name.clone();
            let key = selector.key.clone();
            return match self.secret(&name).await {
                Lookup::Found(secret) => match secret.data.as_ref().and_then(|d| d.get(&key)) {
                    Some(value) => Ok(Some(String::from_utf8_lossy(&value.0).into_owned())),
                    None if optional => {
                        self.event(
                            reasons::OPTIONAL_SECRET_KEY_NOT_FOUND,
                            format!(
                                "skipping optional envvar {:?}: key {key:?} does not exist in secret {name:?}",
                                var.name
                            ),
                        );
                        Ok(None)
                    }
                    None => {
                        self.event(
                            reasons::MANDATORY_SECRET_KEY_NOT_FOUND,
                            format!("key {key:?} does not exist in secret {name:?}"),
                        );
                        Err(EnvError::SecretKeyNotFound {
                            name,
                            key,
                            pod: self.pod_name.to_owned(),
                        })
                    }
                },
                Lookup::Missing if optional => {
                    self.event(
                        reasons::OPTIONAL_SECRET_NOT_FOUND,
                        format!(
                            "skipping optional envvar {:?}: secret {name:?} not found",
                            var.name
                        ),
                    );
                    Ok(None)
                }
                Lookup::Missing => {
                    self.event(
                        reasons::MANDATORY_SECRET_NOT_FOUND,
                        format!("secret {name:?} not found"),
                    );
                    Err(EnvError::SecretNotFound(name))
                }
                Lookup::Failed(e) if optional => {
                    self.event(
                        reasons::FAILED_TO_READ_OPTIONAL_SECRET,
                        format!(
                            "skipping optional envvar {:?}: failed to read secret {name:?}: {e}",
                            var.name
                        ),
                    );
                    Ok(None)
                }
                Lookup::Failed(source) => {
                    self.event(
                        reasons::FAILED_TO_READ_MANDATORY_SECRET,
                        format!("failed to read secret {name:?}: {source}"),
                    );
                    Err(EnvError::SecretRead { name, source })
                }
            };
        }
        if let Some(field) = &source.field_ref {
            return match resolve_field(self.pod, field.api_version.as_deref(), &field.field_path) {
                Ok(FieldValue::Known(v)) => Ok(Some(v)),
                Ok(FieldValue::NotYetKnown) if self.options.defer_unknown_status => {
                    self.deferred.push(DeferredVar {
                        container: container.name.to_owned(),
                        name: var.name.clone(),
                        field_path: field.field_path.clone(),
                    });
                    Ok(Some(String::new()))
                }
                Ok(FieldValue::NotYetKnown) => Err(EnvError::StatusNotKnown {
                    name: var.name.clone(),
                    field_path: field.field_path.clone(),
                }),
                Err(e) => Err(EnvError::FieldRef {
                    name: var.name.clone(),
                    message: e.to_string(),
                }),
            };
        }
        if let Some(selector) = &source.resource_field_ref {
            let resources = match selector.container_name.as_deref().filter(|n| !n.is_empty()) {
                None => container.resources,
                Some(target) => {
                    let found = containers(self.pod)
                        .into_iter()
                        .find(|c| c.name == target && c.kind != ContainerKind::Ephemeral);
                    match found {
                        Some(c) => c.resources,
                        None => {
                            return Err(EnvError::ResourceFieldRef {
                                name: var.name.clone(),
                                message: format!(
                                    "container {target:?} referenced by resourceFieldRef not found in the pod"
                                ),
                            });
                        }
                    }
                }
            };
            return resolve_resource(selector, resources, self.options.node_allocatable.as_ref())
                .map(Some)
                .map_err(|e| EnvError::ResourceFieldRef {
                    name: var.name.clone(),
                    message: e.to_string(),
                });
        }
        Err(EnvError::UnsupportedSource(var.name.clone()))
    }

    async fn container(
        &mut self,
        container: &ContainerView<'_>,
        service_env: &[(String, String)],
    ) -> Result<ContainerEnv, EnvError> {
        let mut env = OrderedEnv::default();
        self.env_from(&mut env, container.env_from).await?;
        for var in container.env {
            if let Some(value) = self.env_var(container, var, &env, service_env).await? {
                env.set(var.name.clone(), value);
            }
        }
        for (name, value) in service_env {
            if env.get(name).is_none() {
                env.set(name.clone(), value.clone());
            }
        }
        Ok(ContainerEnv {
            kind: container.kind,
            name: container.name.to_owned(),
            env: env
                .vars
                .into_iter()
                .map(|(name, value)| EnvVar {
                    name,
                    value: Some(value),
                    value_from: None,
                })
                .collect(),
        })
    }
}

/// Resolve the environment of every container of `pod`.
///
/// Status fields (`status.podIP`, ...) are read from `pod.status`: a provider
/// that learns the pod's IP sets it there and resolves again.
pub async fn resolve_pod_env(
    pod: &Pod,
    resources: &dyn PodResources,
    options: &ResolveOptions,
) -> Result<ResolvedEnv, EnvFailure> {
    let mut resolver = Resolver {
        pod,
        namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod_name: pod.metadata.name.as_deref().unwrap_or_default(),
        resources,
        options,
        config_maps: HashMap::new(),
        secrets: HashMap::new(),
        events: Vec::new(),
        deferred: Vec::new(),
    };
    let views = containers(pod);
    if views.is_empty() {
        return Ok(ResolvedEnv::default());
    }
    let service_env = match resolver.service_env().await {
        Ok(v) => v,
        Err(error) => {
            return Err(EnvFailure {
                container: views[0].name.to_owned(),
                error,
                events: resolver.events,
            });
        }
    };
    let mut out = Vec::with_capacity(views.len());
    for view in &views {
        match resolver.container(view, &service_env).await {
            Ok(c) => out.push(c),
            Err(error) => {
                return Err(EnvFailure {
                    container: view.name.to_owned(),
                    error,
                    events: resolver.events,
                });
            }
        }
    }
    Ok(ResolvedEnv {
        containers: out,
        events: resolver.events,
        deferred: resolver.deferred,
    })
}

/// Write a resolution into the pod: each container's `env` becomes the
/// resolved list and its `envFrom` is cleared, as the Go virtual-kubelet does
/// before `CreatePod`.
pub fn apply_resolved_env(pod: &mut Pod, resolved: &ResolvedEnv) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let find = |kind: ContainerKind, name: &str| {
        resolved
            .containers
            .iter()
            .find(|c| c.kind == kind && c.name == name)
            .map(|c| c.env.clone())
    };
    for c in spec.init_containers.iter_mut().flatten() {
        if let Some(env) = find(ContainerKind::Init, &c.name) {
            c.env = Some(env);
            c.env_from = None;
        }
    }
    for c in &mut spec.containers {
        if let Some(env) = find(ContainerKind::Regular, &c.name) {
            c.env = Some(env);
            c.env_from = None;
        }
    }
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        if let Some(env) = find(ContainerKind::Ephemeral, &c.name) {
            c.env = Some(env);
            c.env_from = None;
        }
    }
}

/// True if two resolved environments hold the same variables, ignoring
/// order (the Go virtual-kubelet compared them in map order and issued
/// spurious updates).
pub fn env_equal(a: &[EnvVar], b: &[EnvVar]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let key = |v: &EnvVar| (v.name.clone(), v.value.clone().unwrap_or_default());
    let mut left: Vec<_> = a.iter().map(key).collect();
    let mut right: Vec<_> = b.iter().map(key).collect();
    left.sort();
    right.sort();
    left == right
}

#[cfg(test)]
mod tests;
