//! Leader election on a `coordination.k8s.io/v1` Lease, with the semantics
//! of client-go's `leaderelection` package, so a Stratus manager and a Go
//! one can share a Lease:
//!
//! - the record is the Lease's `holderIdentity`, `leaseDurationSeconds`,
//!   `acquireTime`, `renewTime` and `leaseTransitions`;
//! - every write is fenced by the `resourceVersion` read just before, so
//!   two candidates can never both believe they won;
//! - expiry is judged by *locally observed* time: a candidate notes when it
//!   last saw the record change and waits a full lease duration from then,
//!   whatever the clocks of other machines say;
//! - a leader that cannot renew within the renew deadline steps down;
//! - on graceful shutdown the leader releases the Lease (empty holder, 1 s
//!   duration), so another candidate takes over within one retry period;
//! - defaults 15 s / 10 s / 2 s, retries jittered by a factor of 1.2;
//! - unlike client-go, a candidate that finds the Lease held wakes when that
//!   lease expires as observed locally (if that comes before its next
//!   jittered retry), so a crashed leader is replaced about one lease
//!   duration after its last renewal was seen, not up to 2.2 retry periods
//!   later (`cargo xtask bench failover`).
//!
//! ```no_run
//! use stratus_runtime::leader_election::{ElectionConfig, LeaderElector, LeaseLock};
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let lock = LeaseLock::new("kube-system", "cloud-controller-manager");
//! let mut elector = LeaderElector::new(client, lock, "host-1_0b1c", ElectionConfig::default());
//! let (shutdown, stopped) = tokio::sync::watch::channel(false);
//! if let Some(mut leadership) = elector.acquire(stopped).await? {
//!     // Run the controllers until leadership is lost, then exit as Go does.
//!     leadership.lost().await;
//! }
//! # drop(shutdown);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why an election step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// The configuration breaks client-go's rules (lease > renew deadline >
    /// retry period × 1.2).
    #[error("invalid leader-election configuration: {0}")]
    InvalidConfig(String),
    /// The identity is empty.
    #[error("leader-election identity must not be empty")]
    EmptyIdentity,
}

/// Timings (client-go's `LeaderElectionConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionConfig {
    /// How long a non-leader waits after the last observed change before it
    /// may take over (`--leader-elect-lease-duration`, 15 s). Written to the
    /// Lease in whole seconds (at least 1); candidates judge expiry by the
    /// duration in the Lease, as client-go does.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before it steps
    /// down (`--leader-elect-renew-deadline`, 10 s).
    pub renew_deadline: Duration,
    /// The pause between attempts (`--leader-elect-retry-period`, 2 s).
    pub retry_period: Duration,
    /// Release the Lease when leadership ends by [`Leadership::release`].
    pub release_on_cancel: bool,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

/// How long after a holder's lease expires (as observed here) a candidate
/// tries again.
const EXPIRY_MARGIN: Duration = Duration::from_millis(20);

/// The jitter factor client-go applies to the retry period.
pub const JITTER_FACTOR: f64 = 1.2;

impl ElectionConfig {
    /// Check client-go's rules.
    pub fn validate(&self) -> Result<(), ElectionError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(ElectionError::InvalidConfig(
                "leaseDuration must be greater than renewDeadline".into(),
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(ElectionError::InvalidConfig(
                "renewDeadline must be greater than retryPeriod*JitterFactor".into(),
            ));
        }
        if self.retry_period.is_zero() {
            return Err(ElectionError::InvalidConfig(
                "retryPeriod must be greater than zero".into(),
            ));
        }
        Ok(())
    }
}

/// Which Lease to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseLock {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl LeaseLock {
    /// The Lease `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// The election state of one candidate.
struct Observer {
    /// The spec last seen, and when it was first seen (local clock).
    record: Option<LeaseSpec>,
    observed_at: Instant,
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    lock: LeaseLock,
    identity: String,
    config: ElectionConfig,
    observer: Observer,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("lock", &self.lock)
            .field("identity", &self.identity)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What one attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// We hold the lease now.
    Held,
    /// The read or the write failed, or the write lost a race.
    NotHeld,
    /// Someone else holds a lease that, as observed here, expires in this
    /// long.
    HeldByOther(Duration),
}

