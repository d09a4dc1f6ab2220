//! Which ConfigMaps and Secrets a pod uses: env (`valueFrom`), `envFrom`,
//! volumes (`configMap`, `secret`, `projected` sources) and image pull
//! secrets, in every container kind. Pure, unit-tested.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod};
use stratus_pod::ResourceKind;

/// The ConfigMaps and Secrets `pod` references, by kind and name (in the
/// pod's namespace).
///
/// ```
/// use stratus_kubelet::references::referenced;
/// use stratus_pod::ResourceKind;
///
/// let pod = serde_json::from_value(serde_json::json!({
///     "metadata": {"name": "web", "namespace": "default"},
///     "spec": {
///         "containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "settings"}}]}],
///         "volumes": [{"name": "tls", "secret": {"secretName": "web-tls"}}],
///     },
/// })).unwrap();
/// let refs = referenced(&pod);
/// assert!(refs.contains(&(ResourceKind::ConfigMap, "settings".to_string())));
/// assert!(refs.contains(&(ResourceKind::Secret, "web-tls".to_string())));
/// ```
pub fn referenced(pod: &Pod) -> BTreeSet<(ResourceKind, String)> {
    let mut refs = BTreeSet::new();
    let Some(spec) = &pod.spec else {
        return refs;
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for container in containers {
        container_refs(container, &mut refs);
    }
    for container in spec.ephemeral_containers.iter().flatten() {
        for env in container.env.iter().flatten() {
            env_refs(env, &mut refs);
        }
        for from in container.env_from.iter().flatten() {
            env_from_refs(from, &mut refs);
        }
    }
    for volume in spec.volumes.iter().flatten() {
        if let Some(cm) = &volume.config_map {
            refs.insert((ResourceKind::ConfigMap, cm.name.clone()));
        }
        if let Some(name) = volume.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            refs.insert((ResourceKind::Secret, name));
        }
        for source in volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
        {
            if let Some(cm) = &source.config_map {
                refs.insert((ResourceKind::ConfigMap, cm.name.clone()));
            }
            if let Some(secret) = &source.secret {
                refs.insert((ResourceKind::Secret, secret.name.clone()));
            }
        }
    }
    for secret in spec.image_pull_secrets.iter().flatten() {
        refs.insert((ResourceKind::Secret, secret.name.clone()));
    }
    refs.retain(|(_, name)| !name.is_empty());
    refs
}

fn env_refs(env: &k8s_openapi::api::core::v1::EnvVar, refs: &mut BTreeSet<(ResourceKind, String)>) {
    let Some(from) = &env.value_from else { return };
    if let Some(key) = &from.config_map_key_ref {
        refs.insert((ResourceKind::ConfigMap, key.name.clone()));
    }
    if let Some(key) = &from.secret_key_ref {
        refs.insert((ResourceKind::Secret, key.name.clone()));
    }
}

fn env_from_refs(
    from: &k8s_openapi::api::core::v1::EnvFromSource,
    refs: &mut BTreeSet<(ResourceKind, String)>,
) {
    if let Some(cm) = &from.config_map_ref {
        refs.insert((ResourceKind::ConfigMap, cm.name.clone()));
    }
    if let Some(secret) = &from.secret_ref {
        refs.insert((ResourceKind::Secret, secret.name.clone()));
    }
}

fn container_refs(container: &Container, refs: &mut BTreeSet<(ResourceKind, String)>) {
    for env in container.env.iter().flatten() {
        env_refs(env, refs);
    }
    for from in container.env_from.iter().flatten() {
        env_from_refs(from, refs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
            .unwrap()
    }

    #[test]
    fn every_kind_of_reference() {
        let p = pod(json!({
            "containers": [{"name": "a", "env": [
                {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}},
                {"name": "Y", "valueFrom": {"secretKeyRef": {"name": "s-env", "key": "k"}}},
                {"name": "Z", "value": "plain"},
                {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ]}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s-init"}}]}],
            "volumes": [
                {"name": "v1", "configMap": {"name": "cm-vol"}},
                {"name": "v2", "projected": {"sources": [
                    {"secret": {"name": "s-proj"}},
                    {"configMap": {"name": "cm-proj"}},
                    {"downwardAPI": {"items": []}},
                ]}},
                {"name": "v3", "emptyDir": {}},
            ],
            "imagePullSecrets": [{"name": "registry"}],
        }));
        let got: Vec<(ResourceKind, String)> = referenced(&p).into_iter().collect();
        let want = [
            (ResourceKind::ConfigMap, "cm-env"),
            (ResourceKind::ConfigMap, "cm-proj"),
            (ResourceKind::ConfigMap, "cm-vol"),
            (ResourceKind::Secret, "registry"),
            (ResourceKind::Secret, "s-env"),
            (ResourceKind::Secret, "s-init"),
            (ResourceKind::Secret, "s-proj"),
        ];
        let want: Vec<(ResourceKind, String)> =
            want.iter().map(|(k, n)| (*k, (*n).to_owned())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_pod_without_references() {
        assert!(referenced(&pod(json!({"containers": [{"name": "a"}]}))).is_empty());
        assert!(referenced(&Pod::default()).is_empty());
    }
}
