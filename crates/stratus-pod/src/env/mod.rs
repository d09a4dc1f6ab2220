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
mod resolver;
mod resource_ref;
mod service_links;
mod types;

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{EnvVar, Pod};

pub use expansion::expand;
pub use names::{is_env_var_name, is_relaxed_env_var_name};
pub use quantity::{ParsedQuantity, QuantityError};

use crate::PodResources;

use resolver::{Resolver, containers};
pub use types::{
    ContainerEnv, ContainerKind, DeferredVar, EnvError, EnvEvent, EnvFailure, ResolveOptions,
    ResolvedEnv, reasons,
};

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
