//! The admin server of a manager: `/healthz` (and `/healthz/<check>`),
//! `/livez`, `/readyz`, `/metrics` and `/configz`, over TLS (self-signed in
//! memory by default, as Go's managers on `--secure-port`), HTTP/1.1 and
//! HTTP/2.
//!
//! - `/healthz`, `/livez`: the health checks; `ok`, or 500 listing the
//!   failed checks (reasons withheld, as Kubernetes does); `?verbose` lists
//!   every check. `/healthz/<name>`: one check, 404 if unknown.
//! - `/readyz`: the readiness checks (the health checks if none are given).
//! - `/metrics`: the prometheus-client registry, OpenMetrics text.
//! - `/configz`: the configuration document the manager gives.
//!
//! With [`AdminServerBuilder::auth`], requests are authenticated and
//! authorized through the API server first (Go's managers: `/healthz`,
//! `/readyz` and `/livez` open, the rest behind an access review): 401
//! without acceptable credentials, 403 when not allowed.
//!
//! ```no_run
//! use stratus_runtime::admin::AdminServer;
//! use stratus_runtime::health::HealthChecks;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let checks = HealthChecks::new();
//! let server = AdminServer::builder("0.0.0.0:10258".parse()?)
//!     .health(checks)
//!     .bind()
//!     .await?;
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! server.serve(stopped).await;
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::auth::{Decision, DelegatedAuth};
use crate::health::{HealthChecks, HealthReport};
use crate::serving::{Listener, PLAIN, text};
use crate::tls::{ServingCertificate, TlsError};

/// Why the admin server could not start.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
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

/// What the admin server serves.
#[derive(Clone)]
struct Routes {
    health: HealthChecks,
    readiness: Option<HealthChecks>,
    registry: Option<Arc<Registry>>,
    metrics_filter: crate::metrics::MetricsFilter,
    configz: Configz,
    auth: Option<DelegatedAuth>,
}

/// The `/configz` document, shared: the server answers whatever it holds
/// when asked (a manager records there which controllers started).
///
/// ```
/// use stratus_runtime::admin::Configz;
///
/// let configz = Configz::new(serde_json::json!({"a": {"b": 1}}));
/// configz.update(|doc| doc["a"]["c"] = serde_json::json!(true));
/// assert_eq!(configz.get(), serde_json::json!({"a": {"b": 1, "c": true}}));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Configz(Arc<std::sync::RwLock<serde_json::Value>>);

impl Configz {
    /// A document holding `value`.
    pub fn new(value: serde_json::Value) -> Self {
        Self(Arc::new(std::sync::RwLock::new(value)))
    }

