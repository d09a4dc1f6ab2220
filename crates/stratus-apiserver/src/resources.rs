//! The resources the server serves, with their discovery data.

/// How object names are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// DNS-1123 subdomain (most resources).
    Subdomain,
    /// DNS-1123 label (namespaces, services).
    Label,
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
    /// Served now (a custom resource whose definition is gone is not).
    pub(crate) served: bool,
    /// Defined by a CustomResourceDefinition.
    pub(crate) custom: bool,
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
        served: true,
        custom: false,
    }
}

/// A create-only review resource.
fn review(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> ResourceDef {
    ResourceDef {
        review: true,
        ..def(
            group,
            kind,
            plural,
            // Review singulars are their lowercased kinds.
            plural.trim_end_matches('s'),
            namespaced,
            &[],
            &[],
        )
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
                    "ephemeralcontainers",
                ],
            )
        },
        ResourceDef {
            has_status: true,
            // RFC 1123 labels since kube 1.34's relaxed Service names.
            names: NameRule::Label,
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
            &["token"],
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
        review(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
        ),
        review(
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            false,
        ),
        review(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            true,
        ),
        review(
            "authentication.k8s.io",
            "SelfSubjectReview",
            "selfsubjectreviews",
            false,
        ),
    ]
    .into_iter()
    .chain(STORED.iter().map(stored))
    .collect()
}

/// What a stored kind has beyond its names.
#[derive(Debug, Clone, Copy)]
struct Traits {
    /// A `status` subresource.
    status: bool,
    /// In the `all` category (`kubectl get all`).
    all: bool,
    /// Named by path segment rules (RBAC) instead of DNS subdomains.
    path_names: bool,
    /// A `scale` subresource (autoscaling/v1 Scale of `spec.replicas`).
    scale: bool,
}

const PLAIN: Traits = Traits {
    status: false,
    all: false,
    path_names: false,
    scale: false,
};
const STATUS: Traits = Traits {
    status: true,
    ..PLAIN
};
const WORKLOAD: Traits = Traits {
    status: true,
    all: true,
    ..PLAIN
};
const SCALABLE: Traits = Traits {
    scale: true,
    ..WORKLOAD
};
const RBAC: Traits = Traits {
    path_names: true,
    ..PLAIN
};

/// A stored kind: group, kind, plural, singular, namespaced, short names.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    Traits,
);

/// Kinds stored with their scope, short names, categories and status
/// subresources, and no behaviour of their own: no workload controllers
/// run (as with envtest). One row per kind, kept on one line as a table.
#[rustfmt::skip]
const STORED: &[Row] = &[
    ("apps", "Deployment", "deployments", "deployment", true, &["deploy"], SCALABLE),
    ("apps", "ReplicaSet", "replicasets", "replicaset", true, &["rs"], SCALABLE),
    ("apps", "StatefulSet", "statefulsets", "statefulset", true, &["sts"], SCALABLE),
    ("apps", "DaemonSet", "daemonsets", "daemonset", true, &["ds"], WORKLOAD),
    ("apps", "ControllerRevision", "controllerrevisions", "controllerrevision", true, &[], PLAIN),
    ("batch", "Job", "jobs", "job", true, &[], WORKLOAD),
    ("batch", "CronJob", "cronjobs", "cronjob", true, &["cj"], WORKLOAD),
    (RBAC_GROUP, "Role", "roles", "role", true, &[], RBAC),
    (RBAC_GROUP, "RoleBinding", "rolebindings", "rolebinding", true, &[], RBAC),
    (RBAC_GROUP, "ClusterRole", "clusterroles", "clusterrole", false, &[], RBAC),
    (RBAC_GROUP, "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", false, &[], RBAC),
    ("policy", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", true, &["pdb"], STATUS),
    ("scheduling.k8s.io", "PriorityClass", "priorityclasses", "priorityclass", false, &["pc"], PLAIN),
    ("networking.k8s.io", "Ingress", "ingresses", "ingress", true, &["ing"], STATUS),
    ("networking.k8s.io", "IngressClass", "ingressclasses", "ingressclass", false, &[], PLAIN),
    ("networking.k8s.io", "NetworkPolicy", "networkpolicies", "networkpolicy", true, &["netpol"], PLAIN),
    ("storage.k8s.io", "StorageClass", "storageclasses", "storageclass", false, &["sc"], PLAIN),
    ("storage.k8s.io", "CSIDriver", "csidrivers", "csidriver", false, &[], PLAIN),
    ("storage.k8s.io", "CSINode", "csinodes", "csinode", false, &[], PLAIN),
    ("storage.k8s.io", "VolumeAttachment", "volumeattachments", "volumeattachment", false, &[], STATUS),
    ("node.k8s.io", "RuntimeClass", "runtimeclasses", "runtimeclass", false, &[], PLAIN),
    (ADMISSION_GROUP, "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", false, &[], PLAIN),
    (ADMISSION_GROUP, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", "validatingwebhookconfiguration", false, &[], PLAIN),
    ("", "ResourceQuota", "resourcequotas", "resourcequota", true, &["quota"], STATUS),
    ("", "LimitRange", "limitranges", "limitrange", true, &["limits"], PLAIN),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", true, &["pvc"], STATUS),
    ("", "PersistentVolume", "persistentvolumes", "persistentvolume", false, &["pv"], STATUS),
    (FLOWCONTROL_GROUP, "FlowSchema", "flowschemas", "flowschema", false, &[], STATUS),
    (FLOWCONTROL_GROUP, "PriorityLevelConfiguration", "prioritylevelconfigurations", "prioritylevelconfiguration", false, &[], STATUS),
    ("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", "customresourcedefinition", false, &["crd", "crds"], STATUS),
];

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
const FLOWCONTROL_GROUP: &str = "flowcontrol.apiserver.k8s.io";

fn stored(row: &Row) -> ResourceDef {
    let &(group, kind, plural, singular, namespaced, short_names, traits) = row;
    ResourceDef {
        has_status: traits.status,
        categories: if traits.all { &["all"] } else { &[] },
        names: if traits.path_names {
            NameRule::PathSegment
        } else {
            NameRule::Subdomain
        },
        ..def(
            group,
            kind,
            plural,
            singular,
            namespaced,
            short_names,
            match (traits.status, traits.scale) {
                (true, true) => &["status", "scale"],
                (true, false) => &["status"],
                _ => &[],
            },
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

    #[test]
    fn every_served_kind_can_be_written_in_protobuf() {
        // kubectl 1.32+ writes every built-in kind in protobuf: a served
        // kind without a protobuf layout (a misspelt group or kind) would
        // refuse its writes.
        for d in builtin() {
            assert!(
                crate::protobuf::supports(&d.api_version(), d.kind),
                "{} {}",
                d.api_version(),
                d.kind
            );
        }
    }
}
