//! Waiting until something converges: the one polling helper the tests,
//! benchmarks, soak and end-to-end checks share.
//!
//! A check looks at the world once and answers a [`Check`]: done, still
//! pending (saying what), or failed (no point waiting further). [`poll`]
//! repeats it until it is done, and when time runs out the error carries
//! what the last look found still pending, so a failed wait says why.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use std::time::{Duration, Instant};
//! use stratus_apiserver::converge::{Check, poll};
//!
//! let started = Instant::now();
//! poll("100 ms to pass", Duration::from_secs(5))
//!     .until(|| async move {
//!         let waited = started.elapsed();
//!         if waited >= Duration::from_millis(100) {
//!             Check::Done
//!         } else {
//!             Check::Pending(format!("only {waited:?} have passed"))
//!         }
//!     })
//!     .await
//!     .unwrap();
//!
//! // Out of time: the error says what was still pending.
//! let err = poll("a flag", Duration::from_millis(30))
//!     .until(|| async { Check::Pending("the flag is down".into()) })
//!     .await
//!     .unwrap_err();
//! assert!(err.to_string().ends_with("waiting for a flag: the flag is down"));
//! # });
//! ```

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// What one look at the world found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// The condition holds.
    Done,
    /// Not yet; what is still missing, for the timeout's message (empty
    /// when the check cannot say).
    Pending(String),
    /// It will not hold: stop waiting with this reason.
    Failed(String),
}

impl From<bool> for Check {
    /// `true` is done; `false` is pending without saying what.
    fn from(done: bool) -> Self {
        if done {
            Check::Done
        } else {
            Check::Pending(String::new())
        }
    }
}

impl From<Option<String>> for Check {
    /// `None`: nothing is pending; `Some(what)`: `what` still is.
    fn from(pending: Option<String>) -> Self {
        match pending {
            None => Check::Done,
            Some(what) => Check::Pending(what),
        }
    }
}

impl<T, E: Display> From<Result<T, E>> for Check
where
    T: Into<Check>,
{
    /// An `Err` ends the wait with its message.
    fn from(result: Result<T, E>) -> Self {
        match result {
            Ok(check) => check.into(),
            Err(e) => Check::Failed(e.to_string()),
        }
    }
}

/// Why a wait ended without its condition holding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvergeError {
    /// Time ran out.
    #[error("timed out after {timeout:?} waiting for {what}{}", said(pending))]
    TimedOut {
        /// What was waited for.
        what: String,
        /// How long.
        timeout: Duration,
        /// What the last look found still pending.
        pending: String,
    },
    /// The check answered [`Check::Failed`].
    #[error("gave up waiting for {what}: {reason}")]
    Failed {
        /// What was waited for.
        what: String,
        /// The check's reason.
        reason: String,
    },
}

/// `": pending"`, or nothing when the check said nothing.
fn said(pending: &str) -> String {
    if pending.is_empty() {
        String::new()
    } else {
        format!(": {pending}")
    }
}

/// A wait for `what`, at most `timeout`; run it with [`Poll::until`].
#[derive(Clone, Debug)]
pub struct Poll {
    what: String,
    timeout: Duration,
    interval: Duration,
}

/// Wait for `what` for at most `timeout`, looking every 50 ms unless
/// [`Poll::every`] says otherwise.
pub fn poll(what: impl Into<String>, timeout: Duration) -> Poll {
    Poll {
        what: what.into(),
        timeout,
        interval: Duration::from_millis(50),
    }
}

impl Poll {
    /// Look every `interval` instead of every 50 ms.
    pub fn every(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Run `check` until it answers done (then `Ok` with the time waited),
    /// fails, or the timeout passes. The check runs at least once, and once
    /// more at the deadline, so a slow check is not cut short.
    pub async fn until<F, Fut>(self, mut check: F) -> Result<Duration, ConvergeError>
    where
        F: FnMut() -> Fut,
        Fut: Future,
        Fut::Output: Into<Check>,
    {
        let started = Instant::now();
        let deadline = started + self.timeout;
        loop {
            match check().await.into() {
                Check::Done => return Ok(started.elapsed()),
                Check::Failed(reason) => {
                    return Err(ConvergeError::Failed {
                        what: self.what,
                        reason,
                    });
                }
                Check::Pending(pending) if Instant::now() >= deadline => {
                    return Err(ConvergeError::TimedOut {
                        what: self.what,
                        timeout: self.timeout,
                        pending,
                    });
                }
                Check::Pending(_) => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(self.interval.min(left)).await;
        }
    }
}

/// [`poll`] for tests: wait for `what` up to `timeout`, panicking with the
/// [`ConvergeError`] (what was still pending) if it does not converge.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let started = std::time::Instant::now();
/// stratus_apiserver::eventually("100 ms to pass", std::time::Duration::from_secs(5), || async move {
///     started.elapsed() >= std::time::Duration::from_millis(100)
/// })
/// .await;
/// # });
/// ```
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Into<Check>,
{
    if let Err(e) = poll(what, timeout).until(check).await {
        panic!("{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_convert_to_checks() {
        assert_eq!(Check::from(true), Check::Done);
        assert!(matches!(Check::from(false), Check::Pending(_)));
        assert_eq!(Check::from(None::<String>), Check::Done);
        assert_eq!(
            Check::from(Some("x".to_owned())),
            Check::Pending("x".to_owned())
        );
        assert_eq!(Check::from(Ok::<bool, String>(true)), Check::Done);
        assert_eq!(
            Check::from(Err::<bool, _>("boom")),
            Check::Failed("boom".to_owned())
        );
        assert_eq!(
            Check::from(Ok::<_, String>(Some("y".to_owned()))),
            Check::Pending("y".to_owned())
        );
    }

    #[tokio::test]
    async fn a_failed_check_ends_the_wait_at_once() {
        let started = Instant::now();
        let err = poll("x", Duration::from_secs(30))
            .until(|| async { Err::<bool, _>("no such thing") })
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(err.to_string(), "gave up waiting for x: no such thing");
    }

    #[tokio::test]
    async fn a_timeout_reports_the_last_pending_answer() {
        let mut looks = 0;
        let err = poll("y", Duration::from_millis(120))
            .every(Duration::from_millis(10))
            .until(|| {
                looks += 1;
                let n = looks;
                async move { Check::Pending(format!("look {n}")) }
            })
            .await
            .unwrap_err();
        let ConvergeError::TimedOut { pending, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(pending, &format!("look {looks}"));
        assert!(looks > 3, "{looks}");
        let quiet = poll("z", Duration::from_millis(10))
            .until(|| async { false })
            .await
            .unwrap_err();
        assert_eq!(quiet.to_string(), "timed out after 10ms waiting for z");
    }
}
