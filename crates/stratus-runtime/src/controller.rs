//! One controller shape (kube-runtime's `Controller`, client-go's informer
//! plus work queue): keys from shared informers into a [`WorkQueue`],
//! workers that hand each key to a `reconcile` function, and what every
//! controller owes its operator around them.
//!
//! A [`Controller`] is built, then run:
//!
//! - [`Controller::new`] takes the queue (its rate limiter and its
//!   `workqueue_*` metrics);
//! - [`Controller::watches`] subscribes to a [`SharedInformer`] when the
//!   controller runs, mapping each changed object to the keys to queue (a
//!   mapper may keep state, to skip changes that do not matter);
//! - [`Controller::run`] waits until every watched cache holds its first
//!   list, then runs [`Controller::workers`] workers until `stop`: a key
//!   is reconciled by one worker at a time; [`Action::Done`] forgets its
//!   retries, [`Action::RequeueAfter`] queues it again after the delay, an
//!   error is logged and retried after the delay it asks for
//!   ([`Retry::retry_after`]) or with the queue's backoff. Each reconcile
//!   is counted in `stratus_reconcile_*` when
//!   [`Controller::reconcile_metrics`] is set;
//! - [`Controller::run_batched`] hands the workers batches of keys instead
//!   (for a cloud that answers for many objects in one call).
//!
//! A periodic pass is a controller with one key that asks to be requeued
//! a period later; [`Controller::passes_every`] makes its health expect
//! the passes. Keys added to [`Controller::queue`] before `run` wait for
//! the caches.
//!
//! ```
//! use std::time::Duration;
//! use stratus_runtime::controller::Controller;
//! use stratus_runtime::workqueue::{Action, WorkQueue, default_controller_rate_limiter};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let (stop_tx, stop) = tokio::sync::watch::channel(false);
//! let controller = Controller::new(WorkQueue::new(default_controller_rate_limiter()));
//! let queue = controller.queue().clone();
//! queue.add("default/web".to_string());
//! let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
//! let running = tokio::spawn(controller.run(
//!     move |key: String| {
//!         let seen_tx = seen_tx.clone();
//!         async move {
//!             seen_tx.send(key).unwrap();
//!             Ok::<_, std::convert::Infallible>(Action::Done)
//!         }
//!     },
//!     stop,
//! ));
//! assert_eq!(seen.recv().await.unwrap(), "default/web");
//! stop_tx.send(true).unwrap();
//! running.await.unwrap();
//! # });
//! ```

use std::collections::HashSet;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::health::ControllerHealth;
use crate::informer::{Informer, InformerStopped, SharedInformer};
use crate::metrics::ControllerReconcileMetrics;
use crate::workqueue::{Action, Retry, WorkQueue, requeue};

/// A subscription made when the controller runs.
type Subscribe<K> = Box<dyn FnOnce(&WorkQueue<K>, &ControllerHealth) -> Box<dyn Watched> + Send>;

/// A running subscription: kept alive while the controller runs, and
/// waited on until its cache holds the first list.
trait Watched: Send + Sync {
    fn ready(&self) -> Pin<Box<dyn Future<Output = Result<(), InformerStopped>> + Send + '_>>;
}

impl<T> Watched for Informer<T>
where
    T: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    fn ready(&self) -> Pin<Box<dyn Future<Output = Result<(), InformerStopped>> + Send + '_>> {
        Box::pin(self.wait_until_ready())
    }
}

/// A controller: informers feeding a queue, and workers reconciling its
/// keys. See the [module docs](self).
pub struct Controller<K> {
    queue: WorkQueue<K>,
    health: ControllerHealth,
    workers: usize,
    subscriptions: Vec<Subscribe<K>>,
    reconciles: Option<ControllerReconcileMetrics>,
    /// The period of its passes, if each reconcile is one.
    passes: Option<Duration>,
}

impl<K> Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("workers", &self.workers)
            .field("watches", &self.subscriptions.len())
            .finish_non_exhaustive()
    }
}

