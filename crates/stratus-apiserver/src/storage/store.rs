//! The object store: every object of every resource, one global revision
//! counter (as etcd), and a bounded event history that watches read from.
//!
//! The store knows nothing of HTTP or Kubernetes semantics beyond
//! `metadata.resourceVersion`; the handlers build on its atomic
//! read-modify-write operations.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::watch;

use crate::storage::dispatch::{Interest, Queue, Watches};
use crate::storage::event::encode;
use crate::storage::event::{Event, EventType, Stored};

/// Events the history let go of, to be freed once the store's lock is
/// released: a dropped event can be the last holder of two parsed objects,
/// some hundred allocations to free, which no other request should wait
/// for.
type Evicted = Vec<Arc<Event>>;

/// What an update closure decided.
pub(crate) enum Mutation {
    /// Store this new state.
    Replace(Value),
    /// Remove the object; the value is its final state.
    Delete(Value),
    /// Leave the object as it is (no new revision).
    Unchanged,
}

/// Why a store operation failed.
#[derive(Debug)]
pub(crate) enum StoreError<E> {
    NotFound,
    AlreadyExists,
    Rejected(E),
}

/// Watch resumption from a revision older than the history holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expired {
    pub(crate) oldest: u64,
}

type Key = (String, String);

struct State {
    revision: u64,
    buckets: Vec<BTreeMap<Key, Stored>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// The estimated memory of the events in `history`, and its budget.
    history_bytes: usize,
    history_bytes_limit: usize,
    /// Events with `rv <= compacted` are gone from the history.
    compacted: u64,
    /// Owner UID → the objects that list it in `ownerReferences` (garbage
    /// collection looks dependents up here instead of scanning the store).
    dependents: HashMap<String, BTreeSet<(usize, Key)>>,
    /// The open watches that commits hand their events to.
    watches: Watches,
    /// Resource index → the JSON path of its trigger field.
    triggers: HashMap<usize, &'static [&'static str]>,
}

/// The owner UIDs an object lists.
pub(crate) fn owner_uids(object: &Value) -> Vec<String> {
    object
        .get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// An open watch's queue, registered with the store until dropped.
pub(crate) struct Subscription<'a> {
    store: &'a Store,
    interest: Interest,
    id: u64,
    /// The queue commits push to.
    pub(crate) queue: Arc<Queue>,
}

impl Subscription<'_> {
    /// After an overflow: take events again from the store's current
    /// revision on; the watch reads those before it from the history.
    pub(crate) fn restart(&self) {
        let state = self.store.lock();
        self.queue.restart(state.revision);
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        self.store.lock().watches.remove(&self.interest, self.id);
    }
}

/// The store.
pub(crate) struct Store {
    state: Mutex<State>,
    notify: watch::Sender<u64>,
}

