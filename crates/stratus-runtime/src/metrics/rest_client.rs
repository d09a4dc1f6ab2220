//! client-go's API client families: `rest_client_requests_total{code,method,host}`
//! and `rest_client_request_duration_seconds{verb,host}`, filled by the
//! clients [`crate::client::build_client`] makes when
//! [`crate::client::ClientOptions::metrics`] is set.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::Labels;

/// client-go's request-latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// Requests made to the API server, by answer code, method and host, and
/// their latency (until the response's headers; for a watch, until it
/// started).
///
/// ```
/// use std::time::Duration;
/// use prometheus_client::registry::Registry;
/// use stratus_runtime::metrics::{RestClientMetrics, encode_text};
///
/// let metrics = RestClientMetrics::new();
/// let mut registry = Registry::default();
/// metrics.register(&mut registry);
/// metrics.observe("GET", "10.0.0.1:6443", Some(200), Duration::from_millis(3));
/// metrics.observe("PATCH", "10.0.0.1:6443", None, Duration::from_millis(30));
/// let text = encode_text(&registry).unwrap();
/// assert!(text.contains("rest_client_requests_total{code=\"200\",method=\"GET\",host=\"10.0.0.1:6443\"} 1"));
/// assert!(text.contains("rest_client_requests_total{code=\"<error>\",method=\"PATCH\",host=\"10.0.0.1:6443\"} 1"));
/// assert!(text.contains("rest_client_request_duration_seconds_count{verb=\"GET\",host=\"10.0.0.1:6443\"} 1"));
/// ```
#[derive(Debug, Clone)]
pub struct RestClientMetrics {
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for RestClientMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl RestClientMetrics {
    /// The families, not registered yet (a client may be built before the
    /// registry exists).
    pub fn new() -> Self {
        Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
        }
    }

    /// Register both families into `registry`; clones share their counts.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            self.latency.clone(),
        );
    }

    /// Record one request: its HTTP `method`, the API server's `host`
    /// (`host:port`), the answer's status `code` (`None`: no answer, counted
    /// as client-go's `<error>`) and how long it took.
    pub fn observe(&self, method: &str, host: &str, code: Option<u16>, took: Duration) {
        let code = code.map_or_else(|| "<error>".to_owned(), |c| c.to_string());
        self.requests
            .get_or_create(&vec![
                ("code", code),
                ("method", method.to_owned()),
                ("host", host.to_owned()),
            ])
            .inc();
        self.latency
            .get_or_create(&vec![
                ("verb", method.to_owned()),
                ("host", host.to_owned()),
            ])
            .observe(took.as_secs_f64());
    }
}
