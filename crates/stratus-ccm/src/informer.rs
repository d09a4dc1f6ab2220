//! A watched, cached view of one resource kind (client-go's informer).
//!
//! Every controller keeps its objects in a `kube_runtime` reflector store fed
//! by a watch with the default backoff; [`Informer::start`] is that plumbing
//! in one place, with a callback per changed object for the controller's own
//! trigger (a queue key, a notification, a generation counter). A watch
//! that keeps failing (no RBAC, an API server away) is logged and reported
//! to the controller's health check.

use std::fmt::Debug;
use std::hash::Hash;

use futures_util::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube_runtime::reflector::{self, Store};
use kube_runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use stratus_runtime::health::ControllerHealth;
use tokio::task::JoinHandle;

/// A reflector store and the task that feeds it; the task stops when the
/// informer is dropped.
pub(crate) struct Informer<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    feeder: JoinHandle<()>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// Watch every object of `api`, keep them in the store, and call
    /// `on_change` with each object that was added, modified or deleted.
    /// The watch's failures and recoveries are reported to `health`.
    pub(crate) fn start(
        api: Api<K>,
        health: &ControllerHealth,
        mut on_change: impl FnMut(&K) + Send + 'static,
    ) -> Self {
        let (store, writer) = reflector::store::<K>();
        let events = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        let health = health.clone();
        let feeder = tokio::spawn(async move {
            futures_util::pin_mut!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        health.watch_ok();
                        match event {
                            watcher::Event::Apply(o)
                            | watcher::Event::InitApply(o)
                            | watcher::Event::Delete(o) => on_change(&o),
                            watcher::Event::Init | watcher::Event::InitDone => {}
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "watch failed; retrying with backoff");
                        health.watch_failed(&e.to_string());
                    }
                }
            }
        });
        Self { store, feeder }
    }

    /// The cache (cheap to clone).
    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }
}

impl<K: Resource + 'static> Drop for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        self.feeder.abort();
    }
}
