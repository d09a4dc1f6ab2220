//! Watch streams: initial events, resumption from a resourceVersion, 410
//! Gone for expired history, bookmarks, `sendInitialEvents`, timeouts, and
//! selector transitions (an object that stops matching is sent as DELETED,
//! one that starts matching as ADDED).

use std::sync::Arc;
use std::time::Duration;

use crate::protobuf;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use crate::error::ApiError;
use crate::meta::partial;
use crate::rest::read::{Filter, Representation};
use crate::state::{Inner, ResourceRequest};
use crate::storage::dispatch::{self, Interest};
use crate::storage::event::{Event, EventType};

/// Where a watch starts.
enum Start {
    /// Send the current state as ADDED events first.
    FromState { end_bookmark: bool },
    /// Send only changes after this revision.
    After(u64),
}

/// A validated watch, ready to stream.
pub(crate) struct WatchPlan {
    req: ResourceRequest,
    filter: Filter,
    repr: Representation,
    start: Start,
    bookmarks: bool,
    timeout: Option<Duration>,
    /// Table watches carry column definitions in their first event only.
    columns_sent: std::sync::atomic::AtomicBool,
    /// Events go out as protobuf frames instead of JSON lines.
    protobuf: bool,
}

/// Check the parameters of a watch request.
pub(crate) fn plan(
    inner: &Inner,
    req: &ResourceRequest,
    repr: Representation,
    protobuf: bool,
) -> Result<WatchPlan, ApiError> {
    let mut query = req.query.clone();
    if let Some(name) = &req.name {
        query
            .0
            .insert("fieldSelector".into(), format!("metadata.name={name}"));
    }
    let filter = Filter::of(inner, req.def, &query)?;
    let send_initial = req.query.flag("sendInitialEvents");
    let bookmarks = req.query.flag("allowWatchBookmarks");
    if send_initial && (req.query.get("resourceVersionMatch") != Some("NotOlderThan") || !bookmarks)
    {
        return Err(ApiError::new(
            422,
            "Invalid",
            "sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
        ));
    }
    let rv: Option<u64> = match req.query.get("resourceVersion") {
        None => None,
        // kube-apiserver's watch cache fails such a version with an
        // unclassified error: a 500 without a reason.
        Some(v) => Some(v.parse().map_err(|_| {
            ApiError::new(
                500,
                "",
                format!(
                    "resourceVersion: Invalid value: {v:?}: strconv.ParseUint: parsing {v:?}: invalid syntax"
                ),
            )
        })?),
    };
    let start = match (send_initial, rv) {
        (true, _) => Start::FromState { end_bookmark: true },
        (false, None | Some(0)) => Start::FromState {
            end_bookmark: false,
        },
        (false, Some(rv)) => Start::After(rv),
    };
    let timeout = req
        .query
        .number::<u64>("timeoutSeconds")?
        .map(Duration::from_secs);
    Ok(WatchPlan {
        req: req.clone(),
        filter,
        repr,
        start,
        bookmarks,
        timeout,
        columns_sent: std::sync::atomic::AtomicBool::new(false),
        protobuf,
    })
}

fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + kind.len() + 24);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

/// One event in the plan's wire format: a JSON line (from the stored JSON
/// when there is one) or a protobuf frame. An object protobuf cannot carry
/// is sent as an ERROR event, which makes the client watch again (and its
/// list falls back to JSON), instead of being dropped.
fn encode_event(plan: &WatchPlan, kind: &str, json: Option<&Bytes>, object: &Value) -> Bytes {
    if !plan.protobuf {
        return match json {
            Some(json) => line(kind, json),
            None => line(kind, &serde_json::to_vec(object).unwrap_or_default()),
        };
    }
    match protobuf::encode_watch_event(kind, object) {
        Ok(frame) => Bytes::from(frame),
        Err(e) => {
            tracing::warn!(error = %e, "a watch event cannot be written in protobuf");
            let status = ApiError::internal(format!(
                "the {kind} event cannot be written in protobuf: {e}"
            ))
            .to_status();
            protobuf::encode_watch_event("ERROR", &status)
                .map(Bytes::from)
                .unwrap_or_default()
        }
    }
}

