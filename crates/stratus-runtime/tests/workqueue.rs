//! Work-queue semantics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use stratus_runtime::workqueue::{
    Action, BucketRateLimiter, ItemExponentialBackoff, RateLimiter, Retry, WorkQueue,
    default_controller_rate_limiter, run_workers,
};
use tokio::time::Instant;

#[test]
fn exponential_backoff_matches_client_go() {
    let l = ItemExponentialBackoff::new(Duration::from_millis(5), Duration::from_secs(1000));
    let delays: Vec<Duration> = (0..5).map(|_| l.when(&"k")).collect();
    assert_eq!(delays, [5, 10, 20, 40, 80].map(Duration::from_millis));
    for _ in 0..40 {
        l.when(&"k");
    }
    assert_eq!(l.when(&"k"), Duration::from_secs(1000));
    assert_eq!(l.when(&"other"), Duration::from_millis(5), "per item");
    l.forget(&"k");
    assert_eq!(l.when(&"k"), Duration::from_millis(5));
}

#[tokio::test(start_paused = true)]
async fn bucket_allows_a_burst_then_paces() {
    let b = BucketRateLimiter::new(10.0, 3);
    for _ in 0..3 {
        assert_eq!(RateLimiter::<&str>::when(&b, &"x"), Duration::ZERO);
    }
    let d = RateLimiter::<&str>::when(&b, &"x");
    assert!(
        d > Duration::from_millis(90) && d <= Duration::from_millis(100),
        "{d:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn dedup_and_processing_rules() {
    let q = WorkQueue::new(default_controller_rate_limiter());
    q.add("a");
    q.add("a");
    q.add("b");
    assert_eq!(q.len(), 2);
    let a = q.get().await.unwrap();
    assert_eq!(a, "a");
    // Re-added while processing: not handed out twice, queued again after done.
    q.add("a");
    assert_eq!(q.get().await.unwrap(), "b");
    assert_eq!(q.len(), 0);
    q.done(&"b");
    q.done(&"a");
    assert_eq!(q.get().await.unwrap(), "a");
    q.done(&"a");
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn delays_and_rate_limited_retries() {
    let q = WorkQueue::new(default_controller_rate_limiter());
    let started = Instant::now();
    q.add_after("late", Duration::from_secs(10));
    q.add_after("late", Duration::from_secs(1)); // the earlier delay wins
    q.add_after("later", Duration::from_secs(5));
    assert_eq!(q.get().await.unwrap(), "late");
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    q.done(&"late");
    assert_eq!(q.get().await.unwrap(), "later");
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    q.done(&"later");

    // First adds are never throttled, even beyond the bucket's burst.
    for i in 0..500 {
        q.add(format!("k{i}").leak() as &str);
    }
    assert_eq!(q.len(), 500);
}

#[derive(Debug)]
struct Fail(Option<Duration>);

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "failed (retry after {:?})", self.0)
    }
}

impl Retry for Fail {
    fn retry_after(&self) -> Option<Duration> {
        self.0
    }
}

#[tokio::test(start_paused = true)]
async fn workers_retry_with_backoff_or_fixed_delays_and_are_bounded() {
    let q = WorkQueue::new(default_controller_rate_limiter());
    let attempts = Arc::new(AtomicUsize::new(0));
    let concurrent = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let times = Arc::new(std::sync::Mutex::new(Vec::new()));
    let started = Instant::now();
    {
        let (attempts, concurrent, max_seen, times) = (
            attempts.clone(),
            concurrent.clone(),
            max_seen.clone(),
            times.clone(),
        );
        let q2 = q.clone();
        tokio::spawn(run_workers(q2, 3, move |key: &'static str| {
            let (attempts, concurrent, max_seen, times) = (
                attempts.clone(),
                concurrent.clone(),
                max_seen.clone(),
                times.clone(),
            );
            async move {
                let now = concurrent.fetch_add(1, Ordering::SeqCst) + 1;
                max_seen.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                concurrent.fetch_sub(1, Ordering::SeqCst);
                if key == "flaky" {
                    let n = attempts.fetch_add(1, Ordering::SeqCst);
                    times.lock().unwrap().push(started.elapsed());
                    return match n {
                        0 | 1 => Err(Fail(None)),
                        2 => Err(Fail(Some(Duration::from_secs(7)))),
                        _ => Ok(Action::Done),
                    };
                }
                Ok(Action::Done)
            }
        }));
    }
    q.add("flaky");
    for i in 0..20 {
        q.add(format!("k{i}").leak() as &str);
    }
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    assert!(max_seen.load(Ordering::SeqCst) <= 3);
    assert_eq!(max_seen.load(Ordering::SeqCst), 3);
    let t = times.lock().unwrap().clone();
    // 5 ms, then 10 ms of backoff (plus 10 ms of work, plus waiting behind
    // the other keys), then exactly the 7 s the error asked for.
    assert!(
        t[1] - t[0] >= Duration::from_millis(15) && t[1] - t[0] < Duration::from_millis(200),
        "{t:?}"
    );
    assert!(
        t[2] - t[1] >= Duration::from_millis(20) && t[2] - t[1] < Duration::from_millis(200),
        "{t:?}"
    );
    assert!(
        t[3] - t[2] >= Duration::from_secs(7) && t[3] - t[2] < Duration::from_millis(7100),
        "{t:?}"
    );
    assert_eq!(q.num_requeues(&"flaky"), 0, "forgotten after success");
}

