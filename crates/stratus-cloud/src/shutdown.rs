//! A runtime-free shutdown signal handed to providers.
//!
//! The manager keeps the [`ShutdownTrigger`]; the provider gets clones of the
//! [`ShutdownSignal`] and can await it from any executor. This is the
//! counterpart of the `stop <-chan struct{}` that Go's `Initialize` receives.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct Inner {
    triggered: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Inner {
    fn fire(&self) {
        self.triggered.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(&mut *self.wakers.lock().unwrap_or_else(|e| e.into_inner()));
        for waker in wakers {
            waker.wake();
        }
    }
}

/// The side of a shutdown signal that fires it. Dropping it fires it too, so
/// a signal never waits forever on a manager that has gone away.
pub struct ShutdownTrigger {
    inner: Arc<Inner>,
}

impl ShutdownTrigger {
    /// Fire the signal: every current and future waiter completes.
    pub fn trigger(&self) {
        self.inner.fire();
    }
}

impl Drop for ShutdownTrigger {
    fn drop(&mut self) {
        self.inner.fire();
    }
}

impl std::fmt::Debug for ShutdownTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownTrigger").finish_non_exhaustive()
    }
}

/// A cloneable signal that completes when the manager shuts down.
///
/// ```
/// use stratus_cloud::ShutdownSignal;
///
/// # tokio_test_block_on(async {
/// let (trigger, signal) = ShutdownSignal::new();
/// let waiter = signal.clone();
/// assert!(!waiter.is_triggered());
/// trigger.trigger();
/// waiter.wait().await; // completes at once
/// assert!(signal.is_triggered());
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct ShutdownSignal {
    inner: Arc<Inner>,
}

impl ShutdownSignal {
    /// A new signal and the trigger that fires it.
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> (ShutdownTrigger, ShutdownSignal) {
        let inner = Arc::new(Inner::default());
        (
            ShutdownTrigger {
                inner: inner.clone(),
            },
            ShutdownSignal { inner },
        )
    }

    /// A signal that never fires, for tests and one-shot tools.
    pub fn never() -> ShutdownSignal {
        ShutdownSignal {
            inner: Arc::new(Inner::default()),
        }
    }

    /// True once the trigger fired (or was dropped).
    pub fn is_triggered(&self) -> bool {
        self.inner.triggered.load(Ordering::SeqCst)
    }

    /// A future that completes when the signal fires.
    pub fn wait(&self) -> Wait<'_> {
        Wait { signal: self }
    }
}

impl std::fmt::Debug for ShutdownSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownSignal")
            .field("triggered", &self.is_triggered())
            .finish()
    }
}

/// The future returned by [`ShutdownSignal::wait`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Wait<'a> {
    signal: &'a ShutdownSignal,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &self.signal.inner;
        if inner.triggered.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        let mut wakers = inner.wakers.lock().unwrap_or_else(|e| e.into_inner());
        // Re-check under the lock: `fire` sets the flag before taking the lock.
        if inner.triggered.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waiters_wake_on_trigger() {
        let (trigger, signal) = ShutdownSignal::new();
        let a = signal.clone();
        let task = tokio::spawn(async move { a.wait().await });
        tokio::task::yield_now().await;
        assert!(!task.is_finished());
        trigger.trigger();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("waiter woke")
            .expect("task ran");
        assert!(signal.is_triggered());
    }

    #[tokio::test]
    async fn dropping_the_trigger_fires() {
        let (trigger, signal) = ShutdownSignal::new();
        drop(trigger);
        signal.wait().await;
        assert!(signal.is_triggered());
    }

    #[test]
    fn never_stays_pending() {
        let signal = ShutdownSignal::never();
        assert!(!signal.is_triggered());
    }
}
