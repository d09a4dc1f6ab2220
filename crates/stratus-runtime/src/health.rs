//! Health checks: a named check per controller (and per other component,
//! such as leader election), as the Go managers register one `healthz`
//! check per started controller.
//!
//! A [`ControllerHealth`] is the handle a controller reports through:
//! whether it is running, whether its watch is failing, and, for controllers
//! with a periodic pass, when the last pass finished. [`HealthChecks`]
//! gathers named checks and renders the `/healthz` answer in the
//! Kubernetes format (`[+]name ok` / `[-]name failed: reason withheld`).
//!
//! ```
//! use std::time::Duration;
//! use stratus_runtime::health::{ControllerHealth, HealthChecks};
//!
//! let checks = HealthChecks::new();
//! let route = ControllerHealth::new().expect_pass_every(Duration::from_secs(10));
//! checks.add("route", route.clone());
//! route.pass_completed();
//! assert!(checks.report().healthy());
//! route.stopped();
//! let report = checks.report();
//! assert!(!report.healthy());
//! assert!(report.render(true).contains("[-]route failed: reason withheld"));
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// One named health check.
pub trait HealthCheck: Send + Sync {
    /// `Ok` when healthy, otherwise why not.
    fn check(&self) -> Result<(), String>;
}

impl<F: Fn() -> Result<(), String> + Send + Sync> HealthCheck for F {
    fn check(&self) -> Result<(), String> {
        self()
    }
}

/// The set of named checks. Cheap to clone; clones share the set.
#[derive(Clone, Default)]
pub struct HealthChecks {
    checks: Arc<RwLock<BTreeMap<String, Arc<dyn HealthCheck>>>>,
    not_started: Arc<RwLock<BTreeMap<String, String>>>,
}

impl std::fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthChecks")
            .field("names", &self.names())
            .finish()
    }
}

impl HealthChecks {
    /// An empty set (healthy).
    pub fn new() -> Self {
        Self::default()
    }

    /// Add or replace the check called `name`.
    pub fn add(&self, name: impl Into<String>, check: impl HealthCheck + 'static) {
        self.checks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.into(), Arc::new(check));
    }

    /// Remove the check called `name` (a controller that was stopped on
    /// purpose, for example while a manager waits for leadership again).
    pub fn remove(&self, name: &str) {
        self.checks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Record that the component `name` was not started, and why (a
    /// controller its provider or flags leave off). It is no check: it never
    /// fails `/healthz`; readiness reports list it as not started.
    ///
    /// ```
    /// use stratus_runtime::health::HealthChecks;
    ///
    /// let checks = HealthChecks::new();
    /// checks.not_started("service-lb-controller", "no load balancers");
    /// assert!(checks.report().healthy());
    /// assert_eq!(checks.report().render(true), "healthz check passed\n");
    /// let ready = checks.readiness_report();
    /// assert!(ready.render(true).contains("[+]service-lb-controller not started: no load balancers"));
    /// ```
    pub fn not_started(&self, name: impl Into<String>, reason: impl Into<String>) {
        self.not_started
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.into(), reason.into());
    }

    /// Why `name` was not started, if it was recorded so.
    pub fn not_started_reason(&self, name: &str) -> Option<String> {
        self.not_started
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Every check's outcome, and the components recorded as not started
    /// (the `/readyz` answer).
    pub fn readiness_report(&self) -> HealthReport {
        let mut report = self.report();
        report.not_started = self
            .not_started
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(n, r)| (n.clone(), r.clone()))
            .collect();
        report
    }

    /// The names of the checks, sorted.
    pub fn names(&self) -> Vec<String> {
        self.checks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Run the check called `name`; `None` if there is none.
    pub fn check(&self, name: &str) -> Option<Result<(), String>> {
        let check = self
            .checks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()?;
        Some(check.check())
    }

    /// Run every check.
    pub fn report(&self) -> HealthReport {
        let checks: Vec<(String, Arc<dyn HealthCheck>)> = self
            .checks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect();
        HealthReport {
            results: checks.into_iter().map(|(n, c)| (n, c.check())).collect(),
            not_started: Vec::new(),
        }
    }
}

/// The outcome of every check, in name order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    /// Each check's name and result.
    pub results: Vec<(String, Result<(), String>)>,
    /// Components not started, and why (readiness reports only; see
    /// [`HealthChecks::not_started`]).
    pub not_started: Vec<(String, String)>,
}

impl HealthReport {
    /// True when every check passed.
    pub fn healthy(&self) -> bool {
        self.results.iter().all(|(_, r)| r.is_ok())
    }