#[tokio::test(start_paused = true)]
async fn shutdown_drains_in_flight_work() {
    let q = WorkQueue::new(default_controller_rate_limiter());
    q.add("a");
    q.add("b");
    let key = q.get().await.unwrap();
    let q2 = q.clone();
    let drained = tokio::spawn(async move { q2.shut_down_with_drain().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!drained.is_finished(), "waits for the key in flight");
    assert!(q.get().await.is_none(), "no new work after shutdown");
    q.add("c");
    assert!(q.is_empty(), "adds are refused after shutdown");
    q.done(&key);
    tokio::time::timeout(Duration::from_secs(1), drained)
        .await
        .unwrap()
        .unwrap();
}

/// The value of a sample in the text exposition.
fn sample(text: &str, name_and_labels: &str) -> f64 {
    stratus_testing::metric_sample(text, name_and_labels)
        .unwrap_or_else(|| panic!("no sample {name_and_labels} in\n{text}"))
}

#[tokio::test(start_paused = true)]
async fn queue_metrics_follow_client_go() {
    use stratus_runtime::metrics::{WorkQueueMetrics, encode_text};
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = WorkQueueMetrics::register(&mut registry);
    let q = WorkQueue::with_metrics(default_controller_rate_limiter(), metrics.queue("node"));
    for k in ["a", "b", "c", "a"] {
        q.add(k.to_string());
    }
    let text = encode_text(&registry).unwrap();
    assert_eq!(
        sample(&text, "workqueue_adds_total{name=\"node\"}"),
        3.0,
        "dedup"
    );
    assert_eq!(sample(&text, "workqueue_depth{name=\"node\"}"), 3.0);

    tokio::time::advance(Duration::from_millis(250)).await;
    let key = q.get().await.unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    // The in-progress gauges are refreshed every 500 ms.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let text = encode_text(&registry).unwrap();
    assert_eq!(sample(&text, "workqueue_depth{name=\"node\"}"), 2.0);
    assert_eq!(
        sample(
            &text,
            "workqueue_queue_duration_seconds_count{name=\"node\"}"
        ),
        1.0
    );
    assert!(sample(&text, "workqueue_queue_duration_seconds_sum{name=\"node\"}") >= 0.25);
    assert!(
        sample(
            &text,
            "workqueue_longest_running_processor_seconds{name=\"node\"}"
        ) >= 2.0
    );
    assert!(sample(&text, "workqueue_unfinished_work_seconds{name=\"node\"}") >= 2.0);

    q.add_rate_limited(key.clone());
    q.done(&key);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let text = encode_text(&registry).unwrap();
    assert_eq!(sample(&text, "workqueue_retries_total{name=\"node\"}"), 1.0);
    assert_eq!(
        sample(
            &text,
            "workqueue_work_duration_seconds_count{name=\"node\"}"
        ),
        1.0
    );
    assert!(sample(&text, "workqueue_work_duration_seconds_sum{name=\"node\"}") >= 2.0);
    assert_eq!(
        sample(&text, "workqueue_adds_total{name=\"node\"}"),
        4.0,
        "the retry re-added it"
    );
    assert_eq!(sample(&text, "workqueue_depth{name=\"node\"}"), 3.0);
    assert_eq!(
        sample(&text, "workqueue_unfinished_work_seconds{name=\"node\"}"),
        0.0
    );

    q.shut_down();
    let text = encode_text(&registry).unwrap();
    assert_eq!(
        sample(&text, "workqueue_depth{name=\"node\"}"),
        0.0,
        "discarded on shutdown"
    );
}
