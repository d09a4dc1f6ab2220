//! The ConfigMaps and Secrets a pod needs, copied into its remote namespace
//! before the pod is created and kept in step with the home objects.
//!
//! A copy carries the node's label; an object of that name the node did not
//! make is used as it is, never overwritten or deleted.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use stratus_pod::{PodError, PodResources, ResourceKind, Result};

use crate::naming::{NODE_LABEL, made_by};

/// A ConfigMap or Secret a pod uses, by name, and whether the pod can do
/// without it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Dependency {
    pub(crate) kind: ResourceKind,
    pub(crate) name: String,
}

/// Every ConfigMap and Secret `pod`'s spec refers to (volumes, projected
/// sources, env and envFrom left unresolved, image pull secrets), with
/// whether all of its references are optional.
pub(crate) fn references(pod: &Pod) -> BTreeMap<Dependency, bool> {
    let mut found: BTreeMap<Dependency, bool> = BTreeMap::new();
    let mut add = |kind, name: &str, optional: Option<bool>| {
        if name.is_empty() {
            return;
        }
        let optional = optional.unwrap_or(false);
        found
            .entry(Dependency {
                kind,
                name: name.to_owned(),
            })
            .and_modify(|o| *o &= optional)
            .or_insert(optional);
    };
    let Some(spec) = pod.spec.as_ref() else {
        return found;
    };
    for volume in spec.volumes.iter().flatten() {
        if let Some(cm) = &volume.config_map {
            add(ResourceKind::ConfigMap, &cm.name, cm.optional);
        }
        if let Some(s) = &volume.secret {
            add(
                ResourceKind::Secret,
                s.secret_name.as_deref().unwrap_or_default(),
                s.optional,
            );
        }
        for source in volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
        {
            if let Some(cm) = &source.config_map {
                add(ResourceKind::ConfigMap, &cm.name, cm.optional);
            }
            if let Some(s) = &source.secret {
                add(ResourceKind::Secret, &s.name, s.optional);
            }
        }
    }
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        for from in c.env_from.iter().flatten() {
            if let Some(cm) = &from.config_map_ref {
                add(ResourceKind::ConfigMap, &cm.name, cm.optional);
            }
            if let Some(s) = &from.secret_ref {
                add(ResourceKind::Secret, &s.name, s.optional);
            }
        }
        for var in c.env.iter().flatten() {
            let Some(source) = &var.value_from else {
                continue;
            };
            if let Some(r) = &source.config_map_key_ref {
                add(ResourceKind::ConfigMap, &r.name, r.optional);
            }
            if let Some(r) = &source.secret_key_ref {
                add(ResourceKind::Secret, &r.name, r.optional);
            }
        }
    }
    for s in spec.image_pull_secrets.iter().flatten() {
        add(ResourceKind::Secret, &s.name, Some(false));
    }
    found
}

fn copy_meta(home: &ObjectMeta, namespace: &str, node_label: &str) -> ObjectMeta {
    let mut labels = home.labels.clone().unwrap_or_default();
    labels.insert(NODE_LABEL.into(), node_label.into());
    ObjectMeta {
        name: home.name.clone(),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels),
        annotations: home.annotations.clone(),
        ..Default::default()
    }
}

/// What [`copy`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copied {
    /// The remote copy was written.
    Written,
    /// The home object is missing and the pod can do without it.
    SkippedOptional,
    /// The remote namespace has an object of that name the node did not
    /// make; it is used as it is.
    Foreign,
}

/// Copy home `namespace/dep` into `remote_namespace`, creating or
/// replacing the node's copy.
pub(crate) async fn copy(
    remote: &kube::Client,
    resources: &dyn PodResources,
    namespace: &str,
    remote_namespace: &str,
    dep: &Dependency,
    optional: bool,
    node_label: &str,
) -> Result<Copied> {
    let missing = || {
        if optional {
            Ok(Copied::SkippedOptional)
        } else {
            // The kubelet waits for a missing volume source; so does the
            // node (retried, the pod stays Pending).
            Err(PodError::unavailable(
                None,
                format!("{} {namespace}/{} not found", dep.kind, dep.name),
            ))
        }
    };
    match dep.kind {
        ResourceKind::ConfigMap => {
            let Some(home) = resources.get_config_map(namespace, &dep.name).await? else {
                return missing();
            };
            let copy = ConfigMap {
                metadata: copy_meta(&home.metadata, remote_namespace, node_label),
                data: home.data,
                binary_data: home.binary_data,
                immutable: home.immutable,
            };
            write(
                Api::namespaced(remote.clone(), remote_namespace),
                copy,
                node_label,
            )
            .await
        }
        ResourceKind::Secret => {
            let Some(home) = resources.get_secret(namespace, &dep.name).await? else {
                return missing();
            };
            let copy = Secret {
                metadata: copy_meta(&home.metadata, remote_namespace, node_label),
                data: home.data,
                string_data: None,
                type_: home.type_,
                immutable: home.immutable,
            };
            write(
                Api::namespaced(remote.clone(), remote_namespace),
                copy,
                node_label,
            )
            .await
        }
    }
}

