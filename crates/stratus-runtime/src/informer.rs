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
//!
//! Several controllers reading one kind share one watch and one cache
//! through a [`SharedInformer`] (client-go's shared informer): each
//! [`SharedInformer::subscribe`] is an [`Informer`] with its own callback,
//! resync and health, over the common store. The watch starts with the
//! first subscriber and stops when the last handle is dropped.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Node;
//! use kube::api::Api;
//! use stratus_runtime::health::ControllerHealth;
//! use stratus_runtime::informer::SharedInformer;
//!
//! # async fn run(client: kube::Client) {
//! let nodes = SharedInformer::new(Api::<Node>::all(client));
//! let (a, b) = (ControllerHealth::new(), ControllerHealth::new());
//! let first = nodes.subscribe(&a, |n: &Node| println!("a: {:?}", n.metadata.name));
//! let second = nodes.subscribe(&b, |n: &Node| println!("b: {:?}", n.metadata.name));
//! // One list, one watch, one cache.
//! assert_eq!(first.store().state().len(), second.store().state().len());
//! # }
//! ```

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use crate::health::ControllerHealth;
use futures_util::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube_runtime::reflector::{self, Store};
use kube_runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch as signal;
use tokio::task::JoinHandle;

/// The change callback, shared by the watch and the resync.
type OnChange<K> = Arc<Mutex<dyn FnMut(&K) + Send>>;

/// The callback after each complete (re)list.
type OnListed = Arc<Mutex<dyn FnMut() + Send>>;

/// A reflector store, the callback its changes go to, and the
/// subscription to the [`SharedInformer`] whose watch feeds it (one of its
/// own for [`Informer::start`]), ended when it is dropped. A resync, if
/// any, stops with it.
pub struct Informer<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    on_change: OnChange<K>,
    /// The shared watch and this subscriber's id.
    shared: Arc<Shared<K>>,
    id: u64,
    resync: Option<JoinHandle<()>>,
}

/// The watch feeding an [`Informer`] ended before its first list
/// completed (the informer is being dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the informer's watch stopped before its first list completed")]
pub struct InformerStopped;

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
    /// reports. The watch is a [`SharedInformer`] with this one
    /// subscriber.
    pub fn start_with(
        api: Api<K>,
        config: watcher::Config,
        health: &ControllerHealth,
        on_change: impl FnMut(&K) + Send + 'static,
        on_listed: impl FnMut() + Send + 'static,
    ) -> Self {
        SharedInformer::with_config(api, config).subscribe_with(health, on_change, on_listed)
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

    /// Wait until the first list is in the store. Use this rather than
    /// the store's own `wait_until_ready`: kube-runtime 5 wakes only the
    /// last of several tasks waiting on one store, and a shared informer's
    /// store has several.
    pub async fn wait_until_ready(&self) -> Result<(), InformerStopped> {
        let mut ready = self.shared.ready.clone();
        ready
            .wait_for(|listed| *listed)
            .await
            .map(drop)
            .map_err(|_| InformerStopped)
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

/// Run the after-list callback, as [`call`].
fn call_listed(callback: &OnListed) {
    let mut on_listed = callback.lock().unwrap_or_else(PoisonError::into_inner);
    (*on_listed)();
}

impl<K: Resource + 'static> Drop for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        self.shared.lock().subscribers.retain(|s| s.id != self.id);
        if let Some(resync) = &self.resync {
            resync.abort();
        }
    }
}

/// One subscriber of a [`SharedInformer`].
struct Subscriber<K> {
    id: u64,
    on_change: OnChange<K>,
    on_listed: OnListed,
    health: ControllerHealth,
}

/// The subscribers and what the watch last did (whether a list has
/// completed is the `ready` signal, written under this lock).
struct Subscribers<K> {
    next_id: u64,
    subscribers: Vec<Subscriber<K>>,
    /// A (re)list is under way (between `Init` and `InitDone`): what the
    /// store held when it began, to find what the list no longer has.
    listing: Option<Vec<Arc<K>>>,
    /// The watch's last failure, until it recovers: told to newcomers.
    failing: Option<String>,
}

