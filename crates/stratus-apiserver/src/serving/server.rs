//! The server itself: [`ApiServerBuilder`], [`ApiServer`] and the handles
//! tests hold on it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use stratus_accept::{Acceptor, ConnectionLimits};
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

use super::keys::Keys;
use crate::auth::rbac;
use crate::rest::write;
use crate::serving::{http, tls};
use crate::state::{Inner, Query, ResourceRequest, Settings};
use crate::{AccessRequest, Fault, RequestRecord, ReviewUser, Verb};

/// Why the server could not start or act.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiServerError {
    /// The listening socket could not be bound.
    #[error("could not bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `kube::Client` could not be built.
    #[error("could not build a client: {0}")]
    Client(String),
    /// An object could not be seeded.
    #[error("could not seed {what}: {message}")]
    Seed {
        /// The object.
        what: String,
        /// The API error message.
        message: String,
    },
    /// The serving certificate could not be made.
    #[error("{0}")]
    Tls(String),
    /// Writing the kubeconfig failed.
    #[error("could not write the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Builds an [`ApiServer`].
#[derive(Debug, Clone)]
pub struct ApiServerBuilder {
    addr: SocketAddr,
    settings: Settings,
    tls: bool,
    connections: ConnectionLimits,
}

impl Default for ApiServerBuilder {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            settings: Settings::default(),
            tls: false,
            connections: ConnectionLimits::default(),
        }
    }
}

impl ApiServerBuilder {
    /// Listen on `addr` (default `127.0.0.1:0`, a free port).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Keep at most this many events for watch resumption (default
    /// 100,000); older resumes get 410 Gone.
    pub fn history(mut self, events: usize) -> Self {
        self.settings.history = events;
        self
    }

    /// Keep at most this many bytes of events for watch resumption
    /// of resident memory (default 256 MiB; each event counted as its
    /// object's estimated memory, parsed and serialized, with a quarter
    /// more for the allocator's fragmentation); older resumes get 410 Gone. With [`history`](Self::history), whichever is reached first
    /// drops the oldest events.
    pub fn history_bytes(mut self, bytes: usize) -> Self {
        self.settings.history_bytes = bytes;
        self
    }

    /// Keep at most this many bytes of resident memory of
    /// [`ApiServer::requests`] records (default 32 MiB, some 55,000
    /// records); the oldest are dropped past it.
    pub fn request_log_bytes(mut self, bytes: usize) -> Self {
        self.settings.request_log_bytes = bytes;
        self
    }

    /// Send bookmarks this often to watches that allow them (default 5 s).
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.settings.bookmark_interval = every;
        self
    }

    /// Refuse request bodies larger than this (default 3 MiB, as
    /// kube-apiserver).
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.settings.max_body = bytes;
        self
    }

    /// Authenticate and authorize as a cluster with `--authorization-mode=RBAC`
    /// (off by default): the kubeconfig's token is the administrator
    /// (`kubernetes-admin` in `system:masters`), tokens from TokenRequest and
    /// [`ApiServer::add_token`] are their users, an unknown token is 401, no
    /// token is `system:anonymous`; Roles, ClusterRoles and their bindings
    /// decide every request (403 with kube-apiserver's message), and
    /// SubjectAccessReviews answer from them. The bootstrap ClusterRoles
    /// (`cluster-admin`, `system:discovery`, `system:basic-user`,
    /// `system:public-info-viewer`, `system:auth-delegator`, `admin` / `edit`
    /// / `view`) and their bindings exist at start.
    ///
    /// RBAC turns [`tls`](Self::tls) on as well: client-go (and so kubectl)
    /// sends a kubeconfig's token only over TLS, so over plain HTTP every
    /// kubectl call would be anonymous.
    pub fn rbac(mut self) -> Self {
        self.settings.rbac = true;
        self.tls = true;
        self
    }

    /// Serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN) with a certificate for
    /// 127.0.0.1, ::1 and localhost, signed by a fresh self-signed CA that
    /// [`ApiServer::ca_pem`], the kubeconfig and [`ApiServer::client`] use.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// How many connections at once and how long a client may take to
    /// finish its TLS handshake, send its first request and each request's
    /// header (default [`ConnectionLimits::default`]: kube-apiserver's 32 s
    /// header timeout).
    pub fn connections(mut self, limits: ConnectionLimits) -> Self {
        self.connections = limits;
        self
    }

    /// Start serving.
    pub async fn start(self) -> Result<ApiServer, ApiServerError> {
        let rbac = self.settings.rbac;
        let inner = Inner::new(self.settings);
        let keys = Keys::new().map_err(ApiServerError::Tls)?;
        let tls = match self.tls {
            true => Some(Arc::new(
                tls::self_signed(keys.client_ca_pem()).map_err(ApiServerError::Tls)?,
            )),
            false => None,
        };
        seed_defaults(&inner, keys.client_ca_pem())?;
        if rbac {
            for object in rbac::bootstrap() {
                create_json(&inner, object)?;
            }
        }
        let listener =
            TcpListener::bind(self.addr)
                .await
                .map_err(|source| ApiServerError::Bind {
                    addr: self.addr,
                    source,
                })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ApiServerError::Bind {
                addr: self.addr,
                source,
            })?;
        let (generation, _) = tokio_watch::channel(0u64);
        let task = spawn_serving(
            inner.clone(),
            keys.clone(),
            Acceptor::new(listener, self.connections.clone()),
            addr,
            generation.subscribe(),
            tls.clone(),
            self.connections.clone(),
        );
        Ok(ApiServer {
            inner,
            keys,
            addr,
            task: Some(task),
            generation,
            tls,
            connections: self.connections,
        })
    }
}

