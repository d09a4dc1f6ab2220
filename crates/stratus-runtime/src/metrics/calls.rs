//! `<prefix>_requests_total{method,result}` and
//! `<prefix>_request_duration_seconds{method}`: calls to an external API,
//! such as a cloud provider's.

use super::Labels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::{Duration, Instant};

fn call_histogram() -> Histogram {
    // 1 ms to ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// How a call ended, as the `result` label writes it (`ok`, or an error
/// kind such as `not_found` or `throttled`).
pub type CallResult = &'static str;

/// Call counts and latencies by method.
#[derive(Debug, Clone)]
pub struct CallMetrics {
    total: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
}

impl CallMetrics {
    /// Register `<prefix>_requests_total` and
    /// `<prefix>_request_duration_seconds`; `what` names the API in the
    /// help text.
    pub fn register(registry: &mut Registry, prefix: &str, what: &str) -> Self {
        let this = Self {
            total: Family::default(),
            duration: Family::new_with_constructor(call_histogram),
        };
        registry.register(
            format!("{prefix}_requests"),
            format!("Calls to the {what} API by method and result"),
            this.total.clone(),
        );
        registry.register(
            format!("{prefix}_request_duration_seconds"),
            format!("Latency of calls to the {what} API by method"),
            this.duration.clone(),
        );
        this
    }

    /// Record one call of `method` that took `took` and ended as `result`.
    pub fn observe(&self, method: &str, result: CallResult, took: Duration) {
        let labels = vec![("method", method.to_owned()), ("result", result.to_owned())];
        self.total.get_or_create(&labels).inc();
        let labels = vec![("method", method.to_owned())];
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// Run `call`, timing it and labelling its outcome with `classify`.
    ///
    /// ```
    /// # tokio_test_block(async {
    /// let mut registry = prometheus_client::registry::Registry::default();
    /// let calls = stratus_runtime::metrics::CallMetrics::register(&mut registry, "demo", "demo");
    /// let answer: Result<u32, &str> = calls
    ///     .time("get_thing", async { Err("not found") }, |r| if r.is_ok() { "ok" } else { "not_found" })
    ///     .await;
    /// assert!(answer.is_err());
    /// let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    /// assert!(text.contains("demo_requests_total{method=\"get_thing\",result=\"not_found\"} 1"));
    /// # });
    /// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    /// # }
    /// ```
    pub async fn time<T>(
        &self,
        method: &str,
        call: impl Future<Output = T>,
        classify: impl FnOnce(&T) -> CallResult,
    ) -> T {
        let started = Instant::now();
        let out = call.await;
        self.observe(method, classify(&out), started.elapsed());
        out
    }
}