/// The event for one stored object in the plan's representation.
fn object_line(inner: &Inner, plan: &WatchPlan, kind: &str, json: &Bytes, object: &Value) -> Bytes {
    match plan.repr {
        Representation::Metadata => encode_event(plan, kind, None, &partial(object)),
        Representation::Table => encode_event(plan, kind, None, &table_of(inner, plan, object)),
        Representation::Full => encode_event(plan, kind, Some(json), object),
    }
}

fn table_of(inner: &Inner, plan: &WatchPlan, object: &Value) -> Value {
    let def = &inner.defs().get(plan.req.def);
    let rv = crate::meta::str_at(object, &["metadata", "resourceVersion"])
        .unwrap_or_default()
        .to_owned();
    let mut t = crate::tables::table(
        def,
        inner.defs().custom(plan.req.def).as_deref(),
        &[object],
        &rv,
        None,
        plan.req.query.get("includeObject"),
    );
    if plan
        .columns_sent
        .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        t["columnDefinitions"] = json!([]);
    }
    t
}

/// The line a watch sends for `event`, if any.
fn render(inner: &Inner, plan: &WatchPlan, event: &Event) -> Option<Bytes> {
    if event.resource != plan.req.def {
        return None;
    }
    if let Some(ns) = &plan.req.namespace
        && &event.namespace != ns
    {
        return None;
    }
    let def = &inner.defs().get(plan.req.def);
    let now = plan.filter.matches(def, &event.object.object);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| plan.filter.matches(def, p));
    let obj = &event.object;
    match event.kind {
        EventType::Added if now => Some(object_line(inner, plan, "ADDED", &obj.json, &obj.object)),
        EventType::Deleted if now || before => {
            Some(object_line(inner, plan, "DELETED", &obj.json, &obj.object))
        }
        EventType::Modified => match (before, now) {
            (true, true) => Some(object_line(inner, plan, "MODIFIED", &obj.json, &obj.object)),
            (false, true) => Some(object_line(inner, plan, "ADDED", &obj.json, &obj.object)),
            (true, false) => {
                // The previous state, at the event's revision.
                let mut prev = event.previous.as_deref().cloned().unwrap_or(Value::Null);
                crate::meta::set_at(
                    &mut prev,
                    &["metadata", "resourceVersion"],
                    json!(event.rv.to_string()),
                );
                let v = match plan.repr {
                    Representation::Metadata => partial(&prev),
                    Representation::Table => table_of(inner, plan, &prev),
                    Representation::Full => prev,
                };
                Some(encode_event(plan, "DELETED", None, &v))
            }
            (false, false) => None,
        },
        _ => None,
    }
}

fn bookmark(inner: &Inner, plan: &WatchPlan, rv: u64, initial_end: bool) -> Bytes {
    let def = &inner.defs().get(plan.req.def);
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let mut object =
        json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata});
    for (field, zero) in zero_fields(def.group, def.kind) {
        object[field] = zero;
    }
    encode_event(plan, "BOOKMARK", None, &object)
}

/// The fields an empty object of a built-in kind still has on the wire
/// (Go writes struct fields that have no `omitempty`, and structs even
/// with it): a bookmark is such an object with a resourceVersion.
fn zero_fields(group: &str, kind: &str) -> Vec<(&'static str, Value)> {
    match (group, kind) {
        ("", "Service") => vec![("spec", json!({})), ("status", json!({"loadBalancer": {}}))],
        ("", "Pod") => vec![("spec", json!({"containers": null})), ("status", json!({}))],
        ("", "Namespace") => vec![("spec", json!({})), ("status", json!({}))],
        ("coordination.k8s.io", "Lease") => vec![("spec", json!({}))],
        ("networking.k8s.io", "NetworkPolicy") => vec![("spec", json!({"podSelector": {}}))],
        ("storage.k8s.io", "StorageClass") => vec![("provisioner", json!(""))],
        ("scheduling.k8s.io", "PriorityClass") => vec![("value", json!(0))],
        _ => Vec::new(),
    }
}