/// The ConfigMap in `kube-system` holding the client CA (`client-ca-file`),
/// as kube-apiserver publishes it.
const EXTENSION_APISERVER_AUTHENTICATION: &str = "extension-apiserver-authentication";

fn seed_defaults(inner: &Inner, client_ca_pem: &str) -> Result<(), ApiServerError> {
    for object in crate::flowcontrol::bootstrap() {
        create_json(inner, object)?;
    }
    for ns in write::SYSTEM_NAMESPACES {
        create_json(
            inner,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )?;
    }
    // What kube-apiserver publishes for the servers it delegates
    // authentication to (aggregated API servers, kubelets, cloud
    // controller managers): the CA of the client certificates it accepts,
    // which also signed the one it presents to kubelets.
    create_json(
        inner,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": EXTENSION_APISERVER_AUTHENTICATION, "namespace": "kube-system"},
            "data": {"client-ca-file": client_ca_pem}
        }),
    )?;
    create_json(
        inner,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}
        }),
    )?;
    Ok(())
}

/// Create an object from JSON through the normal create path.
fn create_json(inner: &Inner, obj: Value) -> Result<Value, ApiServerError> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let what = format!("{api_version} {kind}");
    let def = inner
        .defs()
        .find_kind(&api_version, &kind)
        .ok_or_else(|| ApiServerError::Seed {
            what: what.clone(),
            message: "unknown kind".into(),
        })?;
    let namespace = inner.defs().get(def).namespaced.then(|| {
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned()
    });
    let req = ResourceRequest {
        def,
        namespace,
        name: None,
        sub: None,
        query: Query::parse(Some("fieldManager=stratus-harness")),
        user_agent: "stratus-harness".into(),
        user: None,
        warnings: Default::default(),
        conversion: None,
    };
    let body = serde_json::to_vec(&obj).unwrap_or_default();
    write::create(inner, &req, &body)
        .map(|(_, v)| v)
        .map_err(|e| ApiServerError::Seed {
            what,
            message: e.message,
        })
}

