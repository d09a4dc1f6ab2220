//! Delegated authentication and authorization, as Kubernetes components
//! serve their HTTPS endpoints: the API server decides who a caller is and
//! what it may do.
//!
//! - **Authentication**: a client certificate the TLS layer verified
//!   against the client CA (user = subject CN, groups = subject O), or a
//!   bearer token checked with a `TokenReview`; a request with neither is
//!   `system:anonymous` in `system:unauthenticated` (unless anonymous access
//!   is off, then 401). An invalid token answers 401.
//! - **Authorization**: paths in the always-allow list (Go's managers:
//!   `/healthz`, `/readyz`, `/livez`) skip it; users in an always-allow
//!   group (`system:masters`) pass; everyone else needs a
//!   `SubjectAccessReview` to allow the request (non-resource: the path and
//!   the verb from the method; or the resource attributes the caller maps
//!   the request to), else 403.
//! - Answers are cached: token reviews for the authentication TTL, allowed
//!   and denied access reviews for their own TTLs (Go's managers: 10 s each;
//!   the kubelet: 2 min, 5 min, 30 s).
//!
//! ```no_run
//! use stratus_runtime::auth::{Attributes, DelegatedAuth, DelegatedAuthConfig, Decision};
//!
//! # async fn run(client: kube::Client) {
//! let auth = DelegatedAuth::new(client, DelegatedAuthConfig::default());
//! let request = http::Request::get("/metrics")
//!     .header("authorization", "Bearer abc")
//!     .body(())
//!     .unwrap();
//! match auth.check(&request, None).await {
//!     Decision::Allowed(user) => println!("{} may read the metrics", user.username),
//!     Decision::Unauthorized(why) => println!("401: {why}"),
//!     Decision::Forbidden(why) => println!("403: {why}"),
//!     Decision::Error(why) => println!("500: {why}"),
//! }
//! # }
//! ```

mod request_header;

use request_header::ProxyAnswer;
pub use request_header::RequestHeader;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// The DER certificate a client presented, verified by the TLS layer
/// against the client CA; servers put it in the request's extensions.
#[derive(Debug, Clone)]
pub struct ClientCertificate(pub Vec<u8>);

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UserInfo {
    /// The user name.
    pub username: String,
    /// The user's UID, if known.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Extra attributes (from a front proxy's `X-Remote-Extra-` headers).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        Self {
            username: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
            extra: Default::default(),
        }
    }
}

/// What a request asks to do, for the access review.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attributes {
    /// A path that is not an API resource (`/metrics`), with the verb from
    /// the method (`get`, `post`, `put`, `patch`, `delete`).
    NonResource {
        /// The path.
        path: String,
        /// The verb.
        verb: String,
    },
    /// An API resource (a kubelet maps its paths to `nodes/proxy`,
    /// `nodes/stats`, ...).
    Resource {
        /// The verb.
        verb: String,
        /// The API group (`""` for the core group).
        group: String,
        /// The resource.
        resource: String,
        /// The subresource.
        subresource: String,
        /// The namespace (empty for cluster-scoped resources).
        namespace: String,
        /// The object name.
        name: String,
    },
}

impl Attributes {
    /// The non-resource attributes of `method` on `path`.
    ///
    /// ```
    /// use stratus_runtime::auth::Attributes;
    /// let a = Attributes::non_resource(&http::Method::GET, "/metrics");
    /// assert_eq!(a, Attributes::NonResource { path: "/metrics".into(), verb: "get".into() });
    /// ```
    pub fn non_resource(method: &http::Method, path: &str) -> Self {
        Self::NonResource {
            path: path.to_owned(),
            verb: verb_of(method).to_owned(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::NonResource { path, verb } => format!("{verb} path {path:?}"),
            Self::Resource {
                verb,
                resource,
                subresource,
                group,
                ..
            } => {
                let mut r = resource.clone();
                if !subresource.is_empty() {
                    r = format!("{r}/{subresource}");
                }
                if group.is_empty() {
                    format!("{verb} resource {r:?}")
                } else {
                    format!("{verb} resource {r:?} in API group {group:?}")
                }
            }
        }
    }
}

/// The API verb of an HTTP method (as the API server's request info).
pub fn verb_of(method: &http::Method) -> &'static str {
    match *method {
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "get",
    }
}

/// How requests are authenticated and authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegatedAuthConfig {
    /// Paths served to anyone (an entry ending in `*` is a prefix).
    pub always_allow_paths: Vec<String>,
    /// Groups allowed everything without an access review.
    pub always_allow_groups: Vec<String>,
    /// Accept requests without credentials as `system:anonymous` (then
    /// authorized like anyone else).
    pub anonymous: bool,
    /// Authorization `AlwaysAllow`: every authenticated request is allowed
    /// without an access review. Authentication is unchanged: a request
    /// without credentials is still refused unless [`anonymous`](Self::anonymous).
    pub always_allow: bool,
    /// How long a token review answer is reused.
    pub authentication_cache_ttl: Duration,
    /// How long an allowing access review is reused.
    pub authorized_cache_ttl: Duration,
    /// How long a denying access review is reused.
    pub unauthorized_cache_ttl: Duration,
}

