//! The resolver: each container's `env` and `envFrom` in order, with the
//! ConfigMaps, Secrets, Services, fields and resources they name, as the
//! Go virtual-kubelet resolves them.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    ConfigMap, EnvFromSource, EnvVar, Pod, ResourceRequirements, Secret, Service,
};

use super::expansion::expand;
use super::field_ref::{FieldValue, resolve_field};
use super::names::{is_env_var_name, is_relaxed_env_var_name};
use super::resource_ref::resolve_resource;
use super::service_links;
use super::types::{
    ContainerEnv, ContainerKind, DeferredVar, EnvError, EnvEvent, ResolveOptions, reasons,
};
use crate::{PodError, PodResources};

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

pub(super) struct ContainerView<'a> {
    pub(super) kind: ContainerKind,
    pub(super) name: &'a str,
    pub(super) env: &'a [EnvVar],
    pub(super) env_from: &'a [EnvFromSource],
    pub(super) resources: Option<&'a ResourceRequirements>,
}

pub(super) fn containers(pod: &Pod) -> Vec<ContainerView<'_>> {
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
pub(super) struct Resolver<'a> {
    pub(super) pod: &'a Pod,
    pub(super) namespace: &'a str,
    pub(super) pod_name: &'a str,
    pub(super) resources: &'a dyn PodResources,
    pub(super) options: &'a ResolveOptions,
    pub(super) config_maps: HashMap<String, Option<ConfigMap>>,
    pub(super) secrets: HashMap<String, Option<Secret>>,
    pub(super) events: Vec<EnvEvent>,
    pub(super) deferred: Vec<DeferredVar>,
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

    pub(super) async fn service_env(&self) -> Result<Vec<(String, String)>, EnvError> {
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

    pub(super) async fn container(
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
