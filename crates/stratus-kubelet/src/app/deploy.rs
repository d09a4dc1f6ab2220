//! A virtual node as a Deployment (written to
//! `docs/deploy/virtual-kubelet-deployment.yaml` by `cargo xtask manifests`),
//! to go with [`rbac`](super::rbac)'s ServiceAccount and roles. It passes the
//! restricted Pod Security Standard: a non-root user, no privilege
//! escalation, every capability dropped, a read-only root filesystem and the
//! runtime's default seccomp profile.

use serde_json::{Value, json};

/// The user and group the container runs as (the distroless `nonroot`).
const NON_ROOT: i64 = 65532;

/// The Deployment of one virtual node: `node` run by `provider` from
/// `image`, as the ServiceAccount `namespace/account`. One replica, replaced
/// with `Recreate`: two processes serving one Node would fight over it. The
/// pod's IP is the node's InternalIP (`VKUBELET_POD_IP`), where the API
/// server reaches the kubelet API on port 10250.
///
/// ```
/// let deployment = stratus_kubelet::app::deploy::deployment(
///     "kube-system", "virtual-kubelet", "registry.example.com/vk:1", "mock", "vk-0");
/// let pod = &deployment["spec"]["template"]["spec"];
/// assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
/// assert_eq!(pod["containers"][0]["securityContext"]["capabilities"]["drop"][0], "ALL");
/// assert_eq!(deployment["spec"]["replicas"], 1);
/// ```
pub fn deployment(
    namespace: &str,
    account: &str,
    image: &str,
    provider: &str,
    node: &str,
) -> Value {
    let labels =
        json!({"app.kubernetes.io/name": "virtual-kubelet", "app.kubernetes.io/instance": node});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": format!("virtual-kubelet-{node}"), "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": account,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": NON_ROOT,
                        "runAsGroup": NON_ROOT,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "virtual-kubelet",
                        "image": image,
                        "args": [format!("--provider={provider}"), format!("--nodename={node}")],
                        "env": [
                            {"name": "VKUBELET_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                            {"name": "KUBELET_PORT", "value": "10250"},
                        ],
                        "ports": [{"name": "kubelet-api", "containerPort": 10250}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }],
                },
            },
        },
    })
}
