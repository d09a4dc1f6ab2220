//! API client setup: a `kube::Client` with a client-side request budget
//! (client-go's QPS and burst) and a user agent.
//!
//! The budget is a token bucket shared by every clone of the client:
//! `burst` requests may go at once, then `qps` per second. A watch costs
//! one token when it starts, as in client-go. The Go managers default to
//! 20 QPS / 30 burst (`--kube-api-qps`, `--kube-api-burst`).
//!
//! ```no_run
//! use stratus_runtime::client::{ClientOptions, build_client};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = kube::Config::infer().await?;
//! let client = build_client(config, &ClientOptions::new("my-cloud-controller-manager"))?;
//! # let _ = client;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT;
use kube::client::ClientBuilder;
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

use crate::metrics::RestClientMetrics;

mod service_account;

pub use service_account::{TOKEN_EXPIRATION, service_account_client};

/// How the client talks to the API server.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Sustained requests per second (`--kube-api-qps`). Zero or less means
    /// no limit.
    pub qps: f32,
    /// Requests allowed at once above the sustained rate
    /// (`--kube-api-burst`).
    pub burst: u32,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// Count and time every request in client-go's `rest_client_*`
    /// families.
    pub metrics: Option<RestClientMetrics>,
}

impl ClientOptions {
    /// The Go cloud-controller-manager's budget (20 QPS, burst 30) and the
    /// user agent `<component>/<version of this crate>`.
    pub fn new(component: &str) -> Self {
        Self {
            qps: 20.0,
            burst: 30,
            user_agent: format!("{component}/v{}", env!("CARGO_PKG_VERSION")),
            metrics: None,
        }
    }
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The user agent is not a valid header value.
    #[error("invalid user agent {0:?}: not a valid HTTP header value")]
    UserAgent(String),
    /// The burst is zero while a QPS limit is set: no request could ever go.
    #[error("invalid client budget: burst must be at least 1 when qps ({0}) is set")]
    ZeroBurst(f32),
    /// kube could not build the client from the configuration.
    #[error("cannot build the API client: {0}")]
    Kube(#[from] kube::Error),
    /// The ServiceAccount or its token could not be made.
    #[error("ServiceAccount {account}: {source}")]
    ServiceAccount {
        /// `namespace/name`.
        account: String,
        /// Why.
        source: kube::Error,
    },
}

/// A `kube::Client` for `config` with the budget and user agent of
/// `options`.
pub fn build_client(
    config: kube::Config,
    options: &ClientOptions,
) -> Result<kube::Client, ClientError> {
    build_client_with(config, options, None)
}

/// [`build_client`], with a bearer token set on each request.
fn build_client_with(
    mut config: kube::Config,
    options: &ClientOptions,
    bearer: Option<service_account::BearerLayer>,
) -> Result<kube::Client, ClientError> {
    let agent = HeaderValue::from_str(&options.user_agent)
        .map_err(|_| ClientError::UserAgent(options.user_agent.clone()))?;
    config.headers.retain(|(name, _)| name != USER_AGENT);
    config.headers.push((USER_AGENT, agent));
    if options.qps > 0.0 && options.burst == 0 {
        return Err(ClientError::ZeroBurst(options.qps));
    }
    let host: Arc<str> = config
        .cluster_url
        .authority()
        .map_or_else(String::new, |a| a.to_string())
        .into();
    let builder = ClientBuilder::try_from(config)?;
    let limit = (options.qps > 0.0).then(|| RateLimitLayer::new(options.qps, options.burst));
    // The metrics layer is outermost of ours: its latency includes the
    // wait for a token, as client-go's (measured around the rate limiter).
    let observed = ObservedLayer {
        metrics: options.metrics.clone(),
        host,
    };
    Ok(match (bearer, limit) {
        (Some(bearer), Some(limit)) => builder
            .with_layer(&bearer)
            .with_layer(&limit)
            .with_layer(&observed)
            .build(),
        (Some(bearer), None) => builder.with_layer(&bearer).with_layer(&observed).build(),
        (None, Some(limit)) => builder.with_layer(&limit).with_layer(&observed).build(),
        (None, None) => builder.with_layer(&observed).build(),
    })
}

/// Counts and times each request into [`RestClientMetrics`] (nothing when
/// the options have none).
#[derive(Debug, Clone)]
struct ObservedLayer {
    metrics: Option<RestClientMetrics>,
    host: Arc<str>,
}

impl<S> Layer<S> for ObservedLayer {
    type Service = Observed<S>;

