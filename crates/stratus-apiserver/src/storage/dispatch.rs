//! Event dispatch to open watches, as kube-apiserver's watch cache does it:
//! each commit hands its event to the watches that can want it, instead of
//! every watch reading every event from the history.
//!
//! A watch is registered for one resource and, where its field selector
//! requires the resource's trigger field to equal a value (a pod watch with
//! `spec.nodeName=<node>`, as every kubelet's), for that value only: a
//! pod's event goes to the watches of its node before and after the change,
//! and to the resource's unindexed watches. With 100 nodes' watches open,
//! a pod event costs one push, not 100 filter checks.
//!
//! Each watch's queue is bounded. A watch that falls behind stops taking
//! events at the first one that does not fit (it is told where), and
//! catches up from the store's history from there, as every watch did
//! before dispatch existed: nothing is lost, and a watch too far behind
//! gets the history's 410 Gone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::resources::ResourceDef;
use crate::storage::event::Event;

/// The most events a watch's queue holds before it falls back to the
/// history.
pub(crate) const QUEUE_LIMIT: usize = 1024;

/// What a watch is registered for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interest {
    /// The resource's index.
    pub(crate) resource: usize,
    /// The value the watch requires of the resource's trigger field, if
    /// the resource has one and the watch's field selector requires it.
    pub(crate) trigger: Option<String>,
}

/// One watch's queue of dispatched events.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    state: Mutex<QueueState>,
    wake: Notify,
}

#[derive(Debug, Default)]
struct QueueState {
    events: VecDeque<Arc<Event>>,
    /// The revision of the first event that did not fit: the queue takes
    /// no more until the watch has caught up from the history.
    dropped_from: Option<u64>,
    /// Every event after this revision that the watch wants is in the queue
    /// (or past `dropped_from`); older ones are in the history.
    from: u64,
}

/// What a watch takes from its queue.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// The queued events, oldest first.
    pub(crate) events: Vec<Arc<Event>>,
    /// Set when the queue overflowed: events from this revision on must be
    /// read from the history.
    pub(crate) dropped_from: Option<u64>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, event: &Arc<Event>) {
        let mut state = self.lock();
        if state.dropped_from.is_some() {
            return;
        }
        if state.events.len() >= QUEUE_LIMIT {
            state.dropped_from = Some(event.rv);
        } else {
            state.events.push_back(event.clone());
        }
        drop(state);
        self.wake.notify_one();
    }

    /// Everything queued.
    pub(crate) fn take(&self) -> Taken {
        let mut state = self.lock();
        Taken {
            events: state.events.drain(..).collect(),
            dropped_from: state.dropped_from,
        }
    }

    /// The revision after which the queue has every event the watch wants.
    pub(crate) fn from(&self) -> u64 {
        self.lock().from
    }

    /// True if nothing is queued and nothing was dropped.
    pub(crate) fn is_idle(&self) -> bool {
        let state = self.lock();
        state.events.is_empty() && state.dropped_from.is_none()
    }

    /// Take events again from the revision after `revision` on (the store
    /// calls this under its lock, so that no commit falls in between).
    pub(crate) fn restart(&self, revision: u64) {
        let mut state = self.lock();
        state.events.clear();
        state.dropped_from = None;
        state.from = revision;
    }

    /// Wait until an event is pushed (or was pushed since the last wait).
    pub(crate) async fn pushed(&self) {
        self.wake.notified().await;
    }
}

/// The field a resource's watches are indexed by, with its JSON path:
/// kube-apiserver indexes pods by `spec.nodeName` (each kubelet watches
/// its own node's pods), as it does ResourceSlices, which the harness does
/// not serve.
pub(crate) fn trigger_field(def: &ResourceDef) -> Option<(&'static str, &'static [&'static str])> {
    match (def.group, def.plural) {
        ("", "pods") => Some(("spec.nodeName", &["spec", "nodeName"])),
        _ => None,
    }
}

type Entry = (u64, Arc<Queue>);

/// The open watches of one resource.
#[derive(Debug, Default)]
struct ResourceWatches {
    every: Vec<Entry>,
    by_trigger: HashMap<String, Vec<Entry>>,
}

/// Every open watch, by what it is registered for.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    next_id: u64,
    resources: HashMap<usize, ResourceWatches>,
}