impl LeaderElector {
    /// A candidate `identity` for `lock`. Go's managers use
    /// `hostname + "_" + uuid` as the identity.
    pub fn new(
        client: kube::Client,
        lock: LeaseLock,
        identity: impl Into<String>,
        config: ElectionConfig,
    ) -> Self {
        Self {
            api: Api::namespaced(client, &lock.namespace),
            lock,
            identity: identity.into(),
            config,
            observer: Observer {
                record: None,
                observed_at: Instant::now(),
            },
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn observe(&mut self, spec: &LeaseSpec) {
        if self.observer.record.as_ref() != Some(spec) {
            self.observer.record = Some(spec.clone());
            self.observer.observed_at = Instant::now();
        }
    }

    fn record(&self, acquire_time: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            acquire_time,
            renew_time: Some(now_micro()),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// One `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let current = match self.api.get_opt(&self.lock.name).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(lease = %self.lock.name, error = %e, "could not read the leader-election lease");
                return Attempt::NotHeld;
            }
        };
        let Some(lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.lock.name.clone()),
                    namespace: Some(self.lock.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.record(Some(now_micro()), 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    if let Some(spec) = &created.spec {
                        self.observe(spec);
                    }
                    Attempt::Held
                }
                Err(_) => Attempt::NotHeld,
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(&spec);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let held_by_me = holder == self.identity;
        let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        let valid = !holder.is_empty() && self.observer.observed_at.elapsed() < duration;
        if !held_by_me && valid {
            return Attempt::HeldByOther(
                duration.saturating_sub(self.observer.observed_at.elapsed()),
            );
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        let next = if held_by_me {
            LeaseSpec {
                renew_time: Some(now_micro()),
                lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
                ..spec.clone()
            }
        } else {
            self.record(Some(now_micro()), transitions + 1)
        };
        let mut updated = lease.clone();
        updated.spec = Some(next);
        // The read resourceVersion fences the write: a concurrent change makes it 409.
        match self
            .api
            .replace(&self.lock.name, &PostParams::default(), &updated)
            .await
        {
            Ok(written) => {
                if let Some(spec) = &written.spec {
                    self.observe(spec);
                }
                Attempt::Held
            }
            Err(e) => {
                tracing::debug!(lease = %self.lock.name, error = %e, "leader-election write failed");
                Attempt::NotHeld
            }
        }
    }

    /// Campaign until this candidate holds the lease (returns the
    /// [`Leadership`]) or `stop` becomes true (returns `None`).
    pub async fn acquire(
        &mut self,
        mut stop: watch::Receiver<bool>,
    ) -> Result<Option<Leadership>, ElectionError> {
        if self.identity.is_empty() {
            return Err(ElectionError::EmptyIdentity);
        }
        self.config.validate()?;
        loop {
            if *stop.borrow() {
                return Ok(None);
            }
            let mut wait = crate::wait::jitter(self.config.retry_period, JITTER_FACTOR);
            match self.try_acquire_or_renew().await {
                Attempt::Held => {
                    tracing::info!(lease = %self.lock.name, identity = %self.identity, "acquired the leader-election lease");
                    return Ok(Some(self.lead(stop)));
                }
                // Try again as soon as the holder's lease expires as seen
                // from here, rather than up to a retry period later.
                Attempt::HeldByOther(expires_in) => {
                    wait = wait.min(expires_in + EXPIRY_MARGIN);
                }
                Attempt::NotHeld => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                r = stop.changed() => if r.is_err() || *stop.borrow() { return Ok(None) },
            }
        }
    }

    /// Give the lease up: an empty holder and a 1 s duration, as client-go
    /// releases it, so the next candidate acquires at its next attempt.
    async fn release_lease(&mut self) {
        let Ok(Some(lease)) = self.api.get_opt(&self.lock.name).await else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let mut released = lease;
        released.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now_micro()),
            renew_time: Some(now_micro()),
            lease_transitions: spec.lease_transitions,
            ..Default::default()
        });
        match self
            .api
            .replace(&self.lock.name, &PostParams::default(), &released)
            .await
        {
            Ok(_) => {
                tracing::info!(lease = %self.lock.name, identity = %self.identity, "released the leader-election lease")
            }
            Err(e) => {
                tracing::warn!(lease = %self.lock.name, error = %e, "could not release the lease")
            }
        }
    }

    /// Start renewing; the returned handle reports loss.
    fn lead(&mut self, mut stop: watch::Receiver<bool>) -> Leadership {
        let (lost_tx, lost_rx) = watch::channel(false);
        let (halt_tx, mut halt_rx) = watch::channel(false);
        let mut elector = LeaderElector {
            api: self.api.clone(),
            lock: self.lock.clone(),
            identity: self.identity.clone(),
            config: self.config,
            observer: Observer {
                record: self.observer.record.clone(),
                observed_at: self.observer.observed_at,
            },
        };
        let renewed = Arc::new(std::sync::Mutex::new(Instant::now()));
        let renewed_by_task = renewed.clone();
        let task = tokio::spawn(async move {
            let mut last_renew = Instant::now();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(elector.config.retry_period) => {}
                    _ = halt_rx.changed() => return (elector, true),
                    r = stop.changed() => if r.is_err() || *stop.borrow() { return (elector, true) },
                }
                match tokio::time::timeout(
                    elector.config.renew_deadline,
                    elector.try_acquire_or_renew(),
                )
                .await
                {
                    Ok(Attempt::Held) => {
                        last_renew = Instant::now();
                        *renewed_by_task.lock().unwrap_or_else(|e| e.into_inner()) = last_renew;
                    }
                    _ => {
                        if last_renew.elapsed() >= elector.config.renew_deadline {
                            tracing::warn!(lease = %elector.lock.name, identity = %elector.identity, "failed to renew the lease within the renew deadline; stepping down");
                            let _ = lost_tx.send(true);
                            return (elector, false);
                        }
                    }
                }
            }
        });
        Leadership {
            lost: lost_rx,
            halt: halt_tx,
            task: Some(task),
            release_on_cancel: self.config.release_on_cancel,
            renewed,
            lease_duration: self.config.lease_duration,
        }
    }
}

