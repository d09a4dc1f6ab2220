//! Waiting for a condition in tests.

use std::future::Future;
use std::time::{Duration, Instant};

/// Poll `check` every 100 ms until it answers `Ok(true)`; an `Err` ends
/// the wait with it, `timeout` with "timed out after ... waiting for
/// `what`", and `give_up` (asked after each `false`) with its reason. The
/// suites' waits.
pub(crate) async fn poll_until<F, Fut>(
    timeout: Duration,
    what: &str,
    mut check: F,
    give_up: impl Fn(Duration) -> Option<String>,
) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, String>>,
{
    let started = Instant::now();
    loop {
        if check().await? {
            return Ok(());
        }
        if let Some(why) = give_up(started.elapsed()) {
            return Err(why);
        }
        if started.elapsed() > timeout {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