    fn layer(&self, inner: S) -> Observed<S> {
        Observed {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// The service of [`ObservedLayer`].
#[derive(Debug, Clone)]
struct Observed<S> {
    inner: S,
    metrics: Option<RestClientMetrics>,
    host: Arc<str>,
}

impl<S, B, RB> Service<http::Request<B>> for Observed<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ObservedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().clone();
        ObservedFuture {
            inner: Box::pin(self.inner.call(request)),
            record: self.metrics.clone().map(|metrics| Record {
                metrics,
                method,
                host: self.host.clone(),
                started: Instant::now(),
            }),
        }
    }
}

/// What [`ObservedFuture`] records once the answer is in.
struct Record {
    metrics: RestClientMetrics,
    method: http::Method,
    host: Arc<str>,
    started: Instant,
}

/// A request on its way: records its code and latency when it ends.
struct ObservedFuture<F> {
    inner: Pin<Box<F>>,
    record: Option<Record>,
}

impl<F, RB, E> Future for ObservedFuture<F>
where
    F: Future<Output = Result<http::Response<RB>, E>>,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = ready!(self.inner.as_mut().poll(cx));
        if let Some(r) = self.record.take() {
            let code = out.as_ref().ok().map(|response| response.status().as_u16());
            r.metrics
                .observe(r.method.as_str(), &r.host, code, r.started.elapsed());
        }
        Poll::Ready(out)
    }
}

/// A token bucket with golang.org/x/time/rate's reservation semantics: a
/// request takes a token now and, if the bucket is empty, waits for the
/// time the token will have been earned.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `qps` per second.
    pub fn new(qps: f32, burst: u32) -> Self {
        Self {
            qps: f64::from(qps),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: Instant::now(),
        }
    }

    /// Take a token at `now`; the answer is how long to wait before using
    /// it (zero when one was available).
    ///
    /// ```
    /// use std::time::Duration;
    /// use stratus_runtime::client::TokenBucket;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
    /// let now = tokio::time::Instant::now();
    /// let mut bucket = TokenBucket::new(10.0, 2);
    /// assert_eq!(bucket.reserve(now), Duration::ZERO);
    /// assert_eq!(bucket.reserve(now), Duration::ZERO);
    /// assert_eq!(bucket.reserve(now), Duration::from_millis(100));
    /// assert_eq!(bucket.reserve(now), Duration::from_millis(200));
    /// # });
    /// ```
    pub fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// The tower layer that spends one token of a shared [`TokenBucket`] per
/// request.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl RateLimitLayer {
    /// A layer with its own bucket of `burst` tokens refilled at `qps`.
    pub fn new(qps: f32, burst: u32) -> Self {
        Self {
            bucket: Arc::new(Mutex::new(TokenBucket::new(qps, burst))),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The service of [`RateLimitLayer`]: not ready until a token is earned.
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    wait: Option<Pin<Box<Sleep>>>,
    permitted: bool,
}

impl<S> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("permitted", &self.permitted)
            .finish_non_exhaustive()
    }
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if self.wait.is_none() {
                let now = Instant::now();
                let delay = self
                    .bucket
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .reserve(now);
                if delay.is_zero() {
                    self.permitted = true;
                } else {
                    self.wait = Some(Box::pin(tokio::time::sleep_until(now + delay)));
                }
            }
            if let Some(wait) = self.wait.as_mut() {
                ready!(wait.as_mut().poll(cx));
                self.wait = None;
                self.permitted = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}