/// Held leadership: renewed in the background until lost or released.
pub struct Leadership {
    lost: watch::Receiver<bool>,
    halt: watch::Sender<bool>,
    /// The renew task; it hands the elector back, with whether it still held
    /// the lease when it stopped.
    task: Option<JoinHandle<(LeaderElector, bool)>>,
    release_on_cancel: bool,
    /// When the lease was last renewed.
    renewed: Arc<std::sync::Mutex<Instant>>,
    lease_duration: Duration,
}

/// The `leaderElection` health check of a [`Leadership`] (Go's
/// `LeaderHealthzAdaptor`): unhealthy once leadership is lost, or when the
/// lease has not been renewed for longer than the lease duration plus a
/// tolerance (Go's managers use 20 s), i.e. a leader stuck without knowing
/// it.
#[derive(Debug, Clone)]
pub struct LeaderHealth {
    lost: watch::Receiver<bool>,
    renewed: Arc<std::sync::Mutex<Instant>>,
    allowed: Duration,
}

impl crate::health::HealthCheck for LeaderHealth {
    fn check(&self) -> Result<(), String> {
        if *self.lost.borrow() {
            return Err("leadership was lost".into());
        }
        let since = self
            .renewed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed();
        if since > self.allowed {
            return Err(format!(
                "the lease was last renewed {}s ago (allowed {}s)",
                since.as_secs(),
                self.allowed.as_secs()
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("lost", &*self.lost.borrow())
            .finish_non_exhaustive()
    }
}

impl Leadership {
    /// True while the lease is held.
    pub fn is_leader(&self) -> bool {
        !*self.lost.borrow()
    }

    /// The health check for this leadership, with `tolerance` beyond the
    /// lease duration (Go: 20 s).
    pub fn health_check(&self, tolerance: Duration) -> LeaderHealth {
        LeaderHealth {
            lost: self.lost.clone(),
            renewed: self.renewed.clone(),
            allowed: self.lease_duration + tolerance,
        }
    }

    /// Completes when leadership is lost (the renew deadline passed without
    /// a successful renewal). Renewal that stops because the election's stop
    /// signal fired is not a loss: then this never completes.
    pub async fn lost(&mut self) {
        while !*self.lost.borrow() {
            if self.lost.changed().await.is_err() {
                if *self.lost.borrow() {
                    return;
                }
                std::future::pending::<()>().await;
            }
        }
    }

    /// Stop renewing and, when `release_on_cancel` is set, release the lease
    /// so another candidate takes over within one retry period (client-go's
    /// `ReleaseOnCancel`). Call it on graceful shutdown.
    pub async fn release(mut self) {
        let Some(task) = self.task.take() else { return };
        let _ = self.halt.send(true);
        if let Ok((mut elector, held)) = task.await
            && held
            && self.release_on_cancel
        {
            elector.release_lease().await;
        }
    }

    /// Stop renewing without releasing, as a crashed process would: others
    /// take over once the lease expires.
    pub fn abandon(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
