//! Admission webhooks hosted by a manager (Go's `CloudControllerManagerWebhook`):
//! named handlers of `admission.k8s.io/v1` `AdmissionReview`s, each on its
//! own path, served over TLS.
//!
//! For each request:
//! - a path no webhook serves answers 404, a method other than POST 405, a
//!   content type other than `application/json` 415, a body over 8 MiB 413;
//! - a body that is not an `AdmissionReview` with a request answers 400;
//! - a handler error answers 500 (its message in the body);
//! - otherwise 200 with the review holding the handler's response, whose
//!   `uid` is always the request's.
//!
//! Every answer is counted in `<prefix>_request_total{code,webhook}` and
//! timed in `<prefix>_request_duration_seconds{code,webhook}` (Go's CCM:
//! prefix `cloud_provider_webhook`).
//!
//! ```no_run
//! use kube::core::admission::AdmissionResponse;
//! use prometheus_client::registry::Registry;
//! use stratus_runtime::admission::{Webhook, WebhookMetrics, WebhookServer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Deny Services of type LoadBalancer without a class.
//! let webhook = Webhook::new("lb-class", "/validate-lb-class", |request| async move {
//!     let response = AdmissionResponse::from(&request);
//!     let class = request
//!         .object
//!         .as_ref()
//!         .and_then(|o| o.data.pointer("/spec/loadBalancerClass"))
//!         .and_then(|c| c.as_str());
//!     Ok(match class {
//!         Some(_) => response,
//!         None => response.deny("spec.loadBalancerClass is required"),
//!     })
//! });
//! let mut registry = Registry::default();
//! let server = WebhookServer::builder("0.0.0.0:10260".parse()?)
//!     .webhook(webhook)
//!     .metrics(WebhookMetrics::register(&mut registry, "cloud_provider_webhook"))
//!     .bind()
//!     .await?;
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! server.serve(stopped).await;
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::serving::{Listener, PLAIN, text};
use crate::tls::{ServingCertificate, TlsError};

/// The largest review body accepted.
pub const MAX_REVIEW_BYTES: usize = 8 << 20;

/// An error a handler returns; the request is answered 500.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

type Handler = Arc<
    dyn Fn(
            AdmissionRequest<DynamicObject>,
        ) -> BoxFuture<'static, Result<AdmissionResponse, HandlerError>>
        + Send
        + Sync,
>;

/// A named admission handler on a path.
#[derive(Clone)]
pub struct Webhook {
    name: String,
    path: String,
    handler: Handler,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// The webhook `name` answering reviews POSTed to `path` with
    /// `handler`.
    ///
    /// ```
    /// use kube::core::admission::AdmissionResponse;
    /// let webhook = stratus_runtime::admission::Webhook::new("allow-all", "/allow", |request| async move {
    ///     Ok(AdmissionResponse::from(&request))
    /// });
    /// assert_eq!(webhook.name(), "allow-all");
    /// assert_eq!(webhook.path(), "/allow");
    /// ```
    pub fn new<F, Fut>(name: impl Into<String>, path: impl Into<String>, handler: F) -> Self
    where
        F: Fn(AdmissionRequest<DynamicObject>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<AdmissionResponse, HandlerError>> + Send + 'static,
    {
        let mut path = path.into();
        if !path.starts_with('/') {
            path.insert(0, '/');
        }
        Self {
            name: name.into(),
            path,
            handler: Arc::new(move |request| Box::pin(handler(request))),
        }
    }

    /// Its name (what `--webhooks` selects and the metrics label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path it serves.
    pub fn path(&self) -> &str {
        &self.path
    }
}

type Labels = Vec<(&'static str, String)>;

fn duration_histogram() -> Histogram {
    Histogram::new([0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0])
}

/// Request counts and latencies of the webhooks, by HTTP code and webhook.
#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    total: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for WebhookMetrics {
    /// Unregistered families (counted, never exported).
    fn default() -> Self {
        Self {
            total: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
        }
    }
}

impl WebhookMetrics {
    /// Register `<prefix>_request_total` and
    /// `<prefix>_request_duration_seconds`.
    ///
    /// ```
    /// let mut registry = prometheus_client::registry::Registry::default();
    /// let _metrics = stratus_runtime::admission::WebhookMetrics::register(&mut registry, "cloud_provider_webhook");
    /// ```
    pub fn register(registry: &mut Registry, prefix: &str) -> Self {
        let this = Self::default();
        registry.register(
            format!("{prefix}_request"),
            "Admission webhook requests by HTTP code and webhook",
            this.total.clone(),
        );
        registry.register(
            format!("{prefix}_request_duration_seconds"),
            "Admission webhook request latency by HTTP code and webhook",
            this.duration.clone(),
        );
        this
    }

