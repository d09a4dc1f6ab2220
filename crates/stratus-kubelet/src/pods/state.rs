//! What the pod controller remembers of each pod, apart from the API's
//! cache: one [`PodState`] per pod name (the work queues and the API
//! address pods by namespace/name), each piece tagged with the UID it is
//! about, so that a pod deleted and re-created under the same name never
//! inherits its predecessor's marks. Every path that ends a pod's life
//! forgets exactly one entry; an entry left with nothing in it is removed
//! at once. Pure state, tested without IO.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;

/// A UID and the fingerprint of what was done for it.
type Stamp = (Option<String>, u64);

/// Whether `stamp` is `print` for this UID.
fn stamped(stamp: &Option<Stamp>, uid: &Option<String>, print: u64) -> bool {
    stamp.as_ref().is_some_and(|(u, p)| u == uid && *p == print)
}

/// One pod's marks.
#[derive(Debug, Default)]
pub(super) struct PodState {
    /// The provider's latest report (status, or its deletion) and when it
    /// came, until it is written. Boxed: a `Pod` inline is about 2 KB, which
    /// every pod's state would carry for its whole life, empty.
    notified: Option<Box<(Pod, Instant)>>,
    /// The UID of the pod last handed to the provider (marked before the
    /// call, since the provider may report on it before the call returns).
    handed: Option<String>,
    /// The pod last handed to the provider: its UID and fingerprint.
    synced: Option<Stamp>,
    /// The status last written to `pods/status`: the pod's UID and the
    /// status fingerprint.
    written: Option<Stamp>,
    /// The UID whose deletion in the provider is done (the API object
    /// stays until it is force-deleted).
    provider_deleted: Option<String>,
    /// This controller force-deleted the API object: its Delete event needs
    /// no API lookup.
    removed: bool,
    /// The provider's failed creates and updates of this pod (UID) in a
    /// row.
    failures: Option<(Option<String>, u32)>,
}

impl PodState {
    fn is_empty(&self) -> bool {
        self.notified.is_none()
            && self.handed.is_none()
            && self.synced.is_none()
            && self.written.is_none()
            && self.provider_deleted.is_none()
            && !self.removed
            && self.failures.is_none()
    }
}

/// Every pod's [`PodState`], by `namespace/name`.
#[derive(Debug, Default)]
pub(super) struct PodStates {
    by_key: Mutex<HashMap<String, PodState>>,
}

impl PodStates {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, PodState>> {
        self.by_key.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Change `key`'s state (made if absent, removed if left empty).
    fn update<R>(&self, key: &str, change: impl FnOnce(&mut PodState) -> R) -> R {
        let mut states = self.lock();
        let state = states.entry(key.to_owned()).or_default();
        let answer = change(state);
        if state.is_empty() {
            states.remove(key);
        }
        answer
    }

    /// Read `key`'s state.
    fn read<R>(&self, key: &str, look: impl FnOnce(&PodState) -> R) -> Option<R> {
        self.lock().get(key).map(look)
    }

    /// The pod's life ended (gone from the API): drop everything about it.
    pub(super) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    /// How many pods have state (the `stratus_kubelet_pod_states` gauge).
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// A provider report for `key`, replacing an unwritten earlier one;
    /// whether it was kept. A report about an earlier pod of this name than
    /// the one handed to the provider last (its end, reported after the
    /// name was given to a new pod) is not kept: that pod's API object is
    /// gone, and the report must not take the place of one about the new
    /// pod.
    pub(super) fn notify(&self, key: &str, pod: Pod, at: Instant) -> bool {
        self.update(key, |s| {
            let earlier =
                s.handed.is_some() && pod.metadata.uid.is_some() && pod.metadata.uid != s.handed;
            if !earlier {
                s.notified = Some(Box::new((pod, at)));
            }
            !earlier
        })
    }

    /// A provider report for `key` unless a newer one is waiting (a retried
    /// write keeps what came meanwhile).
    pub(super) fn notify_unless_newer(&self, key: &str, pod: Pod, at: Instant) {
        self.update(key, |s| {
            s.notified.get_or_insert_with(|| Box::new((pod, at)));
        });
    }