fn meta_name(object: &Value) -> String {
    object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn stamp(mut object: Value, rv: u64) -> Stored {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    let (json, type_end) = encode(&object);
    Stored {
        object: Arc::new(object),
        json,
        type_end,
        rv,
    }
}

impl Store {
    /// Make room for `resources` resources (custom resources are added
    /// while the server runs).
    pub(crate) fn add_resources(&self, resources: usize) {
        let mut state = self.lock();
        while state.buckets.len() < resources {
            state.buckets.push(BTreeMap::new());
        }
    }

    pub(crate) fn new(resources: usize, history_limit: usize, history_bytes_limit: usize) -> Self {
        let (notify, _) = watch::channel(1);
        Self {
            state: Mutex::new(State {
                revision: 1,
                buckets: (0..resources).map(|_| BTreeMap::new()).collect(),
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                history_bytes: 0,
                history_bytes_limit,
                compacted: 1,
                dependents: HashMap::new(),
                watches: Watches::default(),
                triggers: HashMap::new(),
            }),
            notify,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn revision(&self) -> u64 {
        self.lock().revision
    }

    pub(crate) fn oldest_resumable(&self) -> u64 {
        self.lock().compacted
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Index the watches of `resource` by the field at `path` (see
    /// [`crate::storage::dispatch`]).
    pub(crate) fn set_trigger(&self, resource: usize, path: &'static [&'static str]) {
        self.lock().triggers.insert(resource, path);
    }

    /// Open a queue that every later commit matching `interest` is handed
    /// to; it is closed when the subscription drops.
    pub(crate) fn watch_queue(&self, interest: Interest) -> Subscription<'_> {
        let queue = Arc::new(Queue::default());
        let mut state = self.lock();
        queue.restart(state.revision);
        let id = state.watches.add(&interest, queue.clone());
        drop(state);
        Subscription {
            store: self,
            interest,
            id,
            queue,
        }
    }

    /// The store's revision, and whether `queue` holds nothing at it (then
    /// every event up to it that the queue's watch wants has been taken).
    pub(crate) fn quiet_revision(&self, queue: &Queue) -> (u64, bool) {
        let state = self.lock();
        (state.revision, queue.is_idle())
    }

    pub(crate) fn get(&self, resource: usize, namespace: &str, name: &str) -> Option<Stored> {
        self.lock()
            .buckets
            .get(resource)?
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every object of `resource` (in `namespace` if given), sorted by
    /// namespace and name, with the revision of the snapshot.
    pub(crate) fn list(&self, resource: usize, namespace: Option<&str>) -> (Vec<Stored>, u64) {
        let state = self.lock();
        let Some(bucket) = state.buckets.get(resource) else {
            return (Vec::new(), state.revision);
        };
        let items = match namespace {
            Some(ns) => bucket
                .range((ns.to_owned(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, s)| s.clone())
                .collect(),
            None => bucket.values().cloned().collect(),
        };
        (items, state.revision)
    }

    /// The number of objects of `resource` in `namespace`.
    pub(crate) fn count(&self, resource: usize, namespace: &str) -> usize {
        let state = self.lock();
        state.buckets.get(resource).map_or(0, |bucket| {
            bucket
                .range((namespace.to_owned(), String::new())..)
                .take_while(|((n, _), _)| n == namespace)
                .count()
        })
    }

    #[must_use = "drop the evicted events after the store's lock is released"]
    fn record(
        &self,
        state: &mut State,
        resource: usize,
        namespace: &str,
        kind: EventType,
        object: Stored,
        previous: Option<Arc<Value>>,
    ) -> Evicted {
        let key = (namespace.to_owned(), meta_name(&object.object));
        if let Some(previous) = &previous {
            for uid in owner_uids(previous) {
                if let Some(set) = state.dependents.get_mut(&uid) {
                    set.remove(&(resource, key.clone()));
                    if set.is_empty() {
                        state.dependents.remove(&uid);
                    }
                }
            }
        }
        if kind != EventType::Deleted {
            for uid in owner_uids(&object.object) {
                state
                    .dependents
                    .entry(uid)
                    .or_default()
                    .insert((resource, key.clone()));
            }
        }
        let event = Arc::new(Event::new(resource, namespace, kind, object, previous));
        state
            .watches
            .dispatch(&event, state.triggers.get(&resource).copied());
        state.history_bytes += event.memory();
        state.history.push_back(event);
        // The newest event stays even alone over the budget.
        let mut evicted = Vec::new();
        while state.history.len() > state.history_limit
            || (state.history_bytes > state.history_bytes_limit && state.history.len() > 1)
        {
            let Some(dropped) = state.history.pop_front() else {
                break;
            };
            state.history_bytes -= dropped.memory();
            state.compacted = dropped.rv;
            evicted.push(dropped);
        }
        evicted
    }

    /// The objects that list `owner_uid` among their owners: resource
    /// index, namespace and name.
    pub(crate) fn dependents_of(&self, owner_uid: &str) -> Vec<(usize, String, String)> {
        self.lock()
            .dependents
            .get(owner_uid)
            .map(|set| {
                set.iter()
                    .map(|(resource, (ns, name))| (*resource, ns.clone(), name.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn publish(&self, rv: u64) {
        self.notify.send_replace(rv);
    }

    /// Create an object. Fails if one with the same key exists.
    pub(crate) fn create(
        &self,
        resource: usize,
        namespace: &str,
        name: &str,
        object: Value,
    ) -> Result<Stored, StoreError<std::convert::Infallible>> {
        let mut state = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        if state.buckets[resource].contains_key(&key) {
            return Err(StoreError::AlreadyExists);
        }
        state.revision += 1;
        let stored = stamp(object, state.revision);
        state.buckets[resource].insert(key, stored.clone());
        let evicted = self.record(
            &mut state,
            resource,
            namespace,
            EventType::Added,
            stored.clone(),
            None,
        );
        drop(state);
        self.publish(stored.rv);
        drop(evicted);
        Ok(stored)
    }

    /// Read-modify-write one object atomically. `f` sees the current state
    /// and decides; the new revision is assigned here. Returns the stored
    /// result and whether the object was deleted.
    pub(crate) fn update<E>(
        &self,
        resource: usize,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&Stored) -> Result<Mutation, E>,
    ) -> Result<(Stored, bool), StoreError<E>> {
        let mut state = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        let current = state.buckets[resource]
            .get(&key)
            .cloned()
            .ok_or(StoreError::NotFound)?;
        let (object, kind) = match f(&current).map_err(StoreError::Rejected)? {
            Mutation::Unchanged => return Ok((current, false)),
            Mutation::Replace(object) => (object, EventType::Modified),
            Mutation::Delete(object) => (object, EventType::Deleted),
        };
        state.revision += 1;
        let stored = stamp(object, state.revision);
        let deleted = kind == EventType::Deleted;
        if deleted {
            state.buckets[resource].remove(&key);
        } else {
            state.buckets[resource].insert(key, stored.clone());
        }
        let evicted = self.record(
            &mut state,
            resource,
            namespace,
            kind,
            stored.clone(),
            Some(current.object),
        );
        drop(state);
        self.publish(stored.rv);
        drop(evicted);
        Ok((stored, deleted))
    }

    /// Events with `rv > after`, at most `limit`, or `Expired` when the
    /// history no longer reaches back to `after`.
    pub(crate) fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<Event>>, Expired> {
        let state = self.lock();
        if after < state.compacted {
            return Err(Expired {
                oldest: state.compacted,
            });
        }
        let start = state.history.partition_point(|e| e.rv <= after);
        Ok(state.history.range(start..).take(limit).cloned().collect())
    }

    /// Forget the whole history: every resume from an older revision gets
    /// 410 Gone.
    pub(crate) fn compact(&self) {
        let mut state = self.lock();
        let history = std::mem::take(&mut state.history);
        state.history_bytes = 0;
        state.compacted = state.revision;
        drop(state);
        drop(history);
    }
}

#[cfg(test)]
mod encode_tests {
    use super::*;

    #[test]
    fn type_members_come_first_and_can_be_left_out() {
        let object = serde_json::json!({"data": {"a": "b"}, "kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}});
        let stored = stamp(object, 7);
        let json = std::str::from_utf8(&stored.json).unwrap();
        assert!(
            json.starts_with(r#"{"apiVersion":"v1","kind":"ConfigMap","#),
            "{json}"
        );
        let (open, rest) = stored.untyped_json();
        let untyped: Value = serde_json::from_slice(&[open, rest].concat()).unwrap();
        assert_eq!(
            untyped,
            serde_json::json!({"data": {"a": "b"}, "metadata": {"name": "x", "resourceVersion": "7"}})
        );
        let bare = stamp(serde_json::json!({"kind": "X"}), 1);
        let (open, rest) = bare.untyped_json();
        assert_eq!([open, rest].concat(), b"{}");
        let untyped_already = stamp(serde_json::json!({"a": 1}), 1);
        let (open, rest) = untyped_already.untyped_json();
        assert_eq!([open, rest].concat(), br#"{"a":1}"#);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name}})
    }

    #[test]
    fn revisions_are_global_and_stamped() {
        let store = Store::new(2, 10, usize::MAX);
        let a = store.create(0, "ns", "a", obj("a")).unwrap();
        let b = store.create(1, "", "b", obj("b")).unwrap();
        assert_eq!(b.rv, a.rv + 1);
        assert_eq!(
            a.object["metadata"]["resourceVersion"],
            json!(a.rv.to_string())
        );
        assert!(matches!(
            store.create(0, "ns", "a", obj("a")),
            Err(StoreError::AlreadyExists)
        ));
        let (items, rv) = store.list(0, Some("ns"));
        assert_eq!(items.len(), 1);
        assert_eq!(rv, b.rv);
        assert!(store.list(0, Some("other")).0.is_empty());
    }

    #[test]
    fn update_and_delete_record_events() {
        let store = Store::new(1, 10, usize::MAX);
        let created = store.create(0, "ns", "a", obj("a")).unwrap();
        let (updated, deleted) = store
            .update::<()>(0, "ns", "a", |cur| {
                let mut v = (*cur.object).clone();
                v["spec"] = json!({"x": 1});
                Ok(Mutation::Replace(v))
            })
            .unwrap();
        assert!(!deleted);
        assert!(updated.rv > created.rv);
        let (_, deleted) = store
            .update::<()>(0, "ns", "a", |cur| {
                Ok(Mutation::Delete((*cur.object).clone()))
            })
            .unwrap();
        assert!(deleted);
        assert!(store.get(0, "ns", "a").is_none());
        let events = store.events_after(created.rv - 1, 100).unwrap();
        let kinds: Vec<_> = events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [EventType::Added, EventType::Modified, EventType::Deleted]
        );
        assert!(events[2].previous.is_some());
        assert!(matches!(
            store.update::<()>(0, "ns", "a", |_| Ok(Mutation::Unchanged)),
            Err(StoreError::NotFound)
        ));
    }

    #[test]
    fn a_history_over_its_byte_budget_drops_its_oldest_events() {
        let big = |i: usize| json!({"metadata": {"name": format!("a{i}")}, "data": {"k": "v".repeat(100)}});
        // The memory of one such event, then room for about three.
        let one = {
            let probe = Store::new(1, 10, usize::MAX);
            probe.create(0, "", "a0", big(0)).unwrap();
            probe.lock().history_bytes
        };
        let store = Store::new(1, 1_000, 3 * one + one / 2);
        let first = store.create(0, "", "a0", big(0)).unwrap();
        for i in 1..10 {
            store.create(0, "", &format!("a{i}"), big(i)).unwrap();
        }
        let state = store.lock();
        assert_eq!(state.history.len(), 3);
        assert!(state.history_bytes <= 3 * one + one / 2);
        drop(state);
        assert!(
            store.events_after(first.rv, 10).is_err(),
            "an old resume expired"
        );
        let current = store.revision();
        assert_eq!(store.events_after(current - 3, 10).unwrap().len(), 3);
    }

    #[test]
    fn a_write_hands_back_the_events_it_evicts_and_counts_what_stays() {
        let big = |i: usize| json!({"metadata": {"name": format!("a{i}")}, "data": {"k": "v".repeat(100)}});
        let store = Store::new(1, 2, usize::MAX);
        let rvs: Vec<u64> = (0..2)
            .map(|i| store.create(0, "", &format!("a{i}"), big(i)).unwrap().rv)
            .collect();
        let mut state = store.lock();
        state.revision += 1;
        let stored = stamp(big(2), state.revision);
        let third = stored.rv;
        let evicted = store.record(&mut state, 0, "", EventType::Added, stored, None);
        // The oldest event is out of the history but still alive: the
        // caller frees it after the lock.
        assert_eq!(evicted.iter().map(|e| e.rv).collect::<Vec<_>>(), [rvs[0]]);
        assert_eq!(
            state.history.iter().map(|e| e.rv).collect::<Vec<_>>(),
            [rvs[1], third]
        );
        let kept: usize = state.history.iter().map(|e| e.memory()).sum();
        assert_eq!(
            state.history_bytes, kept,
            "each event counted once, in and out"
        );
        assert_eq!(state.compacted, rvs[0]);
    }

    #[test]
    fn bounded_history_expires_old_resumes() {
        let store = Store::new(1, 3, usize::MAX);
        let first = store.create(0, "", "a0", obj("a0")).unwrap();
        for i in 1..6 {
            store.create(0, "", &format!("a{i}"), obj("x")).unwrap();
        }
        assert!(store.events_after(first.rv, 10).is_err());
        let current = store.revision();
        assert_eq!(store.events_after(current - 3, 10).unwrap().len(), 3);
        store.compact();
        assert!(store.events_after(current - 1, 10).is_err());
        assert!(store.events_after(current, 10).unwrap().is_empty());
    }
}