/// Spawns a shared informer's watch task.
type Starter = Box<dyn FnOnce() -> JoinHandle<()> + Send>;

/// A shared informer's watch: the starter until the first subscriber
/// takes it, then the running task.
struct Watch {
    start: Option<Starter>,
    running: Option<JoinHandle<()>>,
}

/// What a [`SharedInformer`]'s handles and subscriptions share.
struct Shared<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    /// True once the first list is in the store.
    ready: signal::Receiver<bool>,
    watch: Mutex<Watch>,
    subscribers: Arc<Mutex<Subscribers<K>>>,
}

impl<K: Resource + 'static> Shared<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers<K>> {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Resource + 'static> Drop for Shared<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        let watch = self.watch.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(feeder) = &watch.running {
            feeder.abort();
        }
    }
}

/// One watch and one cache of a kind, shared by every controller that
/// subscribes (client-go's shared informer). Cheap to clone; the watch
/// starts with the first [`subscribe`](Self::subscribe) and stops when
/// the last handle and subscription are dropped.
pub struct SharedInformer<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    shared: Arc<Shared<K>>,
}

impl<K: Resource + 'static> Clone for SharedInformer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> SharedInformer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// A shared informer of every object of `api`; nothing is watched
    /// until the first subscriber.
    pub fn new(api: Api<K>) -> Self {
        Self::with_config(api, watcher::Config::default())
    }

    /// The same with a watch configuration (label or field selectors).
    pub fn with_config(api: Api<K>, config: watcher::Config) -> Self {
        let (store, writer) = reflector::store::<K>();
        let subscribers = Arc::new(Mutex::new(Subscribers {
            next_id: 0,
            subscribers: Vec::new(),
            listing: None,
            failing: None,
        }));
        let weak = Arc::downgrade(&subscribers);
        let cache = store.clone();
        let (listed, ready) = signal::channel(false);
        let starter: Starter = Box::new(move || {
            // managedFields are about half of an object's metadata and no
            // controller here reads them: they are not cached.
            let stream = watcher(api, config).modify(|o| o.meta_mut().managed_fields = None);
            let events = reflector::reflector(writer, stream).default_backoff();
            tokio::spawn(async move {
                futures_util::pin_mut!(events);
                while let Some(event) = events.next().await {
                    if !fan_out(&weak, &cache, &listed, event) {
                        break;
                    }
                }
            })
        });
        Self {
            shared: Arc::new(Shared {
                store,
                ready,
                watch: Mutex::new(Watch {
                    start: Some(starter),
                    running: None,
                }),
                subscribers,
            }),
        }
    }

    /// The common cache (cheap to clone); filled once the first
    /// subscriber has started the watch.
    pub fn store(&self) -> &Store<K> {
        &self.shared.store
    }

    /// Subscribe: `on_change` is called with each object added, modified
    /// or deleted from now on, and, as client-go does for a late handler,
    /// with every object already cached (one that joins during a list is
    /// handed the whole store when the list completes); the watch's failures and
    /// recoveries go to `health`. The subscription ends when the returned
    /// [`Informer`] is dropped; give it a resync with
    /// [`Informer::resync_every`].
    pub fn subscribe(
        &self,
        health: &ControllerHealth,
        on_change: impl FnMut(&K) + Send + 'static,
    ) -> Informer<K> {
        self.subscribe_with(health, on_change, || {})
    }

    /// The same, with `on_listed` called after each complete (re)list has
    /// been handed over (and at once after the cached objects, for a
    /// subscriber that joins after a list).
    pub fn subscribe_with(
        &self,
        health: &ControllerHealth,
        on_change: impl FnMut(&K) + Send + 'static,
        on_listed: impl FnMut() + Send + 'static,
    ) -> Informer<K> {
        let on_change: OnChange<K> = Arc::new(Mutex::new(on_change));
        let on_listed: OnListed = Arc::new(Mutex::new(on_listed));
        let (id, listed) = {
            let mut subscribers = self.shared.lock();
            let id = subscribers.next_id;
            subscribers.next_id += 1;
            // Written under this lock by the watch: a subscriber that
            // joins during a list is handed the store when it completes.
            let listed = *self.shared.ready.borrow();
            if let Some(error) = &subscribers.failing {
                health.watch_failed(error);
            }
            subscribers.subscribers.push(Subscriber {
                id,
                on_change: on_change.clone(),
                on_listed: on_listed.clone(),
                health: health.clone(),
            });
            (id, listed)
        };
        self.start_watch();
        if listed {
            for object in self.shared.store.state() {
                call(&on_change, &object);
            }
            call_listed(&on_listed);
        }
        Informer {
            store: self.shared.store.clone(),
            on_change,
            shared: self.shared.clone(),
            id,
            resync: None,
        }
    }

    /// Start the watch unless it runs.
    fn start_watch(&self) {
        let mut watch = self
            .shared
            .watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(start) = watch.start.take() {
            watch.running = Some(start());
        }
    }
}

