//! The OpenAPI v3 schemas of the built-in kinds, from k8s-openapi's
//! generated `JsonSchema` implementations (its knowledge of the Go types,
//! nothing written by hand): the components of `/openapi/v3`, the
//! definitions of `/openapi/v2`, and the schemas unknown fields are pruned
//! by. Built once per process and shared by every server.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// Where OpenAPI v3 documents keep their schemas.
pub(crate) const V3_REF_PREFIX: &str = "#/components/schemas/";

/// The schemas of every built-in kind and of everything they refer to.
pub(crate) struct BuiltinSchemas {
    /// Every definition by its Kubernetes name
    /// (`io.k8s.api.apps.v1.Deployment`), refs in the v3 form.
    pub(crate) definitions: Map<String, Value>,
    /// The definition name of each served kind: by kind, then group and
    /// version.
    roots: HashMap<&'static str, Vec<(&'static str, &'static str, String)>>,
}

macro_rules! kinds {
    ($gen:ident, $roots:ident; $( $group:literal $version:literal $kind:literal => $ty:ty ),* $(,)?) => {
        $(
            let schema = $gen.subschema_for::<$ty>();
            if let Some(name) = schema.get("$ref").and_then(Value::as_str) {
                $roots.entry($kind).or_insert_with(Vec::new).push(($group, $version, name.trim_start_matches(V3_REF_PREFIX).to_owned()));
            }
        )*
    };
}

fn build() -> BuiltinSchemas {
    use k8s_openapi::api::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let mut roots = HashMap::new();
    kinds!(generator, roots;
        "" "v1" "Namespace" => core::v1::Namespace,
        "" "v1" "Node" => core::v1::Node,
        "" "v1" "Pod" => core::v1::Pod,
        "" "v1" "Service" => core::v1::Service,
        "" "v1" "Endpoints" => core::v1::Endpoints,
        "" "v1" "ConfigMap" => core::v1::ConfigMap,
        "" "v1" "Secret" => core::v1::Secret,
        "" "v1" "ServiceAccount" => core::v1::ServiceAccount,
        "" "v1" "Event" => core::v1::Event,
        "" "v1" "ResourceQuota" => core::v1::ResourceQuota,
        "" "v1" "LimitRange" => core::v1::LimitRange,
        "" "v1" "PersistentVolumeClaim" => core::v1::PersistentVolumeClaim,
        "" "v1" "PersistentVolume" => core::v1::PersistentVolume,
        "events.k8s.io" "v1" "Event" => events::v1::Event,
        "discovery.k8s.io" "v1" "EndpointSlice" => discovery::v1::EndpointSlice,
        "coordination.k8s.io" "v1" "Lease" => coordination::v1::Lease,
        "certificates.k8s.io" "v1" "CertificateSigningRequest" => certificates::v1::CertificateSigningRequest,
        "authentication.k8s.io" "v1" "TokenReview" => authentication::v1::TokenReview,
        "authentication.k8s.io" "v1" "SelfSubjectReview" => authentication::v1::SelfSubjectReview,
        "authorization.k8s.io" "v1" "SubjectAccessReview" => authorization::v1::SubjectAccessReview,
        "authorization.k8s.io" "v1" "SelfSubjectAccessReview" => authorization::v1::SelfSubjectAccessReview,
        "authorization.k8s.io" "v1" "SelfSubjectRulesReview" => authorization::v1::SelfSubjectRulesReview,
        "authorization.k8s.io" "v1" "LocalSubjectAccessReview" => authorization::v1::LocalSubjectAccessReview,
        "apps" "v1" "Deployment" => apps::v1::Deployment,
        "apps" "v1" "ReplicaSet" => apps::v1::ReplicaSet,
        "apps" "v1" "StatefulSet" => apps::v1::StatefulSet,
        "apps" "v1" "DaemonSet" => apps::v1::DaemonSet,
        "apps" "v1" "ControllerRevision" => apps::v1::ControllerRevision,
        "batch" "v1" "Job" => batch::v1::Job,
        "batch" "v1" "CronJob" => batch::v1::CronJob,
        "rbac.authorization.k8s.io" "v1" "Role" => rbac::v1::Role,
        "rbac.authorization.k8s.io" "v1" "RoleBinding" => rbac::v1::RoleBinding,
        "rbac.authorization.k8s.io" "v1" "ClusterRole" => rbac::v1::ClusterRole,
        "rbac.authorization.k8s.io" "v1" "ClusterRoleBinding" => rbac::v1::ClusterRoleBinding,
        "policy" "v1" "PodDisruptionBudget" => policy::v1::PodDisruptionBudget,
        "scheduling.k8s.io" "v1" "PriorityClass" => scheduling::v1::PriorityClass,
        "networking.k8s.io" "v1" "Ingress" => networking::v1::Ingress,
        "networking.k8s.io" "v1" "IngressClass" => networking::v1::IngressClass,
        "networking.k8s.io" "v1" "NetworkPolicy" => networking::v1::NetworkPolicy,
        "storage.k8s.io" "v1" "StorageClass" => storage::v1::StorageClass,
        "storage.k8s.io" "v1" "CSIDriver" => storage::v1::CSIDriver,
        "storage.k8s.io" "v1" "CSINode" => storage::v1::CSINode,
        "storage.k8s.io" "v1" "VolumeAttachment" => storage::v1::VolumeAttachment,
        "node.k8s.io" "v1" "RuntimeClass" => node::v1::RuntimeClass,
        "admissionregistration.k8s.io" "v1" "MutatingWebhookConfiguration" => admissionregistration::v1::MutatingWebhookConfiguration,
        "admissionregistration.k8s.io" "v1" "ValidatingWebhookConfiguration" => admissionregistration::v1::ValidatingWebhookConfiguration,
        "flowcontrol.apiserver.k8s.io" "v1" "FlowSchema" => flowcontrol::v1::FlowSchema,
        "flowcontrol.apiserver.k8s.io" "v1" "PriorityLevelConfiguration" => flowcontrol::v1::PriorityLevelConfiguration,
        "apiextensions.k8s.io" "v1" "CustomResourceDefinition" => CustomResourceDefinition,
        "autoscaling" "v1" "Scale" => k8s_openapi::api::autoscaling::v1::Scale,
    );
    let mut definitions = generator.take_definitions(true);
    for (kind, group, version, name) in roots
        .iter()
        .flat_map(|(kind, v)| v.iter().map(move |(g, ver, n)| (kind, g, ver, n)))
    {
        if let Some(Value::Object(schema)) = definitions.get_mut(name) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "kind": kind, "version": version}]),
            );
        }
    }
    BuiltinSchemas { definitions, roots }
}