    /// Take the waiting provider report of `key`.
    pub(super) fn take_notified(&self, key: &str) -> Option<(Pod, Instant)> {
        self.update(key, |s| s.notified.take().map(|n| *n))
    }

    /// Whether this pod (UID) was handed to the provider as `print`.
    pub(super) fn is_synced(&self, key: &str, uid: &Option<String>, print: u64) -> bool {
        self.read(key, |s| stamped(&s.synced, uid, print))
            .unwrap_or(false)
    }

    /// This pod (UID) was handed to the provider as `print`.
    pub(super) fn set_synced(&self, key: &str, uid: Option<String>, print: u64) {
        self.update(key, |s| {
            s.synced = Some((uid, print));
            s.failures = None;
        });
    }

    /// The provider failed to create or update this pod (UID) once more:
    /// how many times in a row now.
    pub(super) fn count_failure(&self, key: &str, uid: &Option<String>) -> u32 {
        self.update(key, |s| {
            let count = match &s.failures {
                Some((seen, n)) if seen == uid => n + 1,
                _ => 1,
            };
            s.failures = Some((uid.clone(), count));
            count
        })
    }

    /// The pod `uid` is being handed to the provider under `key`.
    pub(super) fn set_handed(&self, key: &str, uid: Option<String>) {
        self.update(key, |s| s.handed = uid);
    }

    /// Whether `uid` is the pod last handed to the provider under `key`
    /// (the pod this controller runs there now).
    pub(super) fn is_current(&self, key: &str, uid: &str) -> bool {
        self.read(key, |s| s.handed.as_deref() == Some(uid))
            .unwrap_or(false)
    }

    /// Whether a provider report about `uid` waits to be written.
    pub(super) fn is_notified_for(&self, key: &str, uid: &Option<String>) -> bool {
        self.read(key, |s| {
            s.notified
                .as_ref()
                .is_some_and(|n| n.0.metadata.uid.is_none() || &n.0.metadata.uid == uid)
        })
        .unwrap_or(false)
    }

    /// Whether a status was written for this very pod (UID).
    pub(super) fn status_written_for(&self, key: &str, uid: &Option<String>) -> bool {
        self.read(key, |s| s.written.as_ref().is_some_and(|(u, _)| u == uid))
            .unwrap_or(false)
    }

    /// Whether the status `print` is what was last written for this UID.
    pub(super) fn is_written(&self, key: &str, uid: &Option<String>, print: u64) -> bool {
        self.read(key, |s| stamped(&s.written, uid, print))
            .unwrap_or(false)
    }

    /// The status `print` was written for this UID.
    pub(super) fn set_written(&self, key: &str, uid: Option<String>, print: u64) {
        self.update(key, |s| s.written = Some((uid, print)));
    }

    /// Whether the provider deletion of this UID is done.
    pub(super) fn provider_deleted(&self, key: &str, uid: &str) -> bool {
        self.read(key, |s| s.provider_deleted.as_deref() == Some(uid))
            .unwrap_or(false)
    }

    /// The provider deletion of this UID is done.
    pub(super) fn set_provider_deleted(&self, key: &str, uid: &str) {
        self.update(key, |s| s.provider_deleted = Some(uid.to_owned()));
    }

    /// This controller force-deleted the API object: nothing more to do
    /// for it but to notice it gone.
    pub(super) fn set_removed(&self, key: &str) {
        self.update(key, |s| {
            s.removed = true;
            s.provider_deleted = None;
        });
    }

    /// The deletion of this UID is settled without this controller's
    /// force-delete (the object was already gone or replaced).
    pub(super) fn deletion_settled(&self, key: &str) {
        self.update(key, |s| s.provider_deleted = None);
    }

