//! Deploy manifests for a manager, made from what its controllers declare
//! ([`ManagedController::rbac`]): a ServiceAccount, one least-privilege
//! ClusterRole (and binding) per controller, a Role for the leader-election
//! Lease, and the manager as a Deployment (replicas with leader election)
//! or a DaemonSet on control-plane nodes (as upstream's `ccm-example`),
//! restricted as the Pod Security Standards' `restricted` profile asks (a
//! non-root user, 65532 as in distroless' `nonroot` images; no privilege
//! escalation; every capability dropped; a read-only root filesystem — the
//! manager keeps its certificates in memory; the runtime's default seccomp
//! profile). `cargo xtask manifests` writes them to `docs/deploy/`.
//!
//! ```
//! use stratus_ccm::app::deploy::{DeployConfig, deployment, rbac};
//! use stratus_ccm::app::default_controllers;
//!
//! let config = DeployConfig::new("my-cloud", "registry.example.com/my-ccm:v1.0.0");
//! let objects = rbac(&config, &default_controllers());
//! let roles: Vec<_> = objects
//!     .iter()
//!     .filter(|o| o["kind"] == "ClusterRole")
//!     .map(|o| o["metadata"]["name"].as_str().unwrap())
//!     .collect();
//! assert!(roles.contains(&"stratus:cloud-controller-manager:service-lb-controller"));
//! let manager = deployment(&config);
//! assert_eq!(manager.spec.replicas, Some(2));
//! // Restricted: non-root, nothing to escalate to, a read-only filesystem.
//! let pod = manager.spec.template.spec.unwrap();
//! assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
//! let container = pod.containers[0].security_context.clone().unwrap();
//! assert_eq!(container.read_only_root_filesystem, Some(true));
//! assert_eq!(container.capabilities.unwrap().drop, Some(vec!["ALL".to_string()]));
//! ```

use std::collections::BTreeMap;

use crate::names::manager;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, HTTPGetAction, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecurityContext, ServiceAccount,
    Toleration,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use stratus_cloud::names::taints;

use super::builtin::rule;
use super::managed::ManagedController;

/// What the manifests are made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployConfig {
    /// The manager's name: ServiceAccount, workload, labels and role names.
    pub name: String,
    /// Where it runs (and where its Lease lives).
    pub namespace: String,
    /// `--cloud-provider`.
    pub cloud_provider: String,
    /// The container image.
    pub image: String,
    /// Replicas of the Deployment (leader election picks one leader).
    pub replicas: i32,
    /// More arguments for the manager (`--cluster-cidr=...`, ...).
    pub extra_args: Vec<String>,
    /// Run each controller as its own ServiceAccount in `kube-system`
    /// (`--use-service-account-credentials`, on by default as in
    /// kubeadm's managers): each controller's ClusterRole is bound to that
    /// account, and the manager may create the accounts and their tokens.
    pub use_service_account_credentials: bool,
}

impl DeployConfig {
    /// The defaults: `cloud-controller-manager` in `kube-system`, 2
    /// replicas.
    pub fn new(cloud_provider: impl Into<String>, image: impl Into<String>) -> Self {
        Self {
            name: "cloud-controller-manager".into(),
            namespace: "kube-system".into(),
            cloud_provider: cloud_provider.into(),
            image: image.into(),
            replicas: 2,
            extra_args: Vec::new(),
            use_service_account_credentials: true,
        }
    }

    fn meta(&self, name: impl Into<String>, namespaced: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: namespaced.then(|| self.namespace.clone()),
            labels: Some(self.labels()),
            ..Default::default()
        }
    }

    fn labels(&self) -> BTreeMap<String, String> {
        [
            ("app.kubernetes.io/name".to_string(), self.name.clone()),
            (
                "app.kubernetes.io/part-of".to_string(),
                "stratus".to_string(),
            ),
        ]
        .into()
    }

    fn subject(&self) -> Subject {
        Subject {
            kind: "ServiceAccount".into(),
            name: self.name.clone(),
            namespace: Some(self.namespace.clone()),
            ..Default::default()
        }
    }

    /// The name of a role of this manager: `stratus:<name>:<what>`.
    pub fn role_name(&self, what: &str) -> String {
        format!("stratus:{}:{what}", self.name)
    }
}

