//! The least access the provider needs in the remote cluster, as RBAC
//! objects for the remote credentials (written to
//! `docs/deploy/offload-remote-rbac.yaml` by `cargo xtask manifests`).

use serde_json::{Value, json};

/// The ClusterRole's rules: each is a call the provider makes.
///
/// | resource | verbs | why |
/// |---|---|---|
/// | pods | get, list, watch, create, patch, delete | the offloaded pods and their watch; other pods' requests for capacity |
/// | pods/log | get | `kubectl logs` |
/// | pods/exec, pods/attach, pods/portforward | get, create | `kubectl exec`, `attach`, `port-forward` (WebSocket upgrades are GETs; kube-apiserver 1.30+ also checks `create`) |
/// | configmaps, secrets | get, create, update, delete | the copies of what pods use |
/// | namespaces | get, create | mapped namespaces |
/// | nodes | list | capacity |
/// | nodes/proxy | get | the stats summary of the remote kubelets |
///
/// ```
/// let rules = stratus_provider_kubernetes::rbac::remote_rules();
/// assert!(rules.as_array().unwrap().iter().all(|r| !r["verbs"].to_string().contains('*')));
/// ```
pub fn remote_rules() -> Value {
    json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/exec", "pods/attach", "pods/portforward"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "create", "update", "delete"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]},
    ])
}

/// The objects to apply in the remote cluster: a ServiceAccount
/// `stratus-offload/stratus-offload-node` (whose token goes into the
/// kubeconfig the provider is given), the namespace, the ClusterRole
/// `stratus:offload-node` and its binding.
///
/// ```
/// let objects = stratus_provider_kubernetes::rbac::remote_rbac();
/// let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
/// assert_eq!(kinds, ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"]);
/// ```
pub fn remote_rbac() -> Vec<Value> {
    let namespace = "stratus-offload";
    let account = "stratus-offload-node";
    let role = "stratus:offload-node";
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role}, "rules": remote_rules()}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]}),
    ]
}
