//! The resources the server serves, with their discovery data.

/// How object names are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// DNS-1123 subdomain (most resources).
    Subdomain,
    /// DNS-1123 label (namespaces).
    Label,
    /// DNS-1035 label (services).
    Dns1035,
    /// A path segment: not `.` or `..`, no `/` or `%` (RBAC objects).
    PathSegment,
}

/// One served resource.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResourceDef {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) short_names: &'static [&'static str],
    pub(crate) categories: &'static [&'static str],
    pub(crate) subresources: &'static [&'static str],
    /// Create-only review resources: answered, never stored.
    pub(crate) review: bool,
    pub(crate) names: NameRule,
    /// The resource has a status subresource, so main writes keep status.
    pub(crate) has_status: bool,
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl ResourceDef {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub(crate) fn verbs(&self) -> &'static [&'static str] {
        if self.review { &["create"] } else { ALL_VERBS }
    }

    pub(crate) fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

const fn def(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    subresources: &'static [&'static str],
) -> ResourceDef {
    ResourceDef {
        group,
        version: "v1",
        kind,
        plural,
        singular,
        namespaced,
        short_names,
        categories: &[],
        subresources,
        review: false,
        names: NameRule::Subdomain,
        has_status: false,
    }
}

/// The built-in resources. Indexes into this table identify resources in the
/// store.
pub(crate) fn builtin() -> Vec<ResourceDef> {
    vec![
        ResourceDef {
            names: NameRule::Label,
            has_status: true,
            ..def(
                "",
                "Namespace",
                "namespaces",
                "namespace",
                false,
                &["ns"],
                &["status", "finalize"],
            )
        },
        ResourceDef {
            has_status: true,
            ..def(
                "",
                "Node",
                "nodes",
                "node",
                false,
                &["no"],
                &["status", "proxy"],
            )
        },
        ResourceDef {
            has_status: true,
            categories: &["all"],
            ..def(
                "",
                "Pod",
                "pods",
                "pod",
                true,
                &["po"],
                &[
                    "status",
                    "binding",
                    "eviction",
                    "log",
                    "exec",
                    "attach",
                    "portforward",
                ],
            )
        },
        ResourceDef {
            has_status: true,
            names: NameRule::Dns1035,
            categories: &["all"],
            ..def(
                "",
                "Service",
                "services",
                "service",
                true,
                &["svc"],
                &["status"],
            )
        },
        def(
            "",
            "Endpoints",
            "endpoints",
            "endpoints",
            true,
            &["ep"],
            &[],
        ),
        def(
            "",
            "ConfigMap",
            "configmaps",
            "configmap",
            true,
            &["cm"],
            &[],
        ),
        def("", "Secret", "secrets", "secret", true, &[], &[]),
        def(
            "",
            "ServiceAccount",
            "serviceaccounts",
            "serviceaccount",
            true,
            &["sa"],
            &[],
        ),
        def("", "Event", "events", "event", true, &["ev"], &[]),
        def(
            "events.k8s.io",
            "Event",
            "events",
            "event",
            true,
            &["ev"],
            &[],
        ),
        def(
            "discovery.k8s.io",
            "EndpointSlice",
            "endpointslices",
            "endpointslice",
            true,
            &[],
            &[],
        ),
        def(
            "coordination.k8s.io",
            "Lease",
            "leases",
            "lease",
            true,
            &[],
            &[],
        ),
        ResourceDef {
            has_status: true,
            ..def(
                "certificates.k8s.io",
                "CertificateSigningRequest",
                "certificatesigningrequests",
                "certificatesigningrequest",
                false,
                &["csr"],
                &["status", "approval"],
            )
        },
        ResourceDef {
            review: true,
            ..def(
                "authentication.k8s.io",
                "TokenReview",
                "tokenreviews",
                "tokenreview",
                false,
                &[],
                &[],
            )
        },
        ResourceDef {
            review: true,
            ..def(
                "authorization.k8s.io",
                "SubjectAccessReview",
                "subjectaccessreviews",
                "subjectaccessreview",
                false,
                &[],
                &[],
            )
        },
        // Stored with their real scope, short names, categories and status
        // subresources; no workload controllers run (as with envtest).
        workload(
            "apps",
            "Deployment",
            "deployments",
            "deployment",
            &["deploy"],
        ),
        workload("apps", "ReplicaSet", "replicasets", "replicaset", &["rs"]),
        workload(
            "apps",
            "StatefulSet",
            "statefulsets",
            "statefulset",
            &["sts"],
        ),
        workload("apps", "DaemonSet", "daemonsets", "daemonset", &["ds"]),
        def(
            "apps",
            "ControllerRevision",
            "controllerrevisions",
            "controllerrevision",
            true,
            &[],
            &[],
        ),
        workload("batch", "Job", "jobs", "job", &[]),
        workload("batch", "CronJob", "cronjobs", "cronjob", &["cj"]),
        ResourceDef {
            names: NameRule::PathSegment,
            ..def(
                "rbac.authorization.k8s.io",
                "Role",
                "roles",
                "role",
                true,
                &[],
                &[],
            )
        },
        ResourceDef {
            names: NameRule::PathSegment,
            ..def(
                "rbac.authorization.k8s.io",
                "RoleBinding",
                "rolebindings",
                "rolebinding",
                true,
                &[],
                &[],
            )
        },
        ResourceDef {
            names: NameRule::PathSegment,
            ..def(
                "rbac.authorization.k8s.io",
                "ClusterRole",
                "clusterroles",
                "clusterrole",
                false,
                &[],
                &[],
            )
        },
        ResourceDef {
            names: NameRule::PathSegment,
            ..def(
                "rbac.authorization.k8s.io",
                "ClusterRoleBinding",
                "clusterrolebindings",
                "clusterrolebinding",
                false,
                &[],
                &[],
            )
        },
        ResourceDef {
            has_status: true,
            ..def(
                "policy",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                "poddisruptionbudget",
                true,
                &["pdb"],
                &["status"],
            )
        },
        def(
            "scheduling.k8s.io",
            "PriorityClass",
            "priorityclasses",
            "priorityclass",
            false,
            &["pc"],
            &[],
        ),
        ResourceDef {
            has_status: true,
            ..def(
                "networking.k8s.io",
                "Ingress",
                "ingresses",
                "ingress",
                true,
                &["ing"],
                &["status"],
            )
        },
        def(
            "networking.k8s.io",
            "IngressClass",
            "ingressclasses",
            "ingressclass",
            false,
            &[],
            &[],
        ),
        def(
            "networking.k8s.io",
            "NetworkPolicy",
            "networkpolicies",
            "networkpolicy",
            true,
            &["netpol"],
            &[],
        ),
        def(
            "storage.k8s.io",
            "StorageClass",
            "storageclasses",
            "storageclass",
            false,
            &["sc"],
            &[],
        ),
        def(
            "storage.k8s.io",
            "CSIDriver",
            "csidrivers",
            "csidriver",
            false,
            &[],
            &[],
        ),
        def(
            "storage.k8s.io",
            "CSINode",
            "csinodes",
            "csinode",
            false,
            &[],
            &[],
        ),
        ResourceDef {
            has_status: true,
            ..def(
                "storage.k8s.io",
                "VolumeAttachment",
                "volumeattachments",
                "volumeattachment",
                false,
                &[],
                &["status"],
            )
        },
        def(
            "node.k8s.io",
            "RuntimeClass",
            "runtimeclasses",
            "runtimeclass",
            false,
            &[],
            &[],
        ),
        def(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            "mutatingwebhookconfiguration",
            false,
            &[],
            &[],
        ),
        def(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            "validatingwebhookconfiguration",
            false,
            &[],
            &[],
        ),
        ResourceDef {
            has_status: true,
            ..def(
                "",
                "ResourceQuota",
                "resourcequotas",
                "resourcequota",
                true,
                &["quota"],
                &["status"],
            )
        },
        def(
            "",
            "LimitRange",
            "limitranges",
            "limitrange",
            true,
            &["limits"],
            &[],
        ),
        ResourceDef {
            has_status: true,
            ..def(
                "",
                "PersistentVolumeClaim",
                "persistentvolumeclaims",
                "persistentvolumeclaim",
                true,
                &["pvc"],
                &["status"],
            )
        },
        ResourceDef {
            has_status: true,
            ..def(
                "",
                "PersistentVolume",
                "persistentvolumes",
                "persistentvolume",
                false,
                &["pv"],
                &["status"],
            )
        },
    ]
}

