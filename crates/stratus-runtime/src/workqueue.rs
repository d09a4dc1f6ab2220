//! A work queue with client-go's semantics, and its rate limiters.
//!
//! - A key is queued at most once (per-key dedup); a key being processed is
//!   never handed to a second worker, and a re-add while it is processed
//!   queues it again once the worker is done.
//! - `add_after` delays a key; the earliest of several delays wins.
//! - `add_rate_limited` delays a key by the rate limiter: per-item
//!   exponential backoff (5 ms doubling to 1000 s, as client-go) combined with
//!   an overall token bucket. The bucket applies to retries only; first-time
//!   adds go straight in (the virtual-kubelet bug of throttling new pods at
//!   10/s after a burst of 100 cannot happen).
//! - [`run_workers`] runs a bounded number of workers; a failed key is
//!   logged (a warning) and an error whose [`Retry::retry_after`] is set is
//!   requeued after exactly that delay (Go's `RetryError`), any other error
//!   with backoff.
//! - `shut_down_with_drain` stops new work and waits for in-flight work.
//!
//! ```
//! use std::time::Duration;
//! use stratus_runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let queue = WorkQueue::new(default_controller_rate_limiter());
//! queue.add("default/web".to_string());
//! queue.add("default/web".to_string()); // deduplicated
//! assert_eq!(queue.len(), 1);
//! let key = queue.get().await.unwrap();
//! queue.add_rate_limited(key.clone()); // retried in 5 ms
//! queue.done(&key);
//! assert_eq!(queue.num_requeues(&key), 1);
//! # });
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::metrics::QueueMetrics;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Decides how long a key waits before its next retry.
pub trait RateLimiter<K>: Send + Sync {
    /// The delay for the next retry of `key` (and record the retry).
    fn when(&self, key: &K) -> Duration;
    /// Forget `key`'s failures.
    fn forget(&self, key: &K);
    /// How many times `key` was retried since it was last forgotten.
    fn retries(&self, key: &K) -> u32;
}

/// Per-item exponential backoff: `base * 2^failures`, capped at `max`.
#[derive(Debug)]
pub struct ItemExponentialBackoff<K> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Eq + Hash> ItemExponentialBackoff<K> {
    /// Backoff from `base` doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, u32>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<K: Eq + Hash + Clone + Send> RateLimiter<K> for ItemExponentialBackoff<K> {
    fn when(&self, key: &K) -> Duration {
        let mut failures = self.lock();
        let n = failures.entry(key.clone()).or_insert(0);
        let exp = *n;
        *n = n.saturating_add(1);
        let factor = 2f64.powi(exp.min(62) as i32);
        let delay = self.base.as_secs_f64() * factor;
        if delay >= self.max.as_secs_f64() {
            self.max
        } else {
            Duration::from_secs_f64(delay)
        }
    }

    fn forget(&self, key: &K) {
        self.lock().remove(key);
    }

    fn retries(&self, key: &K) -> u32 {
        self.lock().get(key).copied().unwrap_or(0)
    }
}

/// An overall token bucket: `qps` tokens a second, at most `burst`.
#[derive(Debug)]
pub struct BucketRateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl BucketRateLimiter {
    /// A bucket of `burst` tokens refilled at `qps`.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps: qps.max(f64::MIN_POSITIVE),
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }
}

impl<K> RateLimiter<K> for BucketRateLimiter {
    fn when(&self, _key: &K) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let (tokens, last) = *state;
        let tokens =
            (tokens + now.duration_since(last).as_secs_f64() * self.qps).min(self.burst) - 1.0;
        *state = (tokens, now);
        if tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / self.qps)
        }
    }

    fn forget(&self, _key: &K) {}

    fn retries(&self, _key: &K) -> u32 {
        0
    }
}

/// The largest delay of several limiters.
pub struct MaxOf<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> std::fmt::Debug for MaxOf<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOf")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<K> MaxOf<K> {
    /// Combine `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        Self { limiters }
    }
}