impl Watches {
    /// Register a queue; returns its id for [`Watches::remove`].
    pub(crate) fn add(&mut self, interest: &Interest, queue: Arc<Queue>) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let watches = self.resources.entry(interest.resource).or_default();
        match &interest.trigger {
            Some(value) => watches
                .by_trigger
                .entry(value.clone())
                .or_default()
                .push((id, queue)),
            None => watches.every.push((id, queue)),
        }
        id
    }

    /// Unregister the queue `id`.
    pub(crate) fn remove(&mut self, interest: &Interest, id: u64) {
        let Some(watches) = self.resources.get_mut(&interest.resource) else {
            return;
        };
        let list = match &interest.trigger {
            Some(value) => match watches.by_trigger.get_mut(value) {
                Some(list) => list,
                None => return,
            },
            None => &mut watches.every,
        };
        list.retain(|(i, _)| *i != id);
        if let Some(value) = &interest.trigger
            && list.is_empty()
        {
            watches.by_trigger.remove(value);
        }
        if watches.every.is_empty() && watches.by_trigger.is_empty() {
            self.resources.remove(&interest.resource);
        }
    }

    /// Hand `event` to the watches that can want it. `trigger` is the JSON
    /// path of the resource's trigger field, if it has one.
    pub(crate) fn dispatch(&self, event: &Arc<Event>, trigger: Option<&[&str]>) {
        let Some(watches) = self.resources.get(&event.resource) else {
            return;
        };
        for (_, queue) in &watches.every {
            queue.push(event);
        }
        let Some(path) = trigger else {
            return;
        };
        if watches.by_trigger.is_empty() {
            return;
        }
        let now = trigger_value(&event.object.object, path);
        // A change of the value (a pod bound, or rebound) goes to both.
        let before = event
            .previous
            .as_deref()
            .map(|p| trigger_value(p, path))
            .filter(|b| *b != now);
        for value in std::iter::once(now).chain(before) {
            if let Some(list) = watches.by_trigger.get(value) {
                for (_, queue) in list {
                    queue.push(event);
                }
            }
        }
    }
}

/// The trigger field's value as a field selector compares it: an absent
/// field is the empty string.
fn trigger_value<'a>(object: &'a serde_json::Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(object, |v, k| v.get(*k))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::{Mutation, Store};
    use serde_json::json;

    const NODE: &[&str] = &["spec", "nodeName"];

    fn pod(name: &str, node: Option<&str>) -> serde_json::Value {
        let mut pod = json!({"metadata": {"name": name}, "spec": {}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    }

    fn names(queue: &Queue) -> Vec<String> {
        queue
            .take()
            .events
            .iter()
            .map(|e| {
                e.object.object["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    fn interest(resource: usize, trigger: Option<&str>) -> Interest {
        Interest {
            resource,
            trigger: trigger.map(str::to_owned),
        }
    }

    #[test]
    fn events_go_to_the_watches_of_their_resource_and_trigger_value() {
        let store = Store::new(2, 100, usize::MAX);
        store.set_trigger(0, NODE);
        let every = store.watch_queue(interest(0, None));
        let a = store.watch_queue(interest(0, Some("a")));
        let unbound = store.watch_queue(interest(0, Some("")));
        let other = store.watch_queue(interest(1, None));
        store.create(0, "ns", "p", pod("p", None)).unwrap();
        store.create(0, "ns", "q", pod("q", Some("b"))).unwrap();
        store.create(1, "ns", "x", pod("x", Some("a"))).unwrap();
        // Bound: the change goes to the watches of the value before and
        // after.
        store
            .update::<()>(0, "ns", "p", |_| Ok(Mutation::Replace(pod("p", Some("a")))))
            .unwrap();
        assert_eq!(names(&every.queue), ["p", "q", "p"]);
        assert_eq!(names(&a.queue), ["p"]);
        assert_eq!(names(&unbound.queue), ["p", "p"]);
        assert_eq!(names(&other.queue), ["x"]);
        drop(a);
        store
            .update::<()>(0, "ns", "p", |cur| {
                Ok(Mutation::Delete((*cur.object).clone()))
            })
            .unwrap();
        assert_eq!(names(&every.queue), ["p"]);
        assert!(unbound.queue.take().events.is_empty());
    }

    #[test]
    fn a_full_queue_says_where_it_stopped_and_takes_nothing_until_restarted() {
        let store = Store::new(1, 10_000, usize::MAX);
        let every = store.watch_queue(interest(0, None));
        let start = store.revision();
        assert_eq!(every.queue.from(), start);
        let mut revisions = Vec::new();
        for i in 0..QUEUE_LIMIT + 5 {
            let name = format!("p{i}");
            revisions.push(store.create(0, "ns", &name, pod(&name, None)).unwrap().rv);
        }
        let taken = every.queue.take();
        assert_eq!(taken.events.len(), QUEUE_LIMIT);
        assert_eq!(taken.dropped_from, Some(revisions[QUEUE_LIMIT]));
        assert!(!every.queue.is_idle());
        every.restart();
        assert_eq!(every.queue.from(), store.revision());
        assert!(every.queue.is_idle());
        store.create(0, "ns", "last", pod("last", None)).unwrap();
        assert_eq!(names(&every.queue), ["last"]);
    }
}