impl Default for DelegatedAuthConfig {
    /// Go's managers: `/healthz`, `/readyz`, `/livez` open; `system:masters`
    /// allowed; anonymous requests authorized like others; 10 s caches.
    fn default() -> Self {
        Self {
            always_allow_paths: vec!["/healthz".into(), "/readyz".into(), "/livez".into()],
            always_allow_groups: vec!["system:masters".into()],
            anonymous: true,
            always_allow: false,
            authentication_cache_ttl: Duration::from_secs(10),
            authorized_cache_ttl: Duration::from_secs(10),
            unauthorized_cache_ttl: Duration::from_secs(10),
        }
    }
}

impl DelegatedAuthConfig {
    /// The kubelet's: no anonymous access, no always-allowed path or
    /// group (every request is reviewed), token reviews cached 2 min,
    /// allowing access reviews 5 min, denying ones 30 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = stratus_runtime::auth::DelegatedAuthConfig::kubelet();
    /// assert!(!c.anonymous);
    /// assert_eq!(c.authorized_cache_ttl, Duration::from_secs(300));
    /// ```
    pub fn kubelet() -> Self {
        Self {
            always_allow_paths: Vec::new(),
            always_allow_groups: Vec::new(),
            anonymous: false,
            always_allow: false,
            authentication_cache_ttl: Duration::from_secs(120),
            authorized_cache_ttl: Duration::from_secs(300),
            unauthorized_cache_ttl: Duration::from_secs(30),
        }
    }
}

/// The outcome for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go on, as this user.
    Allowed(UserInfo),
    /// 401: no acceptable credentials.
    Unauthorized(String),
    /// 403: authenticated but not allowed.
    Forbidden(String),
    /// 500: the access review could not be made.
    Error(String),
}

/// A cache of answers that expire; bounded (cleared when full).
struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

const CACHE_LIMIT: usize = 4096;

impl<K: std::hash::Hash + Eq, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(expires, _)| *expires > Instant::now())
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_LIMIT {
            let now = Instant::now();
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= CACHE_LIMIT {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now() + ttl, value));
    }
}

/// Delegated authentication and authorization through the API server.
/// Cheap to clone; clones share the caches.
#[derive(Clone)]
pub struct DelegatedAuth {
    client: kube::Client,
    authn_client: kube::Client,
    config: Arc<DelegatedAuthConfig>,
    tokens: Arc<TtlCache<String, Option<UserInfo>>>,
    access: Arc<TtlCache<(UserInfo, Attributes), (bool, String)>>,
    request_header: Option<Arc<RequestHeader>>,
}

