//! When the route controller runs its next pass, in Go's two modes, as
//! state without IO (the controller's one queue key is woken by Node
//! changes and by the delays this asks for).

use std::time::{Duration, Instant};

/// What to do when the controller's key comes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Reconcile the routes now.
    Pass,
    /// Nothing yet; look again after this delay.
    Wait(Duration),
    /// Nothing until a Node change.
    Idle,
}

/// The pass schedule.
#[derive(Debug)]
pub(crate) struct Schedule {
    period: Duration,
    watch_based: bool,
    resync: Option<Duration>,
    /// When the last pass started.
    last: Option<Instant>,
    /// When a failed pass is retried (watch-based).
    retry_at: Option<Instant>,
    /// A Node change that calls for a pass has not been handled yet.
    changed: bool,
}

impl Schedule {
    /// Periodic (Go's default: a pass every `period`, non-sliding) or
    /// watch-based (a pass on a change, a retry or a resync, at most one
    /// per `period`).
    pub(crate) fn new(period: Duration, watch_based: bool, resync: Option<Duration>) -> Self {
        Self {
            period,
            watch_based,
            resync,
            last: None,
            retry_at: None,
            changed: false,
        }
    }

    /// A Node change that matters was seen.
    pub(crate) fn changed(&mut self) {
        self.changed = true;
    }

    /// What to do at `now`.
    pub(crate) fn next(&self, now: Instant) -> Next {
        // The first pass at once.
        let Some(last) = self.last else {
            return Next::Pass;
        };
        let earliest = last + self.period;
        if !self.watch_based {
            return wait_until(now, earliest);
        }
        let due = match (self.retry_at, self.resync.map(|r| last + r)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !self.changed && due.is_none_or(|d| now < d) {
            return due.map_or(Next::Idle, |d| wait_until(now, d));
        }
        // Wanted; at most one pass per period (Go's token bucket).
        wait_until(now, earliest)
    }

    /// A pass started at `started` finished, `ok` if every cloud operation
    /// succeeded (a failed one is retried a period later, watch-based).
    pub(crate) fn passed(&mut self, started: Instant, ok: bool) {
        self.last = Some(started);
        self.changed = false;
        self.retry_at = (!ok).then(|| started + self.period);
    }
}

fn wait_until(now: Instant, at: Instant) -> Next {
    if now >= at {
        Next::Pass
    } else {
        Next::Wait(at - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(10);

    #[test]
    fn periodic_passes_every_period_from_the_last_start() {
        let t0 = Instant::now();
        let mut s = Schedule::new(PERIOD, false, None);
        assert_eq!(s.next(t0), Next::Pass);
        s.passed(t0, true);
        assert_eq!(
            s.next(t0 + Duration::from_secs(3)),
            Next::Wait(Duration::from_secs(7))
        );
        // A change does not matter in the periodic mode.
        s.changed();
        assert_eq!(
            s.next(t0 + Duration::from_secs(3)),
            Next::Wait(Duration::from_secs(7))
        );
        // A pass longer than the period: the next one at once.
        assert_eq!(s.next(t0 + Duration::from_secs(12)), Next::Pass);
    }

    #[test]
    fn watch_based_waits_for_a_change_at_most_once_per_period() {
        let t0 = Instant::now();
        let mut s = Schedule::new(PERIOD, true, None);
        assert_eq!(s.next(t0), Next::Pass);
        s.passed(t0, true);
        assert_eq!(s.next(t0 + Duration::from_secs(30)), Next::Idle);
        s.changed();
        assert_eq!(
            s.next(t0 + Duration::from_secs(4)),
            Next::Wait(Duration::from_secs(6))
        );
        assert_eq!(s.next(t0 + Duration::from_secs(10)), Next::Pass);
        s.passed(t0 + Duration::from_secs(10), true);
        assert_eq!(s.next(t0 + Duration::from_secs(11)), Next::Idle);
    }

    #[test]
    fn watch_based_retries_a_failed_pass_and_resyncs() {
        let t0 = Instant::now();
        let mut s = Schedule::new(PERIOD, true, Some(Duration::from_secs(60)));
        s.passed(t0, false);
        assert_eq!(
            s.next(t0 + Duration::from_secs(1)),
            Next::Wait(Duration::from_secs(9))
        );
        assert_eq!(s.next(t0 + PERIOD), Next::Pass);
        s.passed(t0 + PERIOD, true);
        // No retry now; the resync a minute after the last pass.
        assert_eq!(
            s.next(t0 + Duration::from_secs(20)),
            Next::Wait(Duration::from_secs(50))
        );
        assert_eq!(s.next(t0 + Duration::from_secs(70)), Next::Pass);
    }
}