/// A namespaced workload with a status subresource, in the `all` category.
const fn workload(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
) -> ResourceDef {
    ResourceDef {
        has_status: true,
        categories: &["all"],
        ..def(
            group,
            kind,
            plural,
            singular,
            true,
            short_names,
            &["status"],
        )
    }
}

/// Well-known indexes into [`builtin`].
pub(crate) mod idx {
    pub(crate) const NAMESPACES: usize = 0;
    #[cfg(test)]
    pub(crate) const NODES: usize = 1;
    #[cfg(test)]
    pub(crate) const PODS: usize = 2;
    #[cfg(test)]
    pub(crate) const SERVICES: usize = 3;
}

/// The API groups in discovery order, with their versions.
pub(crate) fn groups(defs: &[ResourceDef]) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for d in defs {
        if !d.group.is_empty() && !out.iter().any(|(g, v)| *g == d.group && *v == d.version) {
            out.push((d.group, d.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_match_the_table() {
        let defs = builtin();
        assert_eq!(defs[idx::NAMESPACES].plural, "namespaces");
        assert_eq!(defs[idx::NODES].plural, "nodes");
        assert_eq!(defs[idx::PODS].plural, "pods");
        assert_eq!(defs[idx::SERVICES].plural, "services");
        assert_eq!(defs[9].api_version(), "events.k8s.io/v1");
        assert!(groups(&defs).contains(&("coordination.k8s.io", "v1")));
    }
}