    /// Change the document.
    pub fn update(&self, change: impl FnOnce(&mut serde_json::Value)) {
        change(&mut self.0.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// The document now.
    pub fn get(&self) -> serde_json::Value {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Builds an [`AdminServer`].
pub struct AdminServerBuilder {
    addr: SocketAddr,
    certificate: Option<ServingCertificate>,
    client_ca: Option<String>,
    plain: bool,
    serving: crate::serving::ServingOptions,
    routes: Routes,
}

impl std::fmt::Debug for AdminServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServerBuilder")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl AdminServerBuilder {
    /// Serve with this certificate (from files) instead of a self-signed one.
    pub fn certificate(mut self, certificate: ServingCertificate) -> Self {
        self.certificate = Some(certificate);
        self
    }

    /// Authenticate and authorize requests through the API server (paths
    /// outside the always-allow list need an allowing access review).
    /// Without it, every request is served.
    pub fn auth(mut self, auth: DelegatedAuth) -> Self {
        self.routes.auth = Some(auth);
        self
    }

    /// Ask clients for certificates and accept those signed by these CA
    /// certificates (PEM) as their identity (see [`auth`](crate::auth)).
    pub fn client_ca(mut self, pem: impl Into<String>) -> Self {
        self.client_ca = Some(pem.into());
        self
    }

    /// Listen and speak under `options` (TLS policy, HTTP/2, socket
    /// sharing).
    pub fn serving(mut self, options: crate::serving::ServingOptions) -> Self {
        self.serving = options;
        self
    }

    /// Serve plain HTTP (tests, or behind a TLS-terminating proxy).
    pub fn plain_http(mut self) -> Self {
        self.plain = true;
        self
    }

    /// The checks of `/healthz` and `/livez`.
    pub fn health(mut self, checks: HealthChecks) -> Self {
        self.routes.health = checks;
        self
    }

    /// The checks of `/readyz` (the health checks by default).
    pub fn readiness(mut self, checks: HealthChecks) -> Self {
        self.routes.readiness = Some(checks);
        self
    }

    /// The registry `/metrics` encodes.
    pub fn registry(mut self, registry: Arc<Registry>) -> Self {
        self.routes.registry = Some(registry);
        self
    }

    /// Leave out or rewrite metrics in `/metrics` (`--disabled-metrics`,
    /// `--allow-metric-labels`).
    pub fn metrics_filter(mut self, filter: crate::metrics::MetricsFilter) -> Self {
        self.routes.metrics_filter = filter;
        self
    }

    /// The document `/configz` answers.
    pub fn configz(mut self, config: serde_json::Value) -> Self {
        self.routes.configz = Configz::new(config);
        self
    }

    /// The shared document `/configz` answers (changes show at once).
    pub fn shared_configz(mut self, configz: Configz) -> Self {
        self.routes.configz = configz;
        self
    }

    /// Bind the address (port 0 picks a free one).
    pub async fn bind(self) -> Result<AdminServer, AdminError> {
        let tls = crate::serving::acceptor_with(
            self.plain,
            self.certificate,
            self.client_ca.as_deref(),
            "stratus-manager",
            &self.serving,
        )?;
        let listener = Listener::bind_with(self.addr, tls, &self.serving)
            .await
            .map_err(|source| AdminError::Bind {
                addr: self.addr,
                source,
            })?;
        Ok(AdminServer {
            listener,
            routes: self.routes,
        })
    }
}

/// A bound admin server; [`AdminServer::serve`] answers until stopped.
pub struct AdminServer {
    listener: Listener,
    routes: Routes,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("addr", &self.listener.local_addr())
            .field("tls", &self.listener.is_tls())
            .finish_non_exhaustive()
    }
}

impl AdminServer {
    /// A builder for `addr` (Go's CCM: `--bind-address`:`--secure-port`,
    /// 0.0.0.0:10258).
    pub fn builder(addr: SocketAddr) -> AdminServerBuilder {
        AdminServerBuilder {
            addr,
            certificate: None,
            client_ca: None,
            plain: false,
            serving: Default::default(),
            routes: Routes {
                health: HealthChecks::new(),
                readiness: None,
                registry: None,
                metrics_filter: Default::default(),
                configz: Configz::new(serde_json::json!({})),
                auth: None,
            },
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Answer requests until `stop` becomes true.
    pub async fn serve(self, stop: watch::Receiver<bool>) {
        let routes = Arc::new(self.routes);
        let handler: crate::serving::Handler = Arc::new(move |req| {
            let routes = routes.clone();
            Box::pin(async move {
                if let Some(auth) = &routes.auth {
                    let refused = match auth.check(&req, None).await {
                        Decision::Allowed(_) => None,
                        Decision::Unauthorized(why) => Some((StatusCode::UNAUTHORIZED, why)),
                        Decision::Forbidden(why) => Some((StatusCode::FORBIDDEN, why)),
                        Decision::Error(why) => Some((StatusCode::INTERNAL_SERVER_ERROR, why)),
                    };
                    if let Some((status, why)) = refused {
                        tracing::debug!(path = req.uri().path(), %status, %why, "admin request refused");
                        return text(status, PLAIN, format!("{why}\n"));
                    }
                }
                answer(&routes, &req)
            })
        });
        self.listener.serve(stop, handler).await
    }
}

fn checks_answer(report: HealthReport, verbose: bool) -> Response<Full<Bytes>> {
    for (name, result) in &report.results {
        if let Err(reason) = result {
            tracing::warn!(check = %name, %reason, "health check failed");
        }
    }
    let status = if report.healthy() {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    text(status, PLAIN, report.render(verbose))
}

fn answer(routes: &Routes, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "method not allowed\n".into(),
        );
    }
    let verbose = req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    let path = req.uri().path().trim_end_matches('/');
    match path {
        "/healthz" | "/livez" => checks_answer(routes.health.report(), verbose),
        "/readyz" => checks_answer(
            routes
                .readiness
                .as_ref()
                .unwrap_or(&routes.health)
                .readiness_report(),
            verbose,
        ),
        "/metrics" => match &routes.registry {
            Some(registry) => match crate::metrics::encode_text(registry) {
                Ok(body) => text(
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    routes.metrics_filter.apply(&body),
                ),
                Err(_) => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    PLAIN,
                    "could not encode the metrics\n".into(),
                ),
            },
            None => text(StatusCode::NOT_FOUND, PLAIN, "404 page not found\n".into()),
        },
        "/configz" => text(
            StatusCode::OK,
            "application/json",
            routes.configz.get().to_string(),
        ),
        _ => {
            let one = ["/healthz/", "/livez/", "/readyz/"]
                .iter()
                .find_map(|prefix| path.strip_prefix(prefix));
            let checks = if path.starts_with("/readyz/") {
                routes.readiness.as_ref().unwrap_or(&routes.health)
            } else {
                &routes.health
            };
            match one.map(|name| (name, checks.check(name))) {
                Some((_, Some(Ok(())))) => text(StatusCode::OK, PLAIN, "ok".into()),
                Some((name, None)) if path.starts_with("/readyz/") => {
                    match checks.not_started_reason(name) {
                        Some(reason) => {
                            text(StatusCode::OK, PLAIN, format!("not started: {reason}\n"))
                        }
                        None => text(StatusCode::NOT_FOUND, PLAIN, "404 page not found\n".into()),
                    }
                }
                // As Kubernetes: one check's own path says why it failed.
                Some((name, Some(Err(reason)))) => {
                    tracing::warn!(check = %name, %reason, "health check failed");
                    text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        PLAIN,
                        format!("internal server error: {reason}\n"),
                    )
                }
                _ => text(StatusCode::NOT_FOUND, PLAIN, "404 page not found\n".into()),
            }
        }
    }
}
