//! Evictions that honour PodDisruptionBudgets, as kube-apiserver's eviction
//! subresource does. With no disruption controller in the harness, the
//! budget is computed at the eviction from the pods the budget selects
//! (kube-apiserver reads the controller's `status.disruptionsAllowed`).

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::meta::{self, at, is_terminating, str_at};
use crate::selectors::object_selector_matches;
use crate::state::Inner;

fn is_ready(pod: &Value) -> bool {
    at(pod, &["status", "conditions"])
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn is_terminal(pod: &Value) -> bool {
    matches!(
        str_at(pod, &["status", "phase"]),
        Some("Succeeded" | "Failed")
    )
}

/// An int-or-percent of `total` (percentages round up, as kube does for
/// `minAvailable` and `maxUnavailable`).
fn scaled(value: &Value, total: i64) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let percent: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((percent * total + 99) / 100)
        }
        _ => None,
    }
}

/// What a budget allows now: (healthy pods, pods it needs healthy).
pub(crate) fn budget(pdb: &Value, pods: &[&Value]) -> (i64, i64) {
    let expected = pods.len() as i64;
    let healthy = pods
        .iter()
        .filter(|p| is_ready(p) && !is_terminating(p))
        .count() as i64;
    let desired = if let Some(min) = at(pdb, &["spec", "minAvailable"]) {
        scaled(min, expected).unwrap_or(0)
    } else if let Some(max) = at(pdb, &["spec", "maxUnavailable"]) {
        (expected - scaled(max, expected).unwrap_or(0)).max(0)
    } else {
        0
    };
    (healthy, desired)
}

/// Refuse the eviction of `pod` if a budget forbids it: 429 with
/// kube-apiserver's message and the budget's figures as the cause.
pub(crate) fn check(inner: &Inner, pod: &Value) -> Result<(), ApiError> {
    if is_terminal(pod) || is_terminating(pod) {
        return Ok(());
    }
    let Some(pdb_index) = inner.defs().find("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let Some(pod_index) = inner.defs().core("pods") else {
        return Ok(());
    };
    let namespace = str_at(pod, &["metadata", "namespace"]).unwrap_or_default();
    let labels = meta::labels(pod);
    let (budgets, _) = inner.store().list(pdb_index, Some(namespace));
    let matching: Vec<_> = budgets
        .iter()
        .filter(|b| {
            at(&b.object, &["spec", "selector"])
                .is_some_and(|s| !s.is_null() && object_selector_matches(s, labels))
        })
        .collect();
    let pdb = match matching.as_slice() {
        [] => return Ok(()),
        [one] => &one.object,
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let (pods, _) = inner.store().list(pod_index, Some(namespace));
    let selector = at(pdb, &["spec", "selector"]).cloned().unwrap_or(json!({}));
    let selected: Vec<&Value> = pods
        .iter()
        .map(|p| &*p.object)
        .filter(|p| object_selector_matches(&selector, meta::labels(p)) && !is_terminal(p))
        .collect();
    let (healthy, desired) = budget(pdb, &selected);
    let always = str_at(pdb, &["spec", "unhealthyPodEvictionPolicy"]) == Some("AlwaysAllow");
    let allowed = if is_ready(pod) {
        healthy - desired > 0
    } else {
        // An unhealthy pod may go while the budget is met (IfHealthyBudget).
        always || healthy >= desired
    };
    if allowed {
        return Ok(());
    }
    let name = meta::name(pdb);
    Err(ApiError {
        details: Some(json!({"causes": [{
            "reason": "DisruptionBudget",
            "message": format!("The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"),
        }]})),
        ..ApiError::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ready: bool) -> Value {
        json!({"status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[test]
    fn budgets_count_healthy_pods() {
        let pods = [pod(true), pod(true), pod(false)];
        let refs: Vec<&Value> = pods.iter().collect();
        assert_eq!(budget(&json!({"spec": {"minAvailable": 2}}), &refs), (2, 2));
        assert_eq!(
            budget(&json!({"spec": {"minAvailable": "50%"}}), &refs),
            (2, 2)
        );
        assert_eq!(
            budget(&json!({"spec": {"maxUnavailable": 1}}), &refs),
            (2, 2)
        );
        assert_eq!(
            budget(&json!({"spec": {"maxUnavailable": "100%"}}), &refs),
            (2, 0)
        );
    }
}