/// Create `object`, or replace the node's earlier copy of it.
async fn write<K>(api: Api<K>, mut object: K, node_label: &str) -> Result<Copied>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    loop {
        match api.get_opt(&name).await.map_err(remote_error)? {
            None => match api.create(&PostParams::default(), &object).await {
                Ok(_) => return Ok(Copied::Written),
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(remote_error(e)),
            },
            Some(current) if !made_by(current.meta(), node_label) => return Ok(Copied::Foreign),
            Some(current) => {
                object.meta_mut().resource_version = current.meta().resource_version.clone();
                let unchanged = same_content(&current, &object);
                if unchanged {
                    return Ok(Copied::Written);
                }
                match api.replace(&name, &PostParams::default(), &object).await {
                    Ok(_) => return Ok(Copied::Written),
                    Err(kube::Error::Api(e)) if e.code == 409 => continue,
                    // An immutable object changed at home: the remote copy
                    // must be made anew.
                    Err(kube::Error::Api(e)) if e.code == 422 => {
                        api.delete(&name, &DeleteParams::default())
                            .await
                            .map_err(remote_error)?;
                        object.meta_mut().resource_version = None;
                        continue;
                    }
                    Err(e) => return Err(remote_error(e)),
                }
            }
        }
    }
}

/// Whether two objects hold the same data, labels and annotations.
fn same_content<K: kube::Resource + serde::Serialize>(a: &K, b: &K) -> bool {
    let body = |k: &K| {
        let mut value = serde_json::to_value(k).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.remove("metadata");
        }
        value
    };
    a.meta().labels == b.meta().labels
        && a.meta().annotations == b.meta().annotations
        && body(a) == body(b)
}

/// Delete the node's copy of `dep` in `remote_namespace` (nothing when the
/// object is not the node's or already gone).
pub(crate) async fn delete(
    remote: &kube::Client,
    remote_namespace: &str,
    dep: &Dependency,
    node_label: &str,
) -> Result<()> {
    match dep.kind {
        ResourceKind::ConfigMap => {
            delete_own::<ConfigMap>(remote, remote_namespace, &dep.name, node_label).await
        }
        ResourceKind::Secret => {
            delete_own::<Secret>(remote, remote_namespace, &dep.name, node_label).await
        }
    }
}

async fn delete_own<K>(
    remote: &kube::Client,
    namespace: &str,
    name: &str,
    node_label: &str,
) -> Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(remote.clone(), namespace);
    let Some(current) = api.get_opt(name).await.map_err(remote_error)? else {
        return Ok(());
    };
    if !made_by(current.meta(), node_label) {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: current.meta().uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(remote_error(e)),
    }
}

/// A remote API failure as a provider error: 404 is `NotFound`, 400/422
/// `InvalidInput`, 429 and 5xx and transport failures `Unavailable`.
pub(crate) fn remote_error(e: kube::Error) -> PodError {
    match &e {
        kube::Error::Api(status) => {
            let message = format!("remote cluster: {}", status.message);
            match status.code {
                404 => PodError::not_found(message),
                400 | 422 => PodError::invalid_input(message),
                409 => PodError::already_exists(message),
                429 | 500..=599 => PodError::unavailable(None, message),
                _ => PodError::other(e),
            }
        }
        _ => PodError::unavailable(None, format!("remote cluster: {e}")).with_source(e),
    }
}

/// The names a set of tracked pods use, to find what no pod needs.
pub(crate) fn in_use<'a>(
    sets: impl Iterator<Item = &'a BTreeSet<Dependency>>,
) -> BTreeSet<&'a Dependency> {
    sets.flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_reference_is_found() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "imagePullSecrets": [{"name": "registry"}],
                "volumes": [
                    {"name": "a", "configMap": {"name": "settings"}},
                    {"name": "b", "secret": {"secretName": "tls", "optional": true}},
                    {"name": "c", "projected": {"sources": [
                        {"configMap": {"name": "more"}}, {"secret": {"name": "tls"}}]}},
                ],
                "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "init-env", "optional": true}}]}],
                "containers": [{"name": "app", "env": [
                    {"name": "X", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                    {"name": "Y", "value": "plain"}]}]
            }
        }))
        .unwrap();
        let refs = references(&pod);
        let get = |kind, name: &str| {
            refs.get(&Dependency {
                kind,
                name: name.into(),
            })
            .copied()
        };
        assert_eq!(get(ResourceKind::ConfigMap, "settings"), Some(false));
        assert_eq!(get(ResourceKind::ConfigMap, "more"), Some(false));
        assert_eq!(get(ResourceKind::ConfigMap, "init-env"), Some(true));
        // Optional in one place, mandatory in another: mandatory.
        assert_eq!(get(ResourceKind::Secret, "tls"), Some(false));
        assert_eq!(get(ResourceKind::Secret, "db"), Some(false));
        assert_eq!(get(ResourceKind::Secret, "registry"), Some(false));
        assert_eq!(refs.len(), 6);
    }
}