fn spawn_serving(
    inner: Arc<Inner>,
    keys: Arc<Keys>,
    acceptor: Acceptor,
    addr: SocketAddr,
    mut generation: tokio_watch::Receiver<u64>,
    tls: Option<Arc<tls::ServingCert>>,
    limits: ConnectionLimits,
) -> JoinHandle<()> {
    let tls_acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.config.clone()));
    let host: Arc<str> = Arc::from(addr.to_string());
    let builder = stratus_accept::http_builder(&limits);
    tokio::spawn(async move {
        let mut closing = inner.closing().subscribe();
        loop {
            let connection = tokio::select! {
                c = acceptor.accept() => c,
                _ = generation.changed() => break,
                _ = closing.changed() => break,
            };
            let (inner, keys) = (inner.clone(), keys.clone());
            let host = host.clone();
            let tls_acceptor = tls_acceptor.clone();
            let (builder, limits) = (builder.clone(), limits.clone());
            let mut conn_generation = generation.clone();
            let mut conn_closing = inner.closing().subscribe();
            tokio::spawn(async move {
                let service = |peer: Option<Arc<crate::ReviewUser>>| {
                    hyper::service::service_fn(move |req| {
                        let (inner, keys) = (inner.clone(), keys.clone());
                        let host = host.clone();
                        let peer = peer.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                http::handle(inner, keys, req, host, peer).await,
                            )
                        }
                    })
                };
                let stream = connection.stream;
                let serve = async move {
                    match tls_acceptor {
                        Some(tls_acceptor) => {
                            // A failed or timed-out handshake closes only
                            // this connection.
                            if let Ok(tls_stream) =
                                stratus_accept::handshake(&tls_acceptor, stream, &limits).await
                            {
                                let peer = tls_stream
                                    .get_ref()
                                    .1
                                    .peer_certificates()
                                    .and_then(|chain| chain.first())
                                    .and_then(|leaf| tls::user_of_certificate(leaf.as_ref()).ok())
                                    .map(Arc::new);
                                let _ = stratus_accept::serve_connection(
                                    &builder,
                                    TokioIo::new(tls_stream),
                                    service(peer),
                                    &limits,
                                )
                                .await;
                            }
                        }
                        None => {
                            let _ = stratus_accept::serve_connection(
                                &builder,
                                TokioIo::new(stream),
                                service(None),
                                &limits,
                            )
                            .await;
                        }
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = conn_generation.changed() => {}
                    _ = conn_closing.changed() => {}
                }
                drop(connection.permit);
            });
        }
    })
}

/// Signs certificate requests with the harness's CA.
#[derive(Clone)]
pub struct CaSigner {
    keys: Arc<Keys>,
}

impl std::fmt::Debug for CaSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaSigner").finish_non_exhaustive()
    }
}

impl CaSigner {
    /// Sign a PEM certificate signing request, valid for `validity`: the
    /// certificate, PEM.
    pub fn sign(&self, csr_pem: &str, validity: Duration) -> Result<String, ApiServerError> {
        self.keys
            .kubelet
            .ca
            .sign_request(csr_pem, validity)
            .map_err(|e| ApiServerError::Tls(e.to_string()))
    }
}