    fn observe(&self, webhook: &str, code: StatusCode, started: Instant) {
        let labels = vec![
            ("code", code.as_u16().to_string()),
            ("webhook", webhook.to_owned()),
        ];
        self.total.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }
}

/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookServerError {
    /// Two webhooks share a name or a path.
    #[error("webhook {0:?} is registered twice (by name or path)")]
    Duplicate(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The serving certificate is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Builds a [`WebhookServer`].
#[derive(Debug)]
pub struct WebhookServerBuilder {
    addr: SocketAddr,
    certificate: Option<ServingCertificate>,
    plain: bool,
    serving: crate::serving::ServingOptions,
    webhooks: Vec<Webhook>,
    metrics: WebhookMetrics,
}

impl WebhookServerBuilder {
    /// Serve `webhook` too.
    pub fn webhook(mut self, webhook: Webhook) -> Self {
        self.webhooks.push(webhook);
        self
    }

    /// Count and time requests in `metrics` (unregistered by default).
    pub fn metrics(mut self, metrics: WebhookMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Serve with this certificate instead of a self-signed one.
    pub fn certificate(mut self, certificate: ServingCertificate) -> Self {
        self.certificate = Some(certificate);
        self
    }

    /// Listen and speak under `options` (TLS policy, HTTP/2, socket
    /// sharing).
    pub fn serving(mut self, options: crate::serving::ServingOptions) -> Self {
        self.serving = options;
        self
    }

    /// Serve plain HTTP (tests only: the API server calls webhooks over
    /// TLS).
    pub fn plain_http(mut self) -> Self {
        self.plain = true;
        self
    }

    /// Check the webhooks and bind the address (port 0 picks a free one).
    pub async fn bind(self) -> Result<WebhookServer, WebhookServerError> {
        let mut by_path = BTreeMap::new();
        let mut names = std::collections::BTreeSet::new();
        for webhook in self.webhooks {
            if !names.insert(webhook.name.clone()) || by_path.contains_key(&webhook.path) {
                return Err(WebhookServerError::Duplicate(webhook.name));
            }
            by_path.insert(webhook.path.clone(), webhook);
        }
        let tls = crate::serving::acceptor_with(
            self.plain,
            self.certificate,
            None,
            "stratus-webhooks",
            &self.serving,
        )?;
        let listener = Listener::bind_with(self.addr, tls, &self.serving)
            .await
            .map_err(|source| WebhookServerError::Bind {
                addr: self.addr,
                source,
            })?;
        Ok(WebhookServer {
            listener,
            routes: Arc::new(Routes {
                by_path,
                metrics: self.metrics,
            }),
        })
    }
}

struct Routes {
    by_path: BTreeMap<String, Webhook>,
    metrics: WebhookMetrics,
}

/// A bound webhook server; [`WebhookServer::serve`] answers until stopped.
pub struct WebhookServer {
    listener: Listener,
    routes: Arc<Routes>,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("addr", &self.listener.local_addr())
            .field("paths", &self.routes.by_path.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl WebhookServer {
    /// A builder for `addr` (Go's CCM: `--webhook-bind-address`:
    /// `--webhook-secure-port`, 0.0.0.0:10260).
    pub fn builder(addr: SocketAddr) -> WebhookServerBuilder {
        WebhookServerBuilder {
            addr,
            certificate: None,
            plain: false,
            serving: Default::default(),
            webhooks: Vec::new(),
            metrics: WebhookMetrics::default(),
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Answer reviews until `stop` becomes true.
    pub async fn serve(self, stop: watch::Receiver<bool>) {
        let routes = self.routes;
        let handler: crate::serving::Handler = Arc::new(move |req| {
            let routes = routes.clone();
            Box::pin(async move { answer(&routes, req).await })
        });
        self.listener.serve(stop, handler).await
    }
}

async fn answer(routes: &Routes, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(webhook) = routes.by_path.get(req.uri().path()) else {
        return text(StatusCode::NOT_FOUND, PLAIN, "404 page not found\n".into());
    };
    let started = Instant::now();
    let response = review(webhook, req).await;
    routes
        .metrics
        .observe(&webhook.name, response.status(), started);
    response
}

async fn review(webhook: &Webhook, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let fail = |status: StatusCode, message: String| {
        tracing::warn!(webhook = %webhook.name, %status, %message, "admission review refused");
        text(status, PLAIN, format!("{message}\n"))
    };
    if req.method() != Method::POST {
        return fail(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{} is not allowed; POST an AdmissionReview", req.method()),
        );
    }
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        return fail(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("content type {content_type:?} is not supported; expected application/json"),
        );
    }
    let body = match Limited::new(req.into_body(), MAX_REVIEW_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the review is larger than {MAX_REVIEW_BYTES} bytes"),
            );
        }
        Err(e) => {
            return fail(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            );
        }
    };
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                StatusCode::BAD_REQUEST,
                format!("the body is not an AdmissionReview: {e}"),
            );
        }
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(_) => {
            return fail(
                StatusCode::BAD_REQUEST,
                "the AdmissionReview has no request".into(),
            );
        }
    };
    let uid = request.uid.clone();
    let mut response = match (webhook.handler)(request).await {
        Ok(r) => r,
        Err(e) => {
            return fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("webhook {:?} failed: {e}", webhook.name),
            );
        }
    };
    response.uid = uid;
    match serde_json::to_string(&response.into_review()) {
        Ok(body) => text(StatusCode::OK, "application/json", body),
        Err(e) => fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the response: {e}"),
        ),
    }
}
