//! Recording `core/v1` Events as Go controllers do: the reason, message and
//! type on the involved object, with the controller's component name as the
//! source.
//!
//! Like client-go's event broadcaster, recording never waits for the API:
//! events go to a background writer through a queue of
//! [`EVENT_QUEUE_LENGTH`] events, and an event that finds the queue full is
//! dropped with a warning rather than slowing the controller down.
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

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};
use std::sync::{Arc, OnceLock};
use tokio::sync::mpsc;

/// Events queued for writing before new ones are dropped (client-go's
/// broadcaster queue length).
pub const EVENT_QUEUE_LENGTH: usize = 1000;

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
    writer: Arc<OnceLock<mpsc::Sender<Event>>>,
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
            writer: Arc::new(OnceLock::new()),
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

    /// Record an event: queue it for the background writer. Write failures
    /// are logged, never returned: an event that cannot be written must not
    /// fail the reconcile that emitted it. Must be called within a Tokio
    /// runtime (the writer is started on first use).
    pub async fn record(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: &str,
    ) {
        let event = self.event(object, kind, reason, message);
        let writer = self.writer.get_or_init(|| {
            let (tx, rx) = mpsc::channel(EVENT_QUEUE_LENGTH);
            tokio::spawn(write_events(self.client.clone(), rx));
            tx
        });
        if let Err(mpsc::error::TrySendError::Full(_)) = writer.try_send(event) {
            tracing::warn!(reason, "event queue full; dropping an event");
        }
    }
}

/// Events written at once by the background writer.
const WRITER_CONCURRENCY: usize = 8;

/// The background writer: creates each queued event in its namespace, a few
/// at a time, until every recorder clone is dropped.
async fn write_events(client: kube::Client, events: mpsc::Receiver<Event>) {
    let queued = futures_util::stream::unfold(events, |mut rx| async move {
        rx.recv().await.map(|event| (event, rx))
    });
    queued
        .for_each_concurrent(WRITER_CONCURRENCY, |event| {
            let client = client.clone();
            async move {
                let namespace = event
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into());
                let api: Api<Event> = Api::namespaced(client, &namespace);
                if let Err(e) = api.create(&PostParams::default(), &event).await {
                    let reason = event.reason.as_deref().unwrap_or_default();
                    tracing::warn!(reason, error = %e, "could not record an event");
                }
            }
        })
        .await;
}