fn to_value<T: serde::Serialize>(object: &T) -> Value {
    // k8s-openapi objects always serialize (apiVersion and kind included).
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// The Lease rules: create it, then get and update only it.
fn lease_rules(config: &DeployConfig) -> Vec<PolicyRule> {
    let mut held = rule("coordination.k8s.io", &["leases"], &["get", "update"]);
    held.resource_names = Some(vec![config.name.clone()]);
    vec![rule("coordination.k8s.io", &["leases"], &["create"]), held]
}

/// The ServiceAccount, a ClusterRole and ClusterRoleBinding per controller
/// that declares rules (with `use_service_account_credentials`, also the
/// manager's own role to list and watch Nodes and Services for the shared
/// informers, and to make the controllers' tokens), the bindings of
/// delegated authentication
/// (`system:auth-delegator`, `extension-apiserver-authentication-reader`),
/// and the leader-election Role and RoleBinding, as JSON objects in apply
/// order.
pub fn rbac(config: &DeployConfig, controllers: &[ManagedController]) -> Vec<Value> {
    let mut objects = vec![to_value(&ServiceAccount {
        metadata: config.meta(&config.name, true),
        ..Default::default()
    })];
    for controller in controllers.iter().filter(|c| !c.rules().is_empty()) {
        let subject = match config.use_service_account_credentials {
            true => Subject {
                kind: "ServiceAccount".into(),
                name: controller.names().client.into(),
                namespace: Some("kube-system".into()),
                ..Default::default()
            },
            false => config.subject(),
        };
        let name = config.role_name(controller.names().canonical);
        objects.extend(cluster_role(
            config,
            name,
            controller.rules().to_vec(),
            subject,
        ));
    }
    if config.use_service_account_credentials {
        // The manager makes the controllers' accounts and their tokens
        // (Go's bootstrap role for the manager has the same).
        let mut meta = config.meta(config.role_name("controller-credentials"), true);
        meta.namespace = Some("kube-system".into());
        objects.extend(role(
            config,
            meta,
            vec![
                rule("", &["serviceaccounts"], &["get", "create"]),
                rule("", &["serviceaccounts/token"], &["create"]),
            ],
        ));
        // The shared Node and Service informers watch under the manager's
        // own identity (Go's "shared-informers" client), whatever account
        // each controller writes with.
        objects.extend(cluster_role(
            config,
            config.role_name("shared-informers"),
            vec![rule("", &["nodes", "services"], &["list", "watch"])],
            config.subject(),
        ));
    }
    // Delegated authentication and authorization of the admin server:
    // TokenReviews and SubjectAccessReviews (the built-in
    // `system:auth-delegator`), and the client CA in
    // kube-system/extension-apiserver-authentication.
    objects.push(to_value(&ClusterRoleBinding {
        metadata: config.meta(config.role_name("auth-delegator"), false),
        role_ref: role_ref("ClusterRole", "system:auth-delegator"),
        subjects: Some(vec![config.subject()]),
    }));
    let mut reader_meta = config.meta(config.role_name("authentication-reader"), true);
    reader_meta.namespace = Some("kube-system".into());
    objects.push(to_value(&RoleBinding {
        metadata: reader_meta,
        role_ref: role_ref("Role", "extension-apiserver-authentication-reader"),
        subjects: Some(vec![config.subject()]),
    }));
    let election = config.meta(config.role_name("leader-election"), true);
    objects.extend(role(config, election, lease_rules(config)));
    objects
}

/// A reference to the (Cluster)Role `name`.
#[allow(
    clippy::useless_conversion,
    reason = "a conversion in one Kubernetes minor, the identity in another"
)]
fn role_ref(kind: &str, name: impl Into<String>) -> RoleRef {
    RoleRef {
        // Required before Kubernetes 1.37, optional from it on.
        api_group: String::from("rbac.authorization.k8s.io").into(),
        kind: kind.into(),
        name: name.into(),
    }
}

/// A ClusterRole with `rules` and its binding to `subject`, both named
/// `name`.
fn cluster_role(
    config: &DeployConfig,
    name: String,
    rules: Vec<PolicyRule>,
    subject: Subject,
) -> [Value; 2] {
    [
        to_value(&ClusterRole {
            metadata: config.meta(&name, false),
            rules: Some(rules),
            ..Default::default()
        }),
        to_value(&ClusterRoleBinding {
            metadata: config.meta(&name, false),
            role_ref: role_ref("ClusterRole", name),
            subjects: Some(vec![subject]),
        }),
    ]
}

/// A Role with `rules` and its binding to the manager's account, both
/// with `meta`.
fn role(config: &DeployConfig, meta: ObjectMeta, rules: Vec<PolicyRule>) -> [Value; 2] {
    let name = meta.name.clone().unwrap_or_default();
    [
        to_value(&Role {
            metadata: meta.clone(),
            rules: Some(rules),
        }),
        to_value(&RoleBinding {
            metadata: meta,
            role_ref: role_ref("Role", name),
            subjects: Some(vec![config.subject()]),
        }),
    ]
}

