//! API Priority and Fairness objects (`flowcontrol.apiserver.k8s.io/v1`):
//! stored and served, and seeded with kube-apiserver's mandatory
//! configuration (`exempt` and `catch-all`, each a FlowSchema and a
//! PriorityLevelConfiguration). Requests are not queued by them: the
//! in-memory server has no concurrency limits to share.

use serde_json::{Value, json};

const GROUP_VERSION: &str = "flowcontrol.apiserver.k8s.io/v1";

fn everything() -> Value {
    json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
            "clusterScope": true, "namespaces": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    })
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn with_subjects(subjects: Vec<Value>) -> Value {
    let mut rule = everything();
    rule["subjects"] = Value::Array(subjects);
    rule
}

/// The mandatory objects, as kube-apiserver creates them at start.
pub(crate) fn bootstrap() -> Vec<Value> {
    let annotations = json!({"apf.kubernetes.io/autoupdate-spec": "true"});
    vec![
        json!({"apiVersion": GROUP_VERSION, "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "exempt", "annotations": annotations},
            "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}),
        json!({"apiVersion": GROUP_VERSION, "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "catch-all", "annotations": annotations},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5,
                "lendablePercent": 0, "limitResponse": {"type": "Reject"}}}}),
        json!({"apiVersion": GROUP_VERSION, "kind": "FlowSchema",
            "metadata": {"name": "exempt", "annotations": annotations},
            "spec": {"matchingPrecedence": 1, "priorityLevelConfiguration": {"name": "exempt"},
                "rules": [with_subjects(vec![group("system:masters")])]}}),
        json!({"apiVersion": GROUP_VERSION, "kind": "FlowSchema",
            "metadata": {"name": "catch-all", "annotations": annotations},
            "spec": {"matchingPrecedence": 10000, "priorityLevelConfiguration": {"name": "catch-all"},
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [with_subjects(vec![group("system:unauthenticated"), group("system:authenticated")])]}}),
    ]
}