/// Stream the watch into `tx` until the client goes away, the timeout
/// passes, the watch is dropped by a test control, or the server stops.
///
/// The watch reads the store's history up to the revision its queue starts
/// from (its resourceVersion, or the end of the initial state), then the
/// events commits hand to its queue ([`crate::storage::dispatch`]), and the
/// history again from where its queue overflowed, if it does.
pub(crate) async fn run(inner: Arc<Inner>, plan: WatchPlan, tx: mpsc::Sender<Bytes>) {
    let def = &inner.defs().get(plan.req.def);
    let trigger = dispatch::trigger_field(def)
        .and_then(|(field, _)| plan.filter.required_field(field))
        .map(str::to_owned);
    let subscription = inner.store().watch_queue(Interest {
        resource: plan.req.def,
        trigger,
    });
    let queue = &subscription.queue;
    let mut epoch = inner.watch_epoch().subscribe();
    epoch.borrow_and_update();
    let mut closing = inner.closing().subscribe();
    // A timeout past what the clock can count is no timeout (no panic on
    // `timeoutSeconds=18446744073709551615`).
    let deadline = plan.timeout.and_then(|t| Instant::now().checked_add(t));
    let mut cursor = match plan.start {
        Start::After(rv) => rv,
        Start::FromState { end_bookmark } => {
            let (items, rv) = inner
                .store()
                .list(plan.req.def, plan.req.namespace.as_deref());
            for item in items.iter().filter(|s| plan.filter.matches(def, &s.object)) {
                if tx
                    .send(object_line(
                        &inner,
                        &plan,
                        "ADDED",
                        &item.json,
                        &item.object,
                    ))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if end_bookmark && tx.send(bookmark(&inner, &plan, rv, true)).await.is_err() {
                return;
            }
            rv
        }
    };
    let mut ticker = tokio::time::interval(inner.settings().bookmark_interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        let from = queue.from();
        if cursor < from {
            // Behind the queue: read the history.
            match inner.store().events_after(cursor, 512) {
                Err(expired) => {
                    let status = ApiError::gone(format!(
                        "too old resource version: {cursor} ({})",
                        expired.oldest
                    ))
                    .to_status();
                    let _ = tx.send(encode_event(&plan, "ERROR", None, &status)).await;
                    return;
                }
                Ok(events) if events.is_empty() => {
                    // No event is newer than `cursor`: none is missed.
                    cursor = from;
                }
                Ok(events) => {
                    // Up to `from`; the queue has the rest.
                    for event in events.iter().take_while(|e| e.rv <= from) {
                        if let Some(l) = render(&inner, &plan, event)
                            && tx.send(l).await.is_err()
                        {
                            return;
                        }
                    }
                    let last = events.last().map_or(cursor, |e| e.rv);
                    cursor = last.min(from);
                }
            }
            continue;
        }
        let taken = queue.take();
        for event in &taken.events {
            if event.rv <= cursor {
                continue;
            }
            cursor = event.rv;
            if let Some(l) = render(&inner, &plan, event)
                && tx.send(l).await.is_err()
            {
                return;
            }
        }
        if let Some(dropped) = taken.dropped_from {
            // Every wanted event before `dropped` was queued and is sent.
            cursor = cursor.max(dropped - 1);
            subscription.restart();
            continue;
        }
        if !taken.events.is_empty() {
            continue;
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = queue.pushed() => {}
            _ = epoch.changed() => return,
            _ = closing.changed() => return,
            _ = sleep => return,
            _ = tx.closed() => return,
            _ = ticker.tick(), if plan.bookmarks => {
                // With nothing queued, every wanted event up to the store's
                // revision has been sent. No bookmark for a revision the
                // store has not reached (a watch from a future
                // resourceVersion): kube-apiserver's watchers send none
                // older than where they started.
                let (revision, idle) = inner.store().quiet_revision(queue);
                let at = match (cursor <= revision, idle) {
                    (false, _) => None,
                    (true, true) => Some(revision),
                    (true, false) => Some(cursor),
                };
                if let Some(at) = at {
                    cursor = at;
                    if tx.send(bookmark(&inner, &plan, at, false)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}
