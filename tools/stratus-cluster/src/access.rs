//! What tests do with a running cluster: apply manifests, a ServiceAccount's
//! kubeconfig, count audited requests.

use std::path::Path;

use crate::BoxError;

use super::prepare::write_kubeconfig;
use super::state::State;

/// Server-side apply every object of a multi-document YAML file (as
/// `kubectl apply --server-side -f FILE`), as `manager`.
pub async fn apply_manifest(
    client: &kube::Client,
    path: &Path,
    manager: &str,
) -> Result<usize, BoxError> {
    use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
    use kube::discovery::{Scope, pinned_kind};
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let objects: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut applied = 0;
    for object in objects.into_iter().filter(|o| !o.is_null()) {
        let object: DynamicObject = serde_json::from_value(object)?;
        let types = object
            .types
            .clone()
            .ok_or("an object without apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let (resource, capabilities) = pinned_kind(client, &gvk).await?;
        let name = object
            .metadata
            .name
            .clone()
            .ok_or("an object without a name")?;
        let api: Api<DynamicObject> = match (&capabilities.scope, &object.metadata.namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &resource),
            (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&object),
        )
        .await
        .map_err(|e| format!("{} {name}: {e}", types.kind))?;
        applied += 1;
    }
    Ok(applied)
}

/// A kubeconfig at `path` that authenticates as the ServiceAccount
/// `namespace/name` with a token from the TokenRequest API (valid a day),
/// as a pod of that ServiceAccount would.
pub async fn service_account_kubeconfig(
    state: &State,
    namespace: &str,
    name: &str,
    path: &Path,
) -> Result<(), BoxError> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> =
        kube::Api::namespaced(state.client().await?, namespace);
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"expirationSeconds": 86400}
    }))?;
    let token = accounts
        .create_token_request(name, &Default::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .ok_or("the TokenRequest returned no token")?;
    write_kubeconfig(path, &state.server, &state.ca, name, &[("token", token)])
}

/// What the audit log says of the requests whose user agent starts with
/// `user_agent`: how many, and the forbidden ones (`verb resource: user`).
#[derive(Debug, Default)]
pub struct AuditCount {
    /// Requests made.
    pub requests: usize,
    /// The ones answered 403.
    pub forbidden: Vec<String>,
    /// 403s answered while kube-apiserver was starting again after a
    /// `stop` (before it was ready: RBAC's caches not synced), which say
    /// nothing of the caller's permissions.
    pub forbidden_while_starting: usize,
}

/// Count the audit log's requests by user agent (see [`AuditCount`]).
pub fn audit_count(state: &State, user_agent: &str) -> Result<AuditCount, BoxError> {
    let text = std::fs::read_to_string(&state.audit_log)
        .map_err(|e| format!("{}: {e}", state.audit_log.display()))?;
    let mut count = AuditCount::default();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if !event["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with(user_agent))
        {
            continue;
        }
        count.requests += 1;
        if event["responseStatus"]["code"].as_u64() == Some(403) {
            let received = event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|t| t.as_microsecond());
            let starting = received.is_some_and(|at| {
                state
                    .apiserver_outages
                    .iter()
                    .any(|(down, up)| at >= *down && up.is_none_or(|up| at <= up))
            });
            if starting {
                count.forbidden_while_starting += 1;
                continue;
            }
            count.forbidden.push(format!(
                "{} {} {}: {} ({})",
                event["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap_or_default(),
                event["verb"].as_str().unwrap_or_default(),
                event["requestURI"].as_str().unwrap_or_default(),
                event["user"]["username"].as_str().unwrap_or_default(),
                event["responseStatus"]["message"]
                    .as_str()
                    .or(event["annotations"]["authorization.k8s.io/reason"].as_str())
                    .unwrap_or_default()
            ));
        }
    }
    Ok(count)
}
