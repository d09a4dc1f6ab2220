//! A watched, cached view of one resource kind (client-go's informer).
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::api::Api;
//! use stratus_runtime::health::ControllerHealth;
//! use stratus_runtime::informer::Informer;
//!
//! # async fn run(client: kube::Client) {
//! let health = ControllerHealth::new();
//! // The pods bound to one node, as a kubelet watches them.
//! let config = kube_runtime::watcher::Config::default().fields("spec.nodeName=vk-0");
//! let pods = Informer::start_with(Api::<Pod>::all(client), config, &health, |pod: &Pod| {
//!     println!("changed: {:?}", pod.metadata.name);
//! }, || println!("listed"));
//! let cached = pods.store().state().len();
//! # }
//! ```
//!
//! Every controller keeps its objects in a `kube_runtime` reflector store fed
//! by a watch with the default backoff; [`Informer::start`] is that plumbing
//! in one place, with a callback per changed object for the controller's own
//! trigger (a queue key, a notification, a generation counter). A watch
//! that keeps failing (no RBAC, an API server away) is logged and reported
//! to the controller's health check. [`Informer::resync_every`] hands every
//! cached object to the callback again at a period, as client-go's resync.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::health::ControllerHealth;
use futures_util::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube_runtime::reflector::{self, Store};
use kube_runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

/// The change callback, shared by the watch and the resync.
type OnChange<K> = Arc<Mutex<dyn FnMut(&K) + Send>>;

/// A reflector store and the task that feeds it; the task (and the resync,
/// if any) stops when the informer is dropped.
pub struct Informer<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    on_change: OnChange<K>,
    feeder: JoinHandle<()>,
    resync: Option<JoinHandle<()>>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// Watch every object of `api`, keep them in the store (without their
    /// `managedFields`), and call
    /// `on_change` with each object that was added, modified or deleted.
    /// The watch's failures and recoveries are reported to `health`.
    pub fn start(
        api: Api<K>,
        health: &ControllerHealth,
        on_change: impl FnMut(&K) + Send + 'static,
    ) -> Self {
        Self::start_with(api, watcher::Config::default(), health, on_change, || {})
    }

    /// The same with a watch configuration (label or field selectors), and
    /// `on_listed` called after each complete (re)list: the moment to look
    /// for objects deleted while the watch was away, which no delete event
    /// reports.
    pub fn start_with(
        api: Api<K>,
        config: watcher::Config,
        health: &ControllerHealth,
        on_change: impl FnMut(&K) + Send + 'static,
        mut on_listed: impl FnMut() + Send + 'static,
    ) -> Self {
        let on_change: OnChange<K> = Arc::new(Mutex::new(on_change));
        let callback = on_change.clone();
        let (store, writer) = reflector::store::<K>();
        // managedFields are about half of an object's metadata and no
        // controller here reads them: they are not cached.
        let stream = watcher(api, config).modify(|o| o.meta_mut().managed_fields = None);
        let events = reflector::reflector(writer, stream).default_backoff();
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
                            | watcher::Event::Delete(o) => call(&callback, &o),
                            watcher::Event::InitDone => on_listed(),
                            watcher::Event::Init => {}
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "watch failed; retrying with backoff");
                        health.watch_failed(&e.to_string());
                    }
                }
            }
        });
        Self {
            store,
            on_change,
            feeder,
            resync: None,
        }
    }

    /// Hand every cached object to the change callback again each `period`
    /// (the first time one period after this call), as client-go's informer
    /// resync: a controller re-examines objects no event has touched. A
    /// zero period means no resync. Calling it again replaces the period.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::Service;
    /// use kube::api::Api;
    /// use stratus_runtime::health::ControllerHealth;
    /// use stratus_runtime::informer::Informer;
    ///
    /// # async fn run(client: kube::Client) {
    /// let services = Informer::start(Api::<Service>::all(client), &ControllerHealth::new(), |svc: &Service| {
    ///     println!("look at {:?}", svc.metadata.name);
    /// })
    /// .resync_every(Duration::from_secs(12 * 3600));
    /// # }
    /// ```
    pub fn resync_every(mut self, period: Duration) -> Self {
        if let Some(old) = self.resync.take() {
            old.abort();
        }
        if period.is_zero() {
            return self;
        }
        let (store, callback) = (self.store.clone(), self.on_change.clone());
        self.resync = Some(tokio::spawn(async move {
            let start = tokio::time::Instant::now() + period;
            let mut ticks = tokio::time::interval_at(start, period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                for object in store.state() {
                    call(&callback, &object);
                }
            }
        }));
        self
    }

    /// The cache (cheap to clone).
    pub fn store(&self) -> &Store<K> {
        &self.store
    }
}

/// Run the change callback. A lock poisoned by a callback that panicked in
/// the other task (watch or resync) does not stop this one.
fn call<K>(callback: &OnChange<K>, object: &K) {
    let mut on_change = callback.lock().unwrap_or_else(PoisonError::into_inner);
    (*on_change)(object);
}

impl<K: Resource + 'static> Drop for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        self.feeder.abort();
        if let Some(resync) = &self.resync {
            resync.abort();
        }
    }
}