/// The manager's pod: Go's flags, the admin port with a liveness probe on
/// `/healthz`, tolerations so it runs before any node is initialized.
/// The user and group the manager runs as (distroless' `nonroot`).
const NON_ROOT: i64 = 65532;

fn pod_template(config: &DeployConfig, host_network: bool) -> PodTemplateSpec {
    let mut args = vec![
        format!("--cloud-provider={}", config.cloud_provider),
        "--leader-elect=true".to_string(),
        format!(
            "--use-service-account-credentials={}",
            config.use_service_account_credentials
        ),
        format!("--leader-elect-resource-name={}", config.name),
        format!("--leader-elect-resource-namespace={}", config.namespace),
        format!("--secure-port={}", manager::SECURE_PORT),
        "--bind-address=0.0.0.0".to_string(),
    ];
    args.extend(config.extra_args.iter().cloned());
    let toleration = |key: &str, effect: &str| Toleration {
        key: Some(key.into()),
        effect: Some(effect.into()),
        operator: Some("Exists".into()),
        ..Default::default()
    };
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(config.labels()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            service_account_name: Some(config.name.clone()),
            priority_class_name: Some("system-cluster-critical".into()),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(NON_ROOT),
                run_as_group: Some(NON_ROOT),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            host_network: host_network.then_some(true),
            tolerations: Some(vec![
                toleration(taints::UNINITIALIZED, "NoSchedule"),
                toleration("node-role.kubernetes.io/control-plane", "NoSchedule"),
                toleration("node.kubernetes.io/not-ready", "NoSchedule"),
            ]),
            containers: vec![Container {
                name: config.name.clone(),
                image: Some(config.image.clone()),
                args: Some(args),
                ports: Some(vec![ContainerPort {
                    name: Some("https".into()),
                    container_port: i32::from(manager::SECURE_PORT),
                    ..Default::default()
                }]),
                liveness_probe: Some(Probe {
                    http_get: Some(HTTPGetAction {
                        path: Some("/healthz".into()),
                        port: IntOrString::Int(i32::from(manager::SECURE_PORT)),
                        scheme: Some("HTTPS".into()),
                        ..Default::default()
                    }),
                    initial_delay_seconds: Some(15),
                    period_seconds: Some(10),
                    failure_threshold: Some(3),
                    ..Default::default()
                }),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        [
                            ("cpu".to_string(), Quantity("100m".into())),
                            ("memory".to_string(), Quantity("128Mi".into())),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                }),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    read_only_root_filesystem: Some(true),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".into()]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

/// The manager as a Deployment: `replicas` pods, one leader at a time.
#[allow(
    clippy::useless_conversion,
    reason = "a conversion in one Kubernetes minor, the identity in another"
)]
pub fn deployment(config: &DeployConfig) -> Deployment {
    Deployment {
        metadata: config.meta(&config.name, true),
        spec: DeploymentSpec {
            replicas: Some(config.replicas),
            selector: LabelSelector {
                match_labels: Some(config.labels()),
                ..Default::default()
            },
            template: pod_template(config, false),
            ..Default::default()
        }
        // Optional before Kubernetes 1.37, required from it on.
        .into(),
        ..Default::default()
    }
}

/// The manager as a DaemonSet on control-plane nodes with host networking
/// (upstream's `ccm-example.yaml` layout).
#[allow(
    clippy::useless_conversion,
    reason = "a conversion in one Kubernetes minor, the identity in another"
)]
pub fn daemonset(config: &DeployConfig) -> DaemonSet {
    let mut template = pod_template(config, true);
    if let Some(spec) = template.spec.as_mut() {
        spec.node_selector = Some(
            [(
                "node-role.kubernetes.io/control-plane".to_string(),
                String::new(),
            )]
            .into(),
        );
    }
    DaemonSet {
        metadata: config.meta(&config.name, true),
        spec: DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(config.labels()),
                ..Default::default()
            },
            template,
            ..Default::default()
        }
        // Optional before Kubernetes 1.37, required from it on.
        .into(),
        ..Default::default()
    }
}

/// [`deployment`] as a JSON object.
pub fn deployment_value(config: &DeployConfig) -> Value {
    to_value(&deployment(config))
}

/// [`daemonset`] as a JSON object.
pub fn daemonset_value(config: &DeployConfig) -> Value {
    to_value(&daemonset(config))
}
