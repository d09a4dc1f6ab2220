//! API errors as Kubernetes `Status` objects.

use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// One cause of an `Invalid` error.
#[derive(Debug, Clone)]
pub(crate) struct Cause {
    pub(crate) reason: &'static str,
    pub(crate) field: String,
    pub(crate) message: String,
}

impl Cause {
    pub(crate) fn required(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        Self {
            reason: "FieldValueRequired",
            message: if detail.is_empty() {
                "Required value".to_owned()
            } else {
                format!("Required value: {detail}")
            },
            field,
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value:?}: {detail}"),
        }
    }

    /// An invalid number: kube writes it unquoted (`Invalid value: -1: ...`).
    pub(crate) fn invalid_number(field: impl Into<String>, value: i64, detail: &str) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {detail}"),
        }
    }

    /// A value outside a fixed set (`Unsupported value: "x": supported
    /// values: "a", "b"`).
    pub(crate) fn unsupported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
        Self {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
        }
    }

    /// A value over a length limit in bytes (`Too long: may not be more
    /// than N bytes`); kube omits the value.
    pub(crate) fn too_long(field: impl Into<String>, max_bytes: usize) -> Self {
        Self {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be more than {max_bytes} bytes"),
        }
    }

    pub(crate) fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }
}

/// An error answered as a `Status`.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) details: Option<Value>,
    pub(crate) retry_after: Option<u64>,
}

fn details(def: &ResourceDef, name: &str) -> Value {
    json!({"name": name, "group": def.group, "kind": def.plural})
}

fn qualified(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.plural.to_owned()
    } else {
        format!("{}.{}", def.plural, def.group)
    }
}

impl ApiError {
    /// The `Status` reason kube-apiserver gives an HTTP status code.
    pub(crate) fn reason_for(code: u16) -> &'static str {
        match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        }
    }

    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub(crate) fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self {
            details: Some(details(def, name)),
            ..Self::new(
                404,
                "NotFound",
                format!("{} {name:?} not found", qualified(def)),
            )
        }
    }

    pub(crate) fn namespace_not_found(namespace: &str) -> Self {
        Self {
            details: Some(json!({"name": namespace, "kind": "namespaces"})),
            ..Self::new(
                404,
                "NotFound",
                format!("namespaces {namespace:?} not found"),
            )
        }
    }

    pub(crate) fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self {
            details: Some(details(def, name)),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} {name:?} already exists", qualified(def)),
            )
        }
    }

    pub(crate) fn conflict(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self {
            details: Some(details(def, name)),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} {name:?}: {why}",
                    qualified(def)
                ),
            )
        }
    }

    pub(crate) fn stale(def: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// Options of a request (`CreateOptions`, `ListOptions`, ...) that
    /// kube-apiserver refuses before anything is read or written: 422,
    /// `<kind>.meta.k8s.io "" is invalid: ...`.
    pub(crate) fn invalid_options(kind: &str, causes: Vec<Cause>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let message = match summary.len() {
            1 => format!("{kind}.meta.k8s.io \"\" is invalid: {}", summary[0]),
            _ => format!(
                "{kind}.meta.k8s.io \"\" is invalid: [{}]",
                summary.join(", ")
            ),
        };
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        Self {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(json!({"group": "meta.k8s.io", "kind": kind, "causes": causes})),
            retry_after: None,
        }
    }

    pub(crate) fn invalid(def: &ResourceDef, name: &str, causes: Vec<Cause>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        // kube-apiserver qualifies the kind with its group (`Deployment.apps`).
        let kind = if def.group.is_empty() {
            def.kind.to_owned()
        } else {
            format!("{}.{}", def.kind, def.group)
        };
        let message = match summary.len() {
            1 => format!("{kind} {name:?} is invalid: {}", summary[0]),
            _ => format!("{kind} {name:?} is invalid: [{}]", summary.join(", ")),
        };
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        Self {
            details: Some(
                json!({"name": name, "group": def.group, "kind": def.kind, "causes": causes}),
            ),
            ..Self::new(422, "Invalid", message)
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` body.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // An error kube-apiserver does not classify has no reason.
        if self.reason.is_empty()
            && let Some(map) = status.as_object_mut()
        {
            map.remove("reason");
        }
        let mut details = self.details.clone();
        if let Some(secs) = self.retry_after {
            let d = details.get_or_insert_with(|| json!({}));
            d["retryAfterSeconds"] = json!(secs);
        }
        if let Some(mut d) = details {
            // Go leaves empty strings out of the details (`omitempty`).
            if let Some(map) = d.as_object_mut() {
                map.retain(|_, v| v.as_str() != Some(""));
            }
            status["details"] = d;
        }
        status
    }
}

/// A `Status` reporting success (used by some deletes).
pub(crate) fn success_status(def: &ResourceDef, name: &str, uid: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": if def.group.is_empty() {
            json!({"name": name, "kind": def.plural, "uid": uid})
        } else {
            json!({"name": name, "group": def.group, "kind": def.plural, "uid": uid})
        },
    })
}
