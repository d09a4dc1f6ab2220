//! Unknown fields in written objects, as kube-apiserver treats them: they
//! are dropped (a built-in kind is decoded into its Go type, a custom
//! resource pruned by its schema), and the `fieldValidation` parameter
//! says what the client hears of it: `Ignore` nothing, `Warn` (the
//! default) one `Warning` header per field, `Strict` a 400 naming them.
//!
//! Built-in kinds are pruned by k8s-openapi's schemas (see
//! `builtin_schemas`). Pure functions over JSON values.

use serde_json::Value;

use crate::error::ApiError;
use crate::openapi::builtin_schemas::BuiltinSchemas;
use crate::resources::ResourceDef;
use crate::state::Query;

/// The fields an object keeps at its root whatever the schema says.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// What `fieldValidation` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Directive {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them and warn (the default).
    Warn,
    /// Refuse the request.
    Strict,
}

impl Directive {
    /// The directive of a request. A value outside the set was refused
    /// before (422, with the request's options: `http::check_options`);
    /// here it is an error too, for callers that did not check.
    pub(crate) fn of(query: &Query) -> Result<Self, ApiError> {
        match query.get("fieldValidation") {
            None | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            ))),
        }
    }
}

/// Act on the `unknown` fields found in an object of `def`: the warnings
/// to send (`Warn`), or the error (`Strict`).
pub(crate) fn judge(
    directive: Directive,
    def: &ResourceDef,
    unknown: &[String],
) -> Result<Vec<String>, ApiError> {
    let problems: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    judge_problems(directive, def, problems)
}

/// Act on the `duplicated` fields of a request body, as on unknown ones.
pub(crate) fn judge_duplicates(
    directive: Directive,
    def: &ResourceDef,
    duplicated: &[String],
) -> Result<Vec<String>, ApiError> {
    let problems: Vec<String> = duplicated
        .iter()
        .map(|f| format!("duplicate field {f:?}"))
        .collect();
    judge_problems(directive, def, problems)
}

fn judge_problems(
    directive: Directive,
    def: &ResourceDef,
    problems: Vec<String>,
) -> Result<Vec<String>, ApiError> {
    if problems.is_empty() {
        return Ok(Vec::new());
    }
    match directive {
        Directive::Ignore => Ok(Vec::new()),
        Directive::Warn => Ok(problems),
        Directive::Strict => Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            problems.join(", "),
            kind = def.kind,
            version = def.version,
        ))),
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// Remove from `value`, an object of the kind whose definition is `root`,
/// the fields its Go type does not have, returning their paths
/// (`spec.template.spec.containers[0].foo`). An object schema without
/// properties (RawExtension, FieldsV1, JSON) keeps whatever it holds.
pub(crate) fn prune_builtin(
    schemas: &BuiltinSchemas,
    root: &str,
    value: &mut Value,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(schema) = schemas.definitions.get(root) {
        prune_into(schemas, schema, value, "", true, &mut out);
    }
    out
}

fn prune_into(
    schemas: &BuiltinSchemas,
    schema: &Value,
    value: &mut Value,
    path: &str,
    root: bool,
    out: &mut Vec<String>,
) {
    let schema = schemas.resolve(schema);
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let unknown: Vec<String> = map
                    .keys()
                    .filter(|k| !props.contains_key(*k))
                    .filter(|k| !(root && ROOT_FIELDS.contains(&k.as_str())))
                    .cloned()
                    .collect();
                for k in unknown {
                    map.remove(&k);
                    out.push(join(path, &k));
                }
                for (name, v) in map.iter_mut() {
                    if let Some(prop) = props.get(name) {
                        prune_into(schemas, prop, v, &join(path, name), false, out);
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for (k, v) in map.iter_mut() {
                    null_string_is_empty(schemas, values, v);
                    prune_into(schemas, values, v, &join(path, k), false, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    null_string_is_empty(schemas, item_schema, item);
                    prune_into(
                        schemas,
                        item_schema,
                        item,
                        &format!("{path}[{i}]"),
                        false,
                        out,
                    );
                }
            }
        }
        _ => {}
    }
}

/// A `null` string in a map or a list decodes to `""` in the Go types (a
/// JSON patch `add` without a value, or a `copy` from a missing member, puts
/// one there).
fn null_string_is_empty(schemas: &BuiltinSchemas, schema: &Value, value: &mut Value) {
    if value.is_null() && schemas.resolve(schema).get("type") == Some(&Value::from("string")) {
        *value = Value::from("");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::builtin_schemas;
    use crate::resources::builtin;
    use serde_json::json;

    fn deployment_def() -> ResourceDef {
        builtin()
            .into_iter()
            .find(|d| d.kind == "Deployment")
            .unwrap()
    }

    #[test]
    fn unknown_fields_are_pruned_at_every_depth() {
        let schemas = builtin_schemas::get();
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"a": "b"}, "bogus": 1,
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {"f:x": {}}}}]},
            "spec": {"replicas": 2, "replicaz": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolcy": "Always",
                        "ports": [{"containerPort": 80, "hostPrt": 1}],
                        "resources": {"limits": {"cpu": "1"}}}]}}},
            "extra": true,
        });
        let mut pruned = prune_builtin(schemas, "io.k8s.api.apps.v1.Deployment", &mut obj);
        pruned.sort();
        assert_eq!(
            pruned,
            [
                "extra",
                "metadata.bogus",
                "spec.replicaz",
                "spec.template.spec.containers[0].imagePullPolcy",
                "spec.template.spec.containers[0].ports[0].hostPrt",
            ]
        );
        assert_eq!(obj["spec"]["replicas"], 2);
        assert_eq!(obj["metadata"]["labels"]["a"], "b");
        // FieldsV1 is free-form: kept whole.
        assert_eq!(
            obj["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:x"],
            json!({})
        );
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }

    #[test]
    fn directives() {
        let def = deployment_def();
        let unknown = vec!["spec.a".to_owned(), "spec.b".to_owned()];
        assert!(judge(Directive::Ignore, &def, &unknown).unwrap().is_empty());
        assert_eq!(
            judge(Directive::Warn, &def, &unknown).unwrap(),
            ["unknown field \"spec.a\"", "unknown field \"spec.b\""]
        );
        let err = judge(Directive::Strict, &def, &unknown).unwrap_err();
        assert_eq!(
            err.message,
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.a\", unknown field \"spec.b\""
        );
        assert!(judge(Directive::Strict, &def, &[]).unwrap().is_empty());
        assert_eq!(Directive::of(&Query::parse(None)).unwrap(), Directive::Warn);
        assert_eq!(
            Directive::of(&Query::parse(Some("fieldValidation=Strict"))).unwrap(),
            Directive::Strict
        );
        assert!(Directive::of(&Query::parse(Some("fieldValidation=strict"))).is_err());
    }
}
