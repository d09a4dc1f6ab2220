//! The access a virtual node needs in its cluster, as RBAC objects (written
//! to `docs/deploy/virtual-kubelet-rbac.yaml` by `cargo xtask manifests`);
//! the harness runs the command under exactly these in a test with RBAC on.

use serde_json::{Value, json};

/// The ClusterRole's rules: each is a call the virtual node makes.
///
/// | resource | verbs | why |
/// |---|---|---|
/// | nodes | get, list, watch, create, update, patch | register the Node, watch it (deleted → registered again), keep its spec |
/// | nodes/status | update, patch | conditions, capacity, addresses |
/// | leases (`coordination.k8s.io`) | get, create, update | the node's heartbeat in `kube-node-lease` |
/// | pods | get, list, watch, delete | the pods bound to the node; removal once they terminated |
/// | pods/status | update, patch | what the provider reports |
/// | configmaps, secrets, services | get, list, watch | env and volumes resolved from references; service environment variables |
/// | events (core and `events.k8s.io`) | create, patch, update | the node's and pods' events |
/// | certificatesigningrequests (`certificates.k8s.io`) | create, get, list, watch | `--rotate-server-certificates`: the kubelet API's serving certificate |
///
/// Delegated authentication of the kubelet API (TokenReview,
/// SubjectAccessReview) comes from binding `system:auth-delegator`, and
/// reading its client CA from `kube-system/extension-apiserver-authentication`
/// from binding the Role `extension-apiserver-authentication-reader` there.
///
/// ```
/// let rules = stratus_kubelet::app::rbac::rules();
/// assert!(rules.as_array().unwrap().iter().all(|r| !r["verbs"].to_string().contains('*')));
/// ```
pub fn rules() -> Value {
    json!([
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["update", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps", "secrets", "services"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["create", "get", "list", "watch"]},
    ])
}

/// The objects to apply: the ServiceAccount `namespace/account` (whose token
/// the node's kubeconfig holds), the ClusterRole `stratus:virtual-kubelet`
/// with [`rules`], its binding, the binding of `system:auth-delegator`, and
/// in `kube-system` the binding of the Role
/// `extension-apiserver-authentication-reader` (every cluster has it), to
/// read the client CA.
///
/// ```
/// let objects = stratus_kubelet::app::rbac::rbac("kube-system", "virtual-kubelet");
/// let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
/// assert_eq!(
///     kinds,
///     ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "RoleBinding"]
/// );
/// ```
pub fn rbac(namespace: &str, account: &str) -> Vec<Value> {
    let role = "stratus:virtual-kubelet";
    let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]);
    let binding = |name: &str, role: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subject})
    };
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role}, "rules": rules()}),
        binding(role, role),
        binding(
            "stratus:virtual-kubelet:auth-delegator",
            "system:auth-delegator",
        ),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "stratus:virtual-kubelet:authentication-reader", "namespace": "kube-system"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
            "subjects": subject}),
    ]
}