static SCHEMAS: LazyLock<BuiltinSchemas> = LazyLock::new(build);

/// The process's built-in schemas.
pub(crate) fn get() -> &'static BuiltinSchemas {
    &SCHEMAS
}

/// The definition a `$ref` names (v3 `#/components/schemas/` or v2
/// `#/definitions/` form).
pub(crate) fn ref_name(reference: &str) -> &str {
    reference
        .strip_prefix(V3_REF_PREFIX)
        .or_else(|| reference.strip_prefix("#/definitions/"))
        .unwrap_or(reference)
}

/// A schema's single reference: `$ref`, or an `allOf` of one `$ref` (the
/// form a reference with a description of its own takes).
pub(crate) fn reference_of(schema: &Value) -> Option<&str> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return Some(r);
    }
    match schema
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([only]) => only.get("$ref").and_then(Value::as_str),
        _ => None,
    }
}

impl BuiltinSchemas {
    /// The definition name of a served built-in kind (a hash lookup: this
    /// runs on every write).
    pub(crate) fn root(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.roots
            .get(kind)?
            .iter()
            .find(|(g, v, _)| *g == group && *v == version)
            .map(|(_, _, name)| name.as_str())
    }

    /// The schema `schema` refers to, or itself.
    pub(crate) fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match reference_of(schema) {
            Some(r) => self.definitions.get(ref_name(r)).unwrap_or(schema),
            None => schema,
        }
    }

    /// `names` and every definition they refer to, transitively.
    pub(crate) fn closure<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut pending: Vec<String> = names.into_iter().map(str::to_owned).collect();
        while let Some(name) = pending.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(schema) = self.definitions.get(&name) {
                collect_refs(schema, &mut pending);
            }
        }
        seen
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(ref_name(r).to_owned()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// `schema` with its references rewritten from the v3 form to v2's
/// `#/definitions/`.
pub(crate) fn as_v2(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => (
                        k.clone(),
                        Value::String(format!("#/definitions/{}", ref_name(r))),
                    ),
                    ("nullable", _) => (k.clone(), v.clone()),
                    _ => (k.clone(), as_v2(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(as_v2).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin;

    #[test]
    fn every_stored_kind_has_a_schema_naming_its_kind() {
        let schemas = get();
        for d in builtin() {
            let name = schemas
                .root(d.group, d.version, d.kind)
                .unwrap_or_else(|| panic!("no schema for {} {}", d.api_version(), d.kind));
            let schema = &schemas.definitions[name];
            assert_eq!(
                schema["x-kubernetes-group-version-kind"][0]["kind"], d.kind,
                "{name}"
            );
            assert!(schema["properties"]["metadata"].is_object(), "{name}");
        }
        assert_eq!(
            schemas.root("apps", "v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
    }

    #[test]
    fn references_resolve_and_close_over_what_they_use() {
        let schemas = get();
        let deployment = &schemas.definitions["io.k8s.api.apps.v1.Deployment"];
        let spec = schemas.resolve(&deployment["properties"]["spec"]);
        assert!(spec["properties"]["template"].is_object());
        let closure = schemas.closure(["io.k8s.api.apps.v1.Deployment"]);
        assert!(closure.contains("io.k8s.api.core.v1.PodSpec"));
        assert!(closure.contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(!closure.contains("io.k8s.api.rbac.v1.Role"));
        for name in &closure {
            assert!(schemas.definitions.contains_key(name), "{name} dangles");
        }
        let v2 = as_v2(&json!({"allOf": [{"$ref": "#/components/schemas/x.Y"}]}));
        assert_eq!(v2["allOf"][0]["$ref"], "#/definitions/x.Y");
    }
}