impl<K> RateLimiter<K> for MaxOf<K> {
    fn when(&self, key: &K) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(key))
            .max()
            .unwrap_or_default()
    }

    fn forget(&self, key: &K) {
        for l in &self.limiters {
            l.forget(key);
        }
    }

    fn retries(&self, key: &K) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.retries(key))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`: the larger of per-item
/// exponential backoff (5 ms → 1000 s) and a 10 qps / burst 100 bucket.
pub fn default_controller_rate_limiter<K: Eq + Hash + Clone + Send + Sync + 'static>() -> MaxOf<K> {
    MaxOf::new(vec![
        Box::new(ItemExponentialBackoff::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    waiting: HashMap<K, Instant>,
    /// When each dirty key entered the queue (for `queue_duration`).
    queued_at: HashMap<K, Instant>,
    /// When each key in processing was handed out (for `work_duration`).
    started_at: HashMap<K, Instant>,
    shutting_down: bool,
}

struct Shared<K> {
    state: Mutex<State<K>>,
    ready: Notify,
    idle: Notify,
    limiter: Box<dyn RateLimiter<K>>,
    metrics: Option<QueueMetrics>,
}

/// The queue. Cheap to clone; clones share the queue.
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// A queue whose retries are delayed by `limiter`.
    pub fn new(limiter: impl RateLimiter<K> + 'static) -> Self {
        Self::build(limiter, None)
    }

    /// A queue that also feeds the `workqueue_*` metrics of `metrics`
    /// (depth, adds, queue and work durations, retries, and, every 500 ms
    /// like client-go, the unfinished and longest-running work).
    ///
    /// ```
    /// use stratus_runtime::metrics::{WorkQueueMetrics, encode_text};
    /// use stratus_runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let mut registry = prometheus_client::registry::Registry::default();
    /// let metrics = WorkQueueMetrics::register(&mut registry);
    /// let queue = WorkQueue::with_metrics(default_controller_rate_limiter(), metrics.queue("service"));
    /// queue.add("default/web".to_string());
    /// assert!(encode_text(&registry).unwrap().contains("workqueue_depth{name=\"service\"} 1"));
    /// # });
    /// ```
    pub fn with_metrics(limiter: impl RateLimiter<K> + 'static, metrics: QueueMetrics) -> Self {
        let queue = Self::build(limiter, Some(metrics));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(report_in_progress(Arc::downgrade(&queue.shared)));
        }
        queue
    }

    fn build(limiter: impl RateLimiter<K> + 'static, metrics: Option<QueueMetrics>) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    waiting: HashMap::new(),
                    queued_at: HashMap::new(),
                    started_at: HashMap::new(),
                    shutting_down: false,
                }),
                ready: Notify::new(),
                idle: Notify::new(),
                limiter: Box::new(limiter),
                metrics,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `key` now (no-op if it is already queued; re-queued after the
    /// current processing if it is being processed).
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        if s.shutting_down || !s.dirty.insert(key.clone()) {
            return;
        }
        if let Some(m) = &self.shared.metrics {
            m.added();
            s.queued_at.insert(key.clone(), Instant::now());
        }
        if s.processing.contains(&key) {
            return;
        }
        s.queue.push_back(key);
        drop(s);
        self.shared.ready.notify_one();
    }

    /// Queue `key` after `delay` (the earliest pending delay wins).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let at = Instant::now() + delay;
        {
            let mut s = self.lock();
            if s.shutting_down {
                return;
            }
            match s.waiting.get(&key) {
                Some(existing) if *existing <= at => return,
                _ => {
                    s.waiting.insert(key.clone(), at);
                }
            }
        }
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let due = {
                let mut s = queue.lock();
                if s.waiting.get(&key) == Some(&at) {
                    s.waiting.remove(&key);
                    true
                } else {
                    false
                }
            };
            if due {
                queue.add(key);
            }
        });
    }

    /// Queue `key` after the rate limiter's delay (a retry).
    pub fn add_rate_limited(&self, key: K) {
        let delay = self.shared.limiter.when(&key);
        if let Some(m) = &self.shared.metrics {
            m.retried();
        }
        self.add_after(key, delay);
    }

    /// Forget `key`'s retry history (after a success).
    pub fn forget(&self, key: &K) {
        self.shared.limiter.forget(key);
    }

    /// How many times `key` was retried since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.shared.limiter.retries(key)
    }

    /// Keys queued now (not counting delayed or in-flight ones).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// True if nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys being processed.
    pub fn in_flight(&self) -> usize {
        self.lock().processing.len()
    }

    /// The next key to process, or `None` once the queue is shut down and
    /// empty. Call [`WorkQueue::done`] when finished with it.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.shared.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                if let Some(key) = s.queue.pop_front() {
                    s.dirty.remove(&key);
                    s.processing.insert(key.clone());
                    if let Some(m) = &self.shared.metrics {
                        let now = Instant::now();
                        let waited = s.queued_at.remove(&key).map(|t| now - t);
                        m.taken(waited.unwrap_or_default());
                        s.started_at.insert(key.clone(), now);
                    }
                    if !s.queue.is_empty() {
                        self.shared.ready.notify_one();
                    }
                    return Some(key);
                }
                if s.shutting_down {
                    self.shared.ready.notify_one();
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Mark `key` processed; it is queued again if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let mut s = self.lock();
        s.processing.remove(key);
        if let (Some(m), Some(started)) = (&self.shared.metrics, s.started_at.remove(key)) {
            m.done(started.elapsed());
        }
        if s.dirty.contains(key) && !s.shutting_down {
            s.queue.push_back(key.clone());
            drop(s);
            self.shared.ready.notify_one();
            return;
        }
        if s.processing.is_empty() {
            drop(s);
            self.shared.idle.notify_waiters();
        }
    }

    /// Stop handing out keys; workers see `None`.
    pub fn shut_down(&self) {
        let mut s = self.lock();
        s.shutting_down = true;
        if let Some(m) = &self.shared.metrics {
            m.discarded(s.dirty.len());
        }
        s.queue.clear();
        s.dirty.clear();
        s.queued_at.clear();
        s.waiting.clear();
        drop(s);
        self.shared.ready.notify_waiters();
        self.shared.ready.notify_one();
    }

    /// Stop taking new work and wait until every key in flight is done.
    pub async fn shut_down_with_drain(&self) {
        self.shut_down();
        loop {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.lock().processing.is_empty() {
                return;
            }
            idle.await;
        }
    }
}