impl std::fmt::Debug for DelegatedAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuth")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl DelegatedAuth {
    /// Reviews made with `client`.
    pub fn new(client: kube::Client, config: DelegatedAuthConfig) -> Self {
        Self {
            authn_client: client.clone(),
            client,
            config: Arc::new(config),
            tokens: Arc::new(TtlCache::new()),
            access: Arc::new(TtlCache::new()),
            request_header: None,
        }
    }

    /// Make token reviews with `client` (Go's `--authentication-kubeconfig`)
    /// and access reviews with the first one.
    pub fn with_authentication_client(mut self, client: kube::Client) -> Self {
        self.authn_client = client;
        self
    }

    /// Trust a front proxy (Go's `--requestheader-*` flags): requests
    /// whose client certificate `request_header` verifies carry their user
    /// in headers.
    pub fn with_request_header(mut self, request_header: RequestHeader) -> Self {
        self.request_header = Some(Arc::new(request_header));
        self
    }

    /// Who sent `request`: a front proxy's headers (when its certificate is
    /// one [`RequestHeader`] trusts), else its verified client
    /// certificate, else its bearer token (reviewed), else anonymous.
    /// `Err` is the 401 message.
    pub async fn authenticate<B>(&self, request: &http::Request<B>) -> Result<UserInfo, String> {
        if let Some(ClientCertificate(der)) = request.extensions().get::<ClientCertificate>() {
            let proxy = self.request_header.as_ref();
            match proxy.map(|proxy| proxy.authenticate(der, request.headers())) {
                Some(Err(e)) => return Err(e),
                Some(Ok(ProxyAnswer::User(user))) => return Ok(user),
                // The TLS layer accepts certificates of the client CA and of
                // the proxy CA; the proxy itself is no user: on to tokens.
                Some(Ok(ProxyAnswer::NoUser)) => {}
                Some(Ok(ProxyAnswer::NotTheProxy)) | None => return user_of_certificate(der),
            }
        }
        let bearer = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty());
        let Some(token) = bearer else {
            return if self.config.anonymous {
                Ok(UserInfo::anonymous())
            } else {
                Err("no credentials: a client certificate or a bearer token is required".into())
            };
        };
        let reviewed = match self.tokens.get(&token.to_owned()) {
            Some(cached) => cached,
            None => {
                let user = self.review_token(token).await?;
                self.tokens.put(
                    token.to_owned(),
                    user.clone(),
                    self.config.authentication_cache_ttl,
                );
                user
            }
        };
        reviewed.ok_or_else(|| "invalid bearer token".to_owned())
    }

    #[allow(
        clippy::useless_conversion,
        reason = "a conversion in one Kubernetes minor, the identity in another"
    )]
    async fn review_token(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let api: Api<TokenReview> = Api::all(self.authn_client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                // Optional from Kubernetes 1.37 on.
                token: token.to_owned().into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| format!("the token review failed: {e}"))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(UserInfo {
            username: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: Default::default(),
        }))
    }

    /// Whether `user` may do `attributes`: `Ok((allowed, reason))`, or the
    /// review's failure.
    pub async fn authorize(
        &self,
        user: &UserInfo,
        attributes: &Attributes,
    ) -> Result<(bool, String), String> {
        if self.config.always_allow {
            return Ok((true, "authorization mode AlwaysAllow".into()));
        }
        if user
            .groups
            .iter()
            .any(|g| self.config.always_allow_groups.contains(g))
        {
            return Ok((true, "always allowed group".into()));
        }
        let key = (user.clone(), attributes.clone());
        if let Some(cached) = self.access.get(&key) {
            return Ok(cached);
        }
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let mut spec = SubjectAccessReviewSpec {
            user: Some(user.username.clone()),
            groups: Some(user.groups.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            ..Default::default()
        };
        match attributes {
            Attributes::NonResource { path, verb } => {
                spec.non_resource_attributes = Some(NonResourceAttributes {
                    path: Some(path.clone()),
                    verb: Some(verb.clone()),
                });
            }
            Attributes::Resource {
                verb,
                group,
                resource,
                subresource,
                namespace,
                name,
            } => {
                let some = |s: &String| (!s.is_empty()).then(|| s.clone());
                spec.resource_attributes = Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    resource: some(resource),
                    subresource: some(subresource),
                    namespace: some(namespace),
                    name: some(name),
                    ..Default::default()
                });
            }
        }
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| format!("the access review failed: {e}"))?;
        let status = answer.status.unwrap_or_default();
        let decided = (status.allowed, status.reason.unwrap_or_default());
        let ttl = if decided.0 {
            self.config.authorized_cache_ttl
        } else {
            self.config.unauthorized_cache_ttl
        };
        self.access.put(key, decided.clone(), ttl);
        Ok(decided)
    }

    fn always_allowed(&self, path: &str) -> bool {
        self.config
            .always_allow_paths
            .iter()
            .any(|p| match p.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => p == path,
            })
    }

    /// Authenticate `request` and authorize it as `attributes` (by default
    /// the non-resource attributes of its method and path).
    pub async fn check<B>(
        &self,
        request: &http::Request<B>,
        attributes: Option<Attributes>,
    ) -> Decision {
        let path = request.uri().path();
        if attributes.is_none() && self.always_allowed(path) {
            return Decision::Allowed(UserInfo::anonymous());
        }
        let user = match self.authenticate(request).await {
            Ok(u) => u,
            Err(why) => return Decision::Unauthorized(why),
        };
        let attributes =
            attributes.unwrap_or_else(|| Attributes::non_resource(request.method(), path));
        match self.authorize(&user, &attributes).await {
            Ok((true, _)) => Decision::Allowed(user),
            Ok((false, reason)) => {
                let mut message = format!(
                    "forbidden: User {:?} cannot {}",
                    user.username,
                    attributes.describe()
                );
                if !reason.is_empty() {
                    message.push_str(&format!(": {reason}"));
                }
                Decision::Forbidden(message)
            }
            Err(e) => Decision::Error(e),
        }
    }
}

/// The user of a (verified) client certificate: the subject's common name
/// and organizations ([`stratus_pki::user_of_certificate`]).
fn user_of_certificate(der: &[u8]) -> Result<UserInfo, String> {
    let user =
        stratus_pki::user_of_certificate(der).map_err(|e| format!("client certificate: {e}"))?;
    Ok(UserInfo {
        username: user.name,
        uid: String::new(),
        groups: user.groups,
        extra: Default::default(),
    })
}