    /// The names of the failing checks.
    pub fn failing(&self) -> Vec<&str> {
        self.results
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// The body of a `/healthz` answer as kube-apiserver and the Go managers
    /// write it: `ok` when healthy and not verbose; otherwise one line per
    /// check and a closing line. Reasons are withheld, as Go does, and
    /// logged by the caller instead.
    pub fn render(&self, verbose: bool) -> String {
        if self.healthy() && !verbose {
            return "ok".into();
        }
        let mut out = String::new();
        for (name, result) in &self.results {
            match result {
                Ok(()) => out.push_str(&format!("[+]{name} ok\n")),
                Err(_) => out.push_str(&format!("[-]{name} failed: reason withheld\n")),
            }
        }
        for (name, reason) in &self.not_started {
            out.push_str(&format!("[+]{name} not started: {reason}\n"));
        }
        if self.healthy() {
            out.push_str("healthz check passed\n");
        } else {
            out.push_str("healthz check failed\n");
        }
        out
    }
}

/// How long a watch may keep failing before its controller is unhealthy.
pub const DEFAULT_WATCH_FAILURE_GRACE: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct ControllerState {
    started: Instant,
    stopped: bool,
    last_pass: Option<Instant>,
    max_silence: Option<Duration>,
    watch_failing_since: Option<(Instant, String)>,
    watch_grace: Duration,
}

/// What a controller reports about itself; it is a [`HealthCheck`].
///
/// Unhealthy when the controller stopped, when its watch has failed for
/// longer than the grace period (60 s by default: a watch that the API
/// keeps refusing, for example for lack of RBAC), or, if a period is set
/// with [`ControllerHealth::expect_pass_every`], when no pass finished in
/// three periods.
#[derive(Debug, Clone)]
pub struct ControllerHealth {
    state: Arc<Mutex<ControllerState>>,
}

impl Default for ControllerHealth {
    fn default() -> Self {
        Self::new()
    }
}

impl ControllerHealth {
    /// A running controller with no periodic pass.
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(ControllerState {
                started: Instant::now(),
                stopped: false,
                last_pass: None,
                max_silence: None,
                watch_failing_since: None,
                watch_grace: DEFAULT_WATCH_FAILURE_GRACE,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ControllerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The controller runs a pass every `period`; three periods without a
    /// finished pass make it unhealthy.
    pub fn expect_pass_every(self, period: Duration) -> Self {
        self.lock().max_silence = Some(period.saturating_mul(3));
        self
    }

    /// How long a watch may fail before the controller is unhealthy.
    pub fn watch_grace(self, grace: Duration) -> Self {
        self.lock().watch_grace = grace;
        self
    }

    /// A periodic pass finished.
    pub fn pass_completed(&self) {
        self.lock().last_pass = Some(Instant::now());
    }

    /// The controller's watch answered (an event or a completed list).
    pub fn watch_ok(&self) {
        self.lock().watch_failing_since = None;
    }

    /// The controller's watch failed with `error`; the first failure of a
    /// run starts the grace period.
    pub fn watch_failed(&self, error: &str) {
        let mut s = self.lock();
        if s.watch_failing_since.is_none() {
            s.watch_failing_since = Some((Instant::now(), error.to_owned()));
        }
    }

    /// The controller stopped.
    pub fn stopped(&self) {
        self.lock().stopped = true;
    }
}

impl HealthCheck for ControllerHealth {
    fn check(&self) -> Result<(), String> {
        let s = self.lock();
        if s.stopped {
            return Err("the controller has stopped".into());
        }
        if let Some((since, error)) = &s.watch_failing_since {
            let failing = since.elapsed();
            if failing > s.watch_grace {
                return Err(format!(
                    "the watch has failed for {}s: {error}",
                    failing.as_secs()
                ));
            }
        }
        if let Some(max) = s.max_silence {
            let last = s.last_pass.unwrap_or(s.started);
            if last.elapsed() > max {
                return Err(format!(
                    "no pass finished in {}s (allowed {}s)",
                    last.elapsed().as_secs(),
                    max.as_secs()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_failures_count_after_the_grace_period() {
        let h = ControllerHealth::new().watch_grace(Duration::ZERO);
        assert!(h.check().is_ok());
        h.watch_failed("403 Forbidden");
        std::thread::sleep(Duration::from_millis(5));
        let err = h.check().unwrap_err();
        assert!(err.contains("403 Forbidden"), "{err}");
        h.watch_ok();
        assert!(h.check().is_ok());
    }

    #[test]
    fn a_missing_pass_is_unhealthy() {
        let h = ControllerHealth::new().expect_pass_every(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(10));
        assert!(h.check().unwrap_err().contains("no pass finished"));
        h.pass_completed();
        assert!(h.check().is_ok());
    }

    #[test]
    fn report_renders_like_kubernetes() {
        let checks = HealthChecks::new();
        checks.add("ping", || Ok(()));
        assert_eq!(checks.report().render(false), "ok");
        assert_eq!(
            checks.report().render(true),
            "[+]ping ok\nhealthz check passed\n"
        );
        checks.add("leaderElection", || Err("lease expired".to_string()));
        let report = checks.report();
        assert_eq!(report.failing(), ["leaderElection"]);
        assert_eq!(
            report.render(false),
            "[-]leaderElection failed: reason withheld\n[+]ping ok\nhealthz check failed\n"
        );
        assert_eq!(checks.check("ping"), Some(Ok(())));
        assert_eq!(checks.check("nope"), None);
    }
}