/// Every 500 ms, the running time of the keys in processing (client-go's
/// `updateUnfinishedWork`), until the queue is dropped or shut down.
async fn report_in_progress<K>(queue: std::sync::Weak<Shared<K>>) {
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    loop {
        ticker.tick().await;
        let Some(shared) = queue.upgrade() else {
            return;
        };
        let Some(metrics) = &shared.metrics else {
            return;
        };
        let (total, longest, stop) = {
            let s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let running = s.started_at.values().map(|t| (now - *t).as_secs_f64());
            let (total, longest) =
                running.fold((0.0, 0.0_f64), |(sum, max), d| (sum + d, max.max(d)));
            (total, longest, s.shutting_down && s.processing.is_empty())
        };
        metrics.in_progress(total, longest);
        if stop {
            return;
        }
    }
}

/// What a handler wants done with its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Finished; forget the key's retries.
    Done,
    /// Process again after this delay (a periodic resync).
    RequeueAfter(Duration),
}

/// An error a handler returns.
pub trait Retry {
    /// A fixed delay the error asks for (a cloud `RetryAfter` / `Throttled`);
    /// `None` means exponential backoff.
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

/// Queue `key` again as its reconcile's `result` asks: forget its retries
/// on success (again after the delay of [`Action::RequeueAfter`]); after
/// an error, log it and retry after the delay the error asks for, or with
/// the queue's backoff. The caller marks the key done.
pub(crate) fn requeue<K, E>(queue: &WorkQueue<K>, key: &K, result: Result<Action, E>)
where
    K: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
    E: Retry + std::fmt::Display,
{
    match result {
        Ok(Action::Done) => queue.forget(key),
        Ok(Action::RequeueAfter(delay)) => {
            queue.forget(key);
            queue.add_after(key.clone(), delay);
        }
        Err(e) => {
            let retries = queue.num_requeues(key);
            tracing::warn!(%key, error = %e, retries, "reconcile failed; queued again");
            match e.retry_after() {
                Some(delay) => queue.add_after(key.clone(), delay),
                None => queue.add_rate_limited(key.clone()),
            }
        }
    }
}

/// A reconcile that cannot fail.
impl Retry for std::convert::Infallible {}

/// Run `workers` workers over `queue` until it is shut down; each key is
/// handled by at most one worker at a time. A failed key is logged (a
/// warning with the key, the error and how many backoff retries it had
/// since its last success) and queued again: after the delay the error
/// asks for, or with the queue's backoff.
pub async fn run_workers<K, E, F, Fut>(queue: WorkQueue<K>, workers: usize, handler: F)
where
    K: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
    E: Retry + std::fmt::Display + Send,
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send,
{
    let handler = Arc::new(handler);
    let mut tasks = Vec::new();
    for _ in 0..workers.max(1) {
        let queue = queue.clone();
        let handler = handler.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(key) = queue.get().await {
                let result = handler(key.clone()).await;
                requeue(&queue, &key, result);
                queue.done(&key);
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}
