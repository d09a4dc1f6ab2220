//! Recording `core/v1` Events as Go controllers do: the reason, message and
//! type on the involved object, with the controller's component name as the
//! source.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ObjectReference;
//! use stratus_runtime::events::{EventRecorder, EventType};
//!
//! # async fn run(client: kube::Client) {
//! let recorder = EventRecorder::new(client, "cloud-node-controller");
//! let node = ObjectReference { kind: Some("Node".into()), name: Some("node-1".into()), ..Default::default() };
//! recorder.record(&node, EventType::Normal, "Synced", "Node synced successfully").await;
//! # }
//! ```

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// Records Events for one component.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    component: String,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder whose events come from `component` (for example
    /// `cloud-node-controller` or `service-controller`).
    pub fn new(client: kube::Client, component: impl Into<String>) -> Self {
        Self {
            client,
            component: component.into(),
        }
    }

    /// The event for `object` (not yet sent).
    pub fn event(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: &str,
    ) -> Event {
        let now = k8s_openapi::jiff::Timestamp::now();
        let name = object.name.clone().unwrap_or_default();
        Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}.")),
                namespace: Some(object.namespace.clone().unwrap_or_else(|| "default".into())),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(kind.as_str().to_owned()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.component.clone()),
            action: Some(reason.to_owned()),
            ..Default::default()
        }
    }

    /// Record an event. Failures are logged, never returned: an event that
    /// cannot be written must not fail the reconcile that emitted it.
    pub async fn record(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: &str,
    ) {
        let event = self.event(object, kind, reason, message);
        let namespace = event
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(reason, error = %e, "could not record an event");
        }
    }
}
