//! Recording `core/v1` Events as Go controllers do: the reason, message and
//! type on the involved object, with the controller's component name as the
//! source.
//!
//! Like client-go's event broadcaster, recording never waits for the API:
//! events go to a background writer through a queue of
//! [`EVENT_QUEUE_LENGTH`] events (or the length given to
//! [`EventRecorder::with_queue_length`]), and an event that finds the queue
//! full is dropped and counted ([`EventRecorder::dropped`]) rather than
//! slowing the controller down. Events are best effort: the writer keeps
//! [`WRITER_CONCURRENCY`] requests in flight, so in a burst they trail the
//! controller's own writes instead of competing with them. Like
//! client-go's correlator, an event identical to a recent one (same object,
//! type, reason and message) increments that event's `count` instead of
//! creating another.
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
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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
    queue_length: usize,
    writer: Arc<OnceLock<mpsc::Sender<Event>>>,
    dropped: Arc<AtomicU64>,
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
            queue_length: EVENT_QUEUE_LENGTH,
            writer: Arc::new(OnceLock::new()),
            dropped: Arc::default(),
        }
    }

    /// The same recorder with room for `length` queued events (at least 1)
    /// instead of [`EVENT_QUEUE_LENGTH`]: for a controller that records one
    /// event per object and must not lose them in a burst (the virtual
    /// node's pod controller, with thousands of pods bound at once). Each
    /// queued event holds about a kilobyte. Set before the first event.
    ///
    /// ```no_run
    /// use stratus_runtime::events::EventRecorder;
    ///
    /// # fn run(client: kube::Client) {
    /// let recorder = EventRecorder::new(client, "virtual-kubelet").with_queue_length(10_000);
    /// assert_eq!(recorder.dropped(), 0);
    /// # }
    /// ```
    pub fn with_queue_length(mut self, length: usize) -> Self {
        self.queue_length = length.max(1);
        self
    }

    /// How many events found the queue full and were dropped.
    ///
    /// ```no_run
    /// # fn run(recorder: stratus_runtime::events::EventRecorder) {
    /// if recorder.dropped() > 0 {
    ///     eprintln!("{} events were dropped", recorder.dropped());
    /// }
    /// # }
    /// ```
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
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
            let (tx, rx) = mpsc::channel(self.queue_length);
            tokio::spawn(write_events(self.client.clone(), rx));
            tx
        });
        if let Err(mpsc::error::TrySendError::Full(_)) = writer.try_send(event) {
            // One warning for the first drop and one per thousand after, not
            // one per event: a burst would flood the log.
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped == 1 || dropped.is_multiple_of(1000) {
                tracing::warn!(
                    reason,
                    dropped,
                    queue = self.queue_length,
                    "event queue full; dropping events"
                );
            }
        }
    }
}

/// Events written at once by the background writer: few, so that in a
/// burst the controller's own writes (statuses, specs) go first and the
/// events follow (client-go's broadcaster writes one at a time).
pub const WRITER_CONCURRENCY: usize = 2;

/// How long a written event absorbs identical ones: ten minutes, client-go's
/// aggregation window.
pub const DEDUP_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

/// Written events remembered for de-duplication, at most.
const DEDUP_ENTRIES: usize = 4096;

/// What makes two events the same: the involved object, type, reason and
/// message (client-go's `getEventKey` without the source host).
type EventKey = (String, String, String, String, String, String);

fn event_key(event: &Event) -> EventKey {
    let o = &event.involved_object;
    (
        o.kind.clone().unwrap_or_default(),
        o.namespace.clone().unwrap_or_default(),
        o.name.clone().unwrap_or_default(),
        event.type_.clone().unwrap_or_default(),
        event.reason.clone().unwrap_or_default(),
        event.message.clone().unwrap_or_default(),
    )
}

/// An event already written (or being created): its name once known, its
/// namespace, its count and when it was last seen.
struct Written {
    name: Option<String>,
    namespace: String,
    count: i32,
    last: std::time::Instant,
}

type WrittenEvents = Mutex<HashMap<EventKey, Written>>;