/// Hand one watch event to every subscriber; `false` once nobody holds the
/// shared informer any more.
///
/// A (re)list's objects are not handed over one by one: kube-runtime's
/// reflector swaps the listed objects into the store only at `InitDone`, so
/// a callback that read the store in between would see the old object.
/// At `InitDone`, with the store holding the list, every subscriber is
/// handed every cached object, and every object the store held before the
/// list but no longer has (deleted while the watch was away; no event says
/// so), then told that a list completed.
fn fan_out<K>(
    subscribers: &Weak<Mutex<Subscribers<K>>>,
    store: &Store<K>,
    listed: &signal::Sender<bool>,
    event: Result<watcher::Event<K>, watcher::Error>,
) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let Some(subscribers) = subscribers.upgrade() else {
        return false;
    };
    // The callbacks run outside the lock, so one may subscribe or drop.
    let (callbacks, after_list, before_list) = {
        let mut s = subscribers.lock().unwrap_or_else(PoisonError::into_inner);
        match &event {
            Ok(_) => {
                s.failing = None;
                for sub in &s.subscribers {
                    sub.health.watch_ok();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watch failed; retrying with backoff");
                let error = e.to_string();
                for sub in &s.subscribers {
                    sub.health.watch_failed(&error);
                }
                s.failing = Some(error);
            }
        }
        let mut after_list = Vec::new();
        let mut before_list = None;
        match &event {
            Ok(watcher::Event::Init) => s.listing = Some(store.state()),
            Ok(watcher::Event::InitDone) => {
                listed.send_replace(true);
                before_list = Some(s.listing.take().unwrap_or_default());
                after_list = s
                    .subscribers
                    .iter()
                    .map(|sub| sub.on_listed.clone())
                    .collect();
            }
            _ => {}
        }
        let callbacks: Vec<OnChange<K>> = s
            .subscribers
            .iter()
            .map(|sub| sub.on_change.clone())
            .collect();
        (callbacks, after_list, before_list)
    };
    match event {
        Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
            for callback in &callbacks {
                call(callback, &o);
            }
        }
        Ok(watcher::Event::InitDone) => {
            let cached = store.state();
            let key = |o: &K| (o.meta().namespace.clone(), o.meta().name.clone());
            let now: std::collections::HashSet<_> = cached.iter().map(|o| key(o)).collect();
            let gone = before_list
                .unwrap_or_default()
                .into_iter()
                .filter(|o| !now.contains(&key(o)));
            let handed: Vec<Arc<K>> = cached.into_iter().chain(gone).collect();
            for callback in &callbacks {
                for object in &handed {
                    call(callback, object);
                }
            }
            for callback in &after_list {
                call_listed(callback);
            }
        }
        Ok(_) | Err(_) => {}
    }
    true
}