/// A running in-memory API server. Dropping it stops it.
pub struct ApiServer {
    pub(crate) inner: Arc<Inner>,
    /// Serving's own keys (kubelet client, token signer).
    keys: Arc<Keys>,
    addr: SocketAddr,
    task: Option<JoinHandle<()>>,
    generation: tokio_watch::Sender<u64>,
    tls: Option<Arc<tls::ServingCert>>,
    connections: ConnectionLimits,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ApiServer {
    /// Start a server on a free port of 127.0.0.1 with the defaults.
    pub async fn start() -> Result<Self, ApiServerError> {
        ApiServerBuilder::default().start().await
    }

    /// A builder for other settings.
    pub fn builder() -> ApiServerBuilder {
        ApiServerBuilder::default()
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server URL, `http://127.0.0.1:PORT` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The PEM of the CA that signed the serving certificate (TLS only).
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_deref().map(|t| t.ca_pem.as_str())
    }

    /// The PEM of the CA that signed the certificate the server presents to
    /// kubelets when it proxies `pods/log`, `exec`, `attach`,
    /// `portforward` and `nodes/proxy` (user
    /// [`KUBELET_CLIENT_USER`](crate::KUBELET_CLIENT_USER), group `system:masters`). A kubelet API
    /// trusts it as its client CA. The server publishes it, as
    /// kube-apiserver does, as `client-ca-file` of the ConfigMap
    /// `kube-system/extension-apiserver-authentication`.
    pub fn kubelet_client_ca_pem(&self) -> &str {
        self.keys.client_ca_pem()
    }

    /// A client certificate and key (PEM) for `user` in `groups` (at most
    /// one: the certificate library writes one organization per subject),
    /// signed by the [`kubelet_client_ca_pem`](Self::kubelet_client_ca_pem)
    /// CA: how tests call a kubelet API, or this server, as someone else.
    pub fn issue_client_certificate(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(String, String), ApiServerError> {
        self.keys
            .kubelet
            .ca
            .issue_client(user, groups)
            .map_err(|e| ApiServerError::Tls(e.to_string()))
    }

    /// The harness's CA as a signer of certificate requests (the CA of
    /// [`kubelet_client_ca_pem`](Self::kubelet_client_ca_pem)), usable
    /// from other tasks. Used by `stratus_testing::csr_signer`.
    pub fn ca_signer(&self) -> CaSigner {
        CaSigner {
            keys: self.keys.clone(),
        }
    }

    /// A `kube::Client` for this server (trusting its CA when serving TLS).
    ///
    /// # Panics
    ///
    /// If the client cannot be built (the TLS stack fails to initialize); a
    /// test helper, so it fails loudly. Use [`ApiServer::try_client`] to
    /// handle the error.
    pub fn client(&self) -> kube::Client {
        self.try_client()
            .unwrap_or_else(|e| panic!("harness client: {e}"))
    }

    /// A `kube::Client` for this server, or why not.
    pub fn try_client(&self) -> Result<kube::Client, ApiServerError> {
        kube::Client::try_from(self.config()?).map_err(|e| ApiServerError::Client(e.to_string()))
    }

    /// A `kube::Client` for this server that presents the bearer `token`
    /// (a ServiceAccount's token from TokenRequest, or one given to
    /// [`ApiServer::add_token`]) instead of the administrator's.
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client, ApiServerError> {
        let mut config = self.config()?;
        config.auth_info.token = Some(token.to_owned().into());
        kube::Client::try_from(config).map_err(|e| ApiServerError::Client(e.to_string()))
    }

    /// The `kube::Config` of this server (its URL, and its CA when serving
    /// TLS), for code that builds its own client.
    pub fn config(&self) -> Result<kube::Config, ApiServerError> {
        let url = self
            .url()
            .parse()
            .map_err(|e| ApiServerError::Client(format!("{e}")))?;
        let mut config = kube::Config::new(url);
        // The administrator's token (what the kubeconfig holds).
        config.auth_info.token = Some(rbac::ADMIN_TOKEN.to_owned().into());
        if let Some(tls) = &self.tls {
            config.root_cert = Some(vec![tls.ca_der.clone()]);
        }
        Ok(config)
    }

    /// A kubeconfig (YAML) pointing at this server, for kubectl (as the
    /// administrator).
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_with_token(rbac::ADMIN_TOKEN)
    }

    /// A kubeconfig (YAML) pointing at this server whose user is the bearer
    /// `token` (a ServiceAccount's token from TokenRequest, or one given to
    /// [`ApiServer::add_token`]): with [`ApiServerBuilder::rbac`], a program
    /// run with it has exactly the permissions bound to that identity.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        use base64::Engine as _;
        let ca = match self.ca_pem() {
            Some(pem) => format!(
                "\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(pem)
            ),
            None => String::new(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stratus\n  cluster:\n    server: {url}{ca}\ncontexts:\n- name: stratus\n  context:\n    cluster: stratus\n    user: stratus\n    namespace: default\ncurrent-context: stratus\nusers:\n- name: stratus\n  user:\n    token: {token}\n",
            url = self.url(),
        )
    }

    /// Write [`ApiServer::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), ApiServerError> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig()).map_err(|source| ApiServerError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })
    }

    /// Create an object (any served kind, as JSON with `apiVersion` and
    /// `kind`) through the normal create path, with the field manager
    /// `stratus-harness`.
    pub fn seed(&self, object: Value) -> Result<Value, ApiServerError> {
        create_json(&self.inner, object)
    }

    /// Create a typed object through the normal create path.
    pub fn seed_typed<K: serde::Serialize + kube::Resource<DynamicType = ()>>(
        &self,
        object: &K,
    ) -> Result<Value, ApiServerError> {
        let mut value = serde_json::to_value(object).map_err(|e| ApiServerError::Seed {
            what: K::kind(&()).into_owned(),
            message: e.to_string(),
        })?;
        value["apiVersion"] = json!(K::api_version(&()));
        value["kind"] = json!(K::kind(&()));
        self.seed(value)
    }

