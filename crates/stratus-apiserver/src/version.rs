//! The Kubernetes version the harness reports, in `/version` and in the
//! OpenAPI documents.

use serde_json::{Value, json};

/// The Kubernetes version the harness reports (the version of the
/// `k8s-openapi` types it is built with).
pub(crate) const MINOR: &str = "37";

/// The `/version` document.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": MINOR,
        "emulationMajor": "1",
        "emulationMinor": MINOR,
        "gitVersion": format!("v1.{MINOR}.0-stratus"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a (stratus-testing in-memory API server)",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}