    /// Whether this controller force-deleted `key` (then the pod is known
    /// gone without asking the API).
    pub(super) fn was_removed(&self, key: &str) -> bool {
        self.read(key, |s| s.removed).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid(u: &str) -> Option<String> {
        Some(u.to_owned())
    }

    #[test]
    fn a_failed_force_delete_then_the_pod_gone_leaves_nothing() {
        let states = PodStates::default();
        states.set_synced("ns/a", uid("1"), 7);
        states.set_written("ns/a", uid("1"), 9);
        // Deleted in the provider; the force-delete then fails (nothing is
        // marked), and the pod leaves the API by another hand.
        states.set_provider_deleted("ns/a", "1");
        assert!(states.provider_deleted("ns/a", "1"));
        states.forget("ns/a");
        assert_eq!(states.len(), 0);
    }

    #[test]
    fn a_pods_state_is_small_when_no_report_waits() {
        // Every Running pod keeps a state for its life; a report waiting
        // inline would make each about 2 KB.
        assert!(
            std::mem::size_of::<PodState>() <= 192,
            "{} bytes",
            std::mem::size_of::<PodState>()
        );
    }

    #[test]
    fn a_recreated_pod_does_not_inherit_its_predecessors_marks() {
        let states = PodStates::default();
        states.set_synced("ns/a", uid("1"), 7);
        states.set_written("ns/a", uid("1"), 9);
        states.set_provider_deleted("ns/a", "1");
        assert!(!states.is_synced("ns/a", &uid("2"), 7));
        assert!(!states.status_written_for("ns/a", &uid("2")));
        assert!(!states.is_written("ns/a", &uid("2"), 9));
        assert!(!states.provider_deleted("ns/a", "2"));
        assert!(states.is_synced("ns/a", &uid("1"), 7));
    }

    #[test]
    fn an_entry_emptied_is_removed() {
        let states = PodStates::default();
        let at = Instant::now();
        states.notify("ns/dangling", Pod::default(), at);
        assert_eq!(states.len(), 1);
        assert!(states.take_notified("ns/dangling").is_some());
        assert_eq!(states.len(), 0);
        // Reading never makes an entry.
        assert!(!states.was_removed("ns/x"));
        assert!(!states.is_synced("ns/x", &None, 0));
        assert_eq!(states.len(), 0);
        // A force-delete clears the provider mark; settling it empties.
        states.set_provider_deleted("ns/b", "1");
        states.deletion_settled("ns/b");
        assert_eq!(states.len(), 0);
        states.set_provider_deleted("ns/b", "1");
        states.set_removed("ns/b");
        assert!(states.was_removed("ns/b"));
        assert!(!states.provider_deleted("ns/b", "1"));
        states.forget("ns/b");
        assert_eq!(states.len(), 0);
    }

    #[test]
    fn a_report_is_about_the_pod_handed_to_the_provider() {
        let states = PodStates::default();
        assert!(!states.is_current("ns/a", "1"));
        states.set_handed("ns/a", uid("2"));
        assert!(states.is_current("ns/a", "2"));
        assert!(!states.is_current("ns/a", "1"));
        let mut report = Pod::default();
        report.metadata.uid = uid("2");
        states.notify("ns/a", report, Instant::now());
        assert!(states.is_notified_for("ns/a", &uid("2")));
        assert!(!states.is_notified_for("ns/a", &uid("1")));
        states.forget("ns/a");
        assert!(!states.is_current("ns/a", "2"));
        assert!(!states.is_notified_for("ns/a", &uid("2")));
    }

    #[test]
    fn an_earlier_pods_last_report_does_not_replace_the_new_pods() {
        let states = PodStates::default();
        let report = |u: &str| {
            let mut pod = Pod::default();
            pod.metadata.uid = uid(u);
            pod
        };
        states.set_handed("ns/a", uid("2"));
        assert!(states.notify("ns/a", report("2"), Instant::now()));
        assert!(!states.notify("ns/a", report("1"), Instant::now()));
        assert!(states.is_notified_for("ns/a", &uid("2")));
        let (kept, _) = states.take_notified("ns/a").unwrap();
        assert_eq!(kept.metadata.uid, uid("2"));
        // Nothing handed (the name is free): any report is kept.
        states.forget("ns/a");
        assert!(states.notify("ns/a", report("1"), Instant::now()));
    }

    #[test]
    fn a_newer_report_wins_over_a_retried_one() {
        let states = PodStates::default();
        let (old, new) = (Instant::now(), Instant::now());
        let mut newer = Pod::default();
        newer.metadata.name = Some("newer".into());
        states.notify("ns/a", newer, new);
        states.notify_unless_newer("ns/a", Pod::default(), old);
        let (kept, _) = states.take_notified("ns/a").unwrap();
        assert_eq!(kept.metadata.name.as_deref(), Some("newer"));
    }
}