impl<K> Controller<K>
where
    K: Clone + Eq + Hash + Display + Send + Sync + 'static,
{
    /// A controller over `queue`, with one worker, a health nobody reads
    /// and no reconcile metrics.
    pub fn new(queue: WorkQueue<K>) -> Self {
        Self {
            queue,
            health: ControllerHealth::new(),
            workers: 1,
            subscriptions: Vec::new(),
            reconciles: None,
            passes: None,
        }
    }

    /// The queue (cheap to clone): for keys from elsewhere than the
    /// watched informers (a provider's callback, another controller).
    pub fn queue(&self) -> &WorkQueue<K> {
        &self.queue
    }

    /// Keys reconciled at once (at least one).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Report to `health`: the watches' failures, whether the controller
    /// runs, and its passes (with [`Controller::passes_every`]).
    pub fn health(mut self, health: ControllerHealth) -> Self {
        self.health = health;
        self
    }

    /// Count and time each reconcile (`stratus_reconcile_*`).
    pub fn reconcile_metrics(mut self, metrics: ControllerReconcileMetrics) -> Self {
        self.reconciles = Some(metrics);
        self
    }

    /// Each reconcile is a pass expected every `period`: the health turns
    /// unhealthy after three periods without one.
    pub fn passes_every(mut self, period: Duration) -> Self {
        self.passes = Some(period);
        self
    }

    /// Watch `informer` (shared with other controllers) when the
    /// controller runs: each object added, modified or deleted, and each
    /// cached object at the start, is mapped to the keys to queue.
    pub fn watches<T, I>(
        self,
        informer: &SharedInformer<T>,
        map: impl FnMut(&T) -> I + Send + 'static,
    ) -> Self
    where
        T: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
        I: IntoIterator<Item = K>,
    {
        self.watches_resynced(informer, Duration::ZERO, map)
    }

    /// The same, with every cached object mapped again each `period`
    /// (client-go's resync; zero: never).
    pub fn watches_resynced<T, I>(
        self,
        informer: &SharedInformer<T>,
        period: Duration,
        map: impl FnMut(&T) -> I + Send + 'static,
    ) -> Self
    where
        T: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
        I: IntoIterator<Item = K>,
    {
        self.subscribe(informer, period, map, || {})
    }

    /// The same as [`Controller::watches`], with `on_listed` called after
    /// each complete (re)list, once its objects are queued: the moment to
    /// look for objects deleted while the watch was away.
    pub fn watches_listed<T, I>(
        self,
        informer: &SharedInformer<T>,
        map: impl FnMut(&T) -> I + Send + 'static,
        on_listed: impl FnMut() + Send + 'static,
    ) -> Self
    where
        T: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
        I: IntoIterator<Item = K>,
    {
        self.subscribe(informer, Duration::ZERO, map, on_listed)
    }

    /// Subscribe to `informer` when the controller runs.
    fn subscribe<T, I>(
        mut self,
        informer: &SharedInformer<T>,
        resync: Duration,
        mut map: impl FnMut(&T) -> I + Send + 'static,
        on_listed: impl FnMut() + Send + 'static,
    ) -> Self
    where
        T: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
        I: IntoIterator<Item = K>,
    {
        let informer = informer.clone();
        self.subscriptions.push(Box::new(move |queue, health| {
            let queue = queue.clone();
            let on_change = move |object: &T| {
                for key in map(object) {
                    queue.add(key);
                }
            };
            let subscription = informer
                .subscribe_with(health, on_change, on_listed)
                .resync_every(resync);
            Box::new(subscription)
        }));
        self
    }

    /// Run until `stop` becomes true (or its sender is dropped): each key
    /// is handed to `reconcile` by one of the workers. On stop, no new key
    /// is taken and the keys in flight finish.
    pub async fn run<E, F, Fut>(self, reconcile: F, stop: watch::Receiver<bool>)
    where
        E: Retry + Display + Send,
        F: Fn(K) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        self.run_workers(stop, move |worker| {
            let reconcile = reconcile.clone();
            async move {
                while let Some(key) = worker.queue.get().await {
                    let started = Instant::now();
                    let result = reconcile(key.clone()).await;
                    worker.finish(&key, result, started.elapsed());
                    worker.queue.done(&key);
                }
            }
        })
        .await;
    }

    /// Run as [`Controller::run`], handing `reconcile` up to `max` keys at
    /// once: a worker takes a key, then whatever arrives within `window`.
    /// `reconcile` answers for the keys it handled; a key it leaves out is
    /// done and forgotten without being counted.
    pub async fn run_batched<E, F, Fut>(
        self,
        window: Duration,
        max: usize,
        reconcile: F,
        stop: watch::Receiver<bool>,
    ) where
        E: Retry + Display + Send,
        F: Fn(Vec<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<(K, Result<Action, E>)>> + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        let max = max.max(1);
        self.run_workers(stop, move |worker| {
            let reconcile = reconcile.clone();
            async move {
                while let Some(batch) = worker.batch(window, max).await {
                    let started = Instant::now();
                    let results = reconcile(batch.clone()).await;
                    let took = started.elapsed();
                    let mut answered = HashSet::with_capacity(results.len());
                    for (key, result) in results {
                        worker.finish(&key, result, took);
                        answered.insert(key);
                    }
                    for key in &batch {
                        if !answered.contains(key) {
                            worker.queue.forget(key);
                        }
                        worker.queue.done(key);
                    }
                }
            }
        })
        .await;
    }

    /// Subscribe and wait for every cache, then run `workers` copies of
    /// `work` until `stop`; drain the queue and the workers, and report
    /// the controller stopped.
    async fn run_workers<W, Fut>(self, mut stop: watch::Receiver<bool>, work: W)
    where
        W: Fn(Worker<K>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Self {
            queue,
            health,
            workers,
            subscriptions,
            reconciles,
            passes,
        } = self;
        let health = match passes {
            Some(period) => health.expect_pass_every(period),
            None => health,
        };
        let watched: Vec<Box<dyn Watched>> = subscriptions
            .into_iter()
            .map(|subscribe| subscribe(&queue, &health))
            .collect();
        let ready = futures_util::future::join_all(watched.iter().map(|w| w.ready()));
        let listed = tokio::select! {
            listed = ready => match listed.into_iter().find_map(Result::err) {
                None => true,
                Some(stopped) => {
                    tracing::warn!(error = %stopped, "a watched informer stopped; the controller does not start");
                    false
                }
            },
            _ = crate::stopped(&mut stop) => false,
        };
        if listed {
            let tasks: Vec<_> = (0..workers)
                .map(|_| {
                    tokio::spawn(work(Worker {
                        queue: queue.clone(),
                        health: health.clone(),
                        reconciles: reconciles.clone(),
                        passes: passes.is_some(),
                    }))
                })
                .collect();
            crate::stopped(&mut stop).await;
            queue.shut_down_with_drain().await;
            for task in tasks {
                let _ = task.await;
            }
        }
        drop(watched);
        health.stopped();
    }
}

/// What one worker holds.
struct Worker<K> {
    queue: WorkQueue<K>,
    health: ControllerHealth,
    reconciles: Option<ControllerReconcileMetrics>,
    passes: bool,
}

impl<K> Worker<K>
where
    K: Clone + Eq + Hash + Display + Send + Sync + 'static,
{
    /// A key, then those that arrive within `window`, up to `max`; `None`
    /// once the queue is shut down.
    async fn batch(&self, window: Duration, max: usize) -> Option<Vec<K>> {
        let first = self.queue.get().await?;
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + window;
        while batch.len() < max {
            match tokio::time::timeout_at(deadline, self.queue.get()).await {
                Ok(Some(key)) => batch.push(key),
                _ => break,
            }
        }
        Some(batch)
    }

    /// Count one reconcile's outcome and queue its key as it asks (the
    /// caller marks the key done).
    fn finish<E: Retry + Display>(&self, key: &K, result: Result<Action, E>, took: Duration) {
        if let Some(metrics) = &self.reconciles {
            metrics.observe(&result, took);
        }
        if self.passes {
            self.health.pass_completed();
        }
        requeue(&self.queue, key, result);
    }
}
