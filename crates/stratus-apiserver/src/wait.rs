//! Waiting for a condition in tests.

use std::future::Future;
use std::time::{Duration, Instant};

/// Check `condition` every 50 ms until it holds; panic with `what` after
/// `timeout`. For tests that wait on controllers converging.
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
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if condition().await {
            return;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