/// The background writer: creates each queued event in its namespace, a few
/// at a time, until every recorder clone is dropped. An event identical to
/// one written within [`DEDUP_WINDOW`] bumps that event's `count` and
/// `lastTimestamp` instead of creating another object, as client-go does, so
/// a retried failure leaves one event with a count, not one per retry.
async fn write_events(client: kube::Client, events: mpsc::Receiver<Event>) {
    let written: Arc<WrittenEvents> = Arc::default();
    let queued = futures_util::stream::unfold(events, |mut rx| async move {
        rx.recv().await.map(|event| (event, rx))
    });
    queued
        .for_each_concurrent(WRITER_CONCURRENCY, |event| {
            let client = client.clone();
            let written = written.clone();
            async move { write_one(client, &written, event).await }
        })
        .await;
}

fn lock(written: &WrittenEvents) -> std::sync::MutexGuard<'_, HashMap<EventKey, Written>> {
    written.lock().unwrap_or_else(|e| e.into_inner())
}

/// What to do with one event.
enum Step {
    /// Create it (no identical recent event).
    Create,
    /// Set the count of the existing event.
    Count(String, String, i32),
    /// Nothing: an identical event is being created and will carry the
    /// count.
    Nothing,
}

async fn write_one(client: kube::Client, written: &WrittenEvents, event: Event) {
    let key = event_key(&event);
    let reason = event.reason.clone().unwrap_or_default();
    let namespace = event
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let step = {
        let mut seen = lock(written);
        match seen.get_mut(&key) {
            Some(w) if w.last.elapsed() < DEDUP_WINDOW => {
                w.count += 1;
                w.last = std::time::Instant::now();
                match &w.name {
                    Some(name) => Step::Count(name.clone(), w.namespace.clone(), w.count),
                    None => Step::Nothing,
                }
            }
            _ => {
                if seen.len() >= DEDUP_ENTRIES {
                    seen.retain(|_, w| w.last.elapsed() < DEDUP_WINDOW);
                    if seen.len() >= DEDUP_ENTRIES {
                        seen.clear();
                    }
                }
                seen.insert(
                    key.clone(),
                    Written {
                        name: None,
                        namespace: namespace.clone(),
                        count: 1,
                        last: std::time::Instant::now(),
                    },
                );
                Step::Create
            }
        }
    };
    match step {
        Step::Nothing => {}
        Step::Count(name, namespace, count) => {
            if !set_count(&client, &name, &namespace, count, &event).await {
                // Gone (expired or deleted): write it anew.
                lock(written).remove(&key);
                create(&client, written, key, event, &namespace, &reason).await;
            }
        }
        Step::Create => create(&client, written, key, event, &namespace, &reason).await,
    }
}

/// Create the event; then, if identical ones arrived meanwhile, set its
/// count.
async fn create(
    client: &kube::Client,
    written: &WrittenEvents,
    key: EventKey,
    event: Event,
    namespace: &str,
    reason: &str,
) {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    match api.create(&PostParams::default(), &event).await {
        Ok(created) => {
            let name = created.metadata.name.unwrap_or_default();
            let count = {
                let mut seen = lock(written);
                match seen.get_mut(&key) {
                    Some(w) => {
                        w.name = Some(name.clone());
                        w.count
                    }
                    None => 1,
                }
            };
            if count > 1 {
                set_count(client, &name, namespace, count, &event).await;
            }
        }
        Err(e) => {
            lock(written).remove(&key);
            tracing::warn!(reason, error = %e, "could not record an event");
        }
    }
}

/// Patch the count and last timestamp of an existing event; false if it is
/// gone.
async fn set_count(
    client: &kube::Client,
    name: &str,
    namespace: &str,
    count: i32,
    event: &Event,
) -> bool {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({
        "count": count,
        "lastTimestamp": event.last_timestamp,
    });
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.is_not_found() => false,
        Err(e) => {
            let reason = event.reason.as_deref().unwrap_or_default();
            tracing::warn!(reason, error = %e, "could not update an event's count");
            true
        }
    }
}