    /// How many logged requests on `resource` (`nodes`, `nodes/status`, ...)
    /// were answered with `status`, for `verb` or any verb: how a test checks
    /// that the faults it injected were hit.
    pub fn answered(&self, verb: Option<Verb>, resource: &str, status: u16) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                r.resource == resource && r.status == status && verb.is_none_or(|v| r.verb == v)
            })
            .count()
    }

    /// Every request served so far: the newest within the log's budget
    /// ([`ApiServerBuilder::request_log_bytes`]).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.log().snapshot()
    }

    /// The requests refused so far for want of authentication or
    /// permission (401, 403), formatted to name what was missing: with
    /// [`ApiServerBuilder::rbac`], a test fails on any of them to prove a
    /// program needs nothing beyond the roles it ships.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let server = stratus_apiserver::ApiServer::builder().rbac().start().await.unwrap();
    /// assert!(server.refused_requests().is_empty());
    /// # });
    /// ```
    pub fn refused_requests(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.status == 401 || r.status == 403)
            .map(|r| {
                format!(
                    "{} {:?} {} by {:?} ({})",
                    r.status, r.verb, r.resource, r.user, r.user_agent
                )
            })
            .collect()
    }

    /// A token of the ServiceAccount `namespace/name` (TokenRequest, one
    /// hour), for a kubeconfig ([`ApiServer::kubeconfig_with_token`]) or a
    /// client that acts as that account.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, ApiServerError> {
        let client = self.try_client()?;
        let request = ::http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        ))
        .header("Content-Type", "application/json")
        .body(
            br#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}"#
                .to_vec(),
        )
        .map_err(|e| ApiServerError::Client(e.to_string()))?;
        let answer: Value = client
            .request(request)
            .await
            .map_err(|e| ApiServerError::Client(e.to_string()))?;
        answer
            .pointer("/status/token")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ApiServerError::Client(format!("no token for {namespace}/{name}")))
    }

    /// Requests served so far, by verb.
    pub fn request_counts(&self) -> BTreeMap<Verb, usize> {
        self.inner.log().counts()
    }

    /// Forget the request log.
    pub fn clear_requests(&self) {
        self.inner.log().clear();
    }

    /// Inject a fault.
    pub fn inject(&self, fault: Fault) {
        self.inner.faults().add(fault);
    }

    /// Remove every fault and end a pause.
    pub fn clear_faults(&self) {
        self.inner.faults().clear();
    }

    /// Answer every request with 503 (and `Retry-After`) for `duration`.
    pub fn pause(&self, duration: Duration) {
        self.inner.faults().pause(duration);
    }

    /// End every open watch, as a load balancer or API server restart would.
    pub fn drop_watches(&self) {
        self.inner.watch_epoch().send_modify(|e| *e += 1);
    }

    /// Forget the event history: resuming a watch from any earlier
    /// resourceVersion gets 410 Gone, and so does continuing a paginated
    /// list started before.
    pub fn compact(&self) {
        self.inner.store().compact();
    }

    /// The current global resourceVersion.
    pub fn revision(&self) -> u64 {
        self.inner.store().revision()
    }

    /// Make TokenReviews of `token` authenticate as `user`.
    pub fn add_token(&self, token: &str, user: ReviewUser) {
        self.inner.reviews().issue(token, user, None);
    }

    /// Decide SubjectAccessReviews with `policy` (default: allow all).
    pub fn set_access_policy(
        &self,
        policy: impl Fn(&AccessRequest) -> (bool, String) + Send + Sync + 'static,
    ) {
        *self
            .inner
            .reviews()
            .policy
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
        self.inner
            .reviews()
            .custom_policy
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Close every connection and open watch and serve again on the same
    /// address, keeping all objects: what clients see when kube-apiserver
    /// restarts.
    pub async fn restart(&mut self) -> Result<(), ApiServerError> {
        self.generation.send_modify(|g| *g += 1);
        self.drop_watches();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let listener = bind_retry(self.addr).await?;
        self.task = Some(spawn_serving(
            self.inner.clone(),
            self.keys.clone(),
            Acceptor::new(listener, self.connections.clone()),
            self.addr,
            self.generation.subscribe(),
            self.tls.clone(),
            self.connections.clone(),
        ));
        Ok(())
    }

    /// Stop serving and wait for the accept loop to end.
    pub async fn shutdown(mut self) {
        self.inner.closing().send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

async fn bind_retry(addr: SocketAddr) -> Result<TcpListener, ApiServerError> {
    let mut last = None;
    for _ in 0..50 {
        match TcpListener::bind(addr).await {
            Ok(l) => return Ok(l),
            Err(e) => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    Err(ApiServerError::Bind {
        addr,
        source: last.unwrap_or_else(|| std::io::Error::other("bind failed")),
    })
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.inner.closing().send_replace(true);
    }
}
