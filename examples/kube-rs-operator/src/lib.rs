//! An operator written the way the kube-rs documentation writes one: a
//! derived `Greeting` custom resource, a `Controller` that owns the
//! ConfigMap it server-side applies for each Greeting, a status written with
//! server-side apply, kube-runtime's `finalizer()` around the reconciler, and
//! an Event when a Greeting is cleaned up. Owner references let the garbage
//! collector remove the ConfigMap with its Greeting.
//!
//! Its tests (`tests/operator.rs`) run it against `stratus-apiserver`, an
//! in-memory API server over real HTTP, with nothing else from Stratus.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The operator's name: its field manager and its events' reporter.
pub const MANAGER: &str = "greeting-operator";

/// The finalizer that holds a Greeting until it is cleaned up.
pub const FINALIZER: &str = "example.stratus.dev/cleanup";

/// What a Greeting asks for: a ConfigMap holding its message.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.stratus.dev",
    version = "v1",
    kind = "Greeting",
    namespaced,
    status = "GreetingStatus",
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".spec.message"}"#
)]
pub struct GreetingSpec {
    /// The message the ConfigMap carries.
    pub message: String,
}

/// What the operator reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GreetingStatus {
    /// The ConfigMap made for the Greeting.
    pub config_map: String,
    /// The Greeting's generation that ConfigMap reflects.
    pub observed_generation: i64,
}

/// Why a reconciliation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// A Greeting without a namespace (the API never sends one).
    #[error("the Greeting {0} has no namespace")]
    NoNamespace(String),
    /// A Greeting without a uid to own its ConfigMap by (the API never
    /// sends one).
    #[error("the Greeting {0} has no uid")]
    NoUid(String),
}

/// The operator's shared state.
pub struct Context {
    client: Client,
    recorder: Recorder,
}

/// The name of the ConfigMap made for the Greeting `name`.
pub fn config_map_name(name: &str) -> String {
    format!("{name}-greeting")
}

/// The permissions the operator needs, to bind to its ServiceAccount.
pub fn cluster_role() -> ClusterRole {
    let rule = |group: &str, resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    };
    let mut role = ClusterRole {
        rules: Some(vec![
            rule(
                "example.stratus.dev",
                &["greetings"],
                &["get", "list", "watch", "patch", "update"],
            ),
            rule("example.stratus.dev", &["greetings/status"], &["patch"]),
            rule(
                "",
                &["configmaps"],
                &["get", "list", "watch", "patch", "create"],
            ),
            rule("events.k8s.io", &["events"], &["create", "patch"]),
        ]),
        ..ClusterRole::default()
    };
    role.metadata.name = Some(MANAGER.to_owned());
    role
}

/// Run the operator until the stream of reconciliations ends (never, while
/// the API server answers).
pub async fn run(client: Client) {
    let greetings: Api<Greeting> = Api::all(client.clone());
    let config_maps: Api<ConfigMap> = Api::all(client.clone());
    let context = Arc::new(Context {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: None,
            },
        ),
        client,
    });
    Controller::new(greetings, watcher::Config::default())
        .owns(config_maps, watcher::Config::default())
        .run(reconcile, error_policy, context)
        .for_each(|_| futures_util::future::ready(()))
        .await;
}

/// Reconcile one Greeting, behind the finalizer.
pub async fn reconcile(
    greeting: Arc<Greeting>,
    context: Arc<Context>,
) -> Result<Action, finalizer::Error<Error>> {
    let namespace = greeting
        .namespace()
        .ok_or_else(|| finalizer::Error::ApplyFailed(Error::NoNamespace(greeting.name_any())))?;
    let greetings: Api<Greeting> = Api::namespaced(context.client.clone(), &namespace);
    finalizer(&greetings, FINALIZER, greeting, |event| async {
        match event {
            finalizer::Event::Apply(greeting) => apply(&greeting, &context).await,
            finalizer::Event::Cleanup(greeting) => cleanup(&greeting, &context).await,
        }
    })
    .await
}

/// Server-side apply the ConfigMap, then the status.
async fn apply(greeting: &Greeting, context: &Context) -> Result<Action, Error> {
    let name = greeting.name_any();
    let namespace = greeting
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    let owner = greeting
        .controller_owner_ref(&())
        .ok_or_else(|| Error::NoUid(name.clone()))?;
    let config_map = config_map_name(&name);
    let params = PatchParams::apply(MANAGER).force();
    let config_maps: Api<ConfigMap> = Api::namespaced(context.client.clone(), &namespace);
    config_maps
        .patch(
            &config_map,
            &params,
            &Patch::Apply(json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": config_map, "ownerReferences": [owner]},
                "data": {"message": greeting.spec.message}
            })),
        )
        .await?;
    let greetings: Api<Greeting> = Api::namespaced(context.client.clone(), &namespace);
    let status = GreetingStatus {
        config_map,
        observed_generation: greeting.metadata.generation.unwrap_or_default(),
    };
    greetings
        .patch_status(
            &name,
            &params,
            &Patch::Apply(json!({
                "apiVersion": "example.stratus.dev/v1",
                "kind": "Greeting",
                "status": status
            })),
        )
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// What a Greeting's deletion does before its finalizer goes: an Event (the
/// ConfigMap goes with its owner).
async fn cleanup(greeting: &Greeting, context: &Context) -> Result<Action, Error> {
    context
        .recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: "Deleted".into(),
                note: Some(format!("said goodbye to {}", greeting.name_any())),
                action: "Cleanup".into(),
                secondary: None,
            },
            &greeting.object_ref(&()),
        )
        .await?;
    Ok(Action::await_change())
}

/// Retry a failed reconciliation soon.
pub fn error_policy(
    _greeting: Arc<Greeting>,
    _error: &finalizer::Error<Error>,
    _context: Arc<Context>,
) -> Action {
    Action::requeue(Duration::from_millis(500))
}
