//! API clients that authenticate as a ServiceAccount (Go's
//! `DynamicControllerClientBuilder`, behind `--use-service-account-credentials`):
//! the account is created if missing, a token is requested through
//! TokenRequest (one hour, as Go) and replaced in the background once 80 %
//! of its lifetime has passed.

use std::sync::{Arc, RwLock, Weak};

use std::time::Duration;
use tokio::sync::watch;

use http::HeaderValue;
use http::header::AUTHORIZATION;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};
use tower::{Layer, Service};

use super::{ClientError, ClientOptions};

/// Go's token lifetime for controller clients.
pub const TOKEN_EXPIRATION: Duration = Duration::from_secs(3600);

/// The current bearer header, shared with the refresh task, and a sender
/// whose drop (with the last clone of the client) ends that task.
struct Shared {
    header: RwLock<HeaderValue>,
    _alive: watch::Sender<()>,
}

type Current = Arc<Shared>;

/// A client for `config`'s cluster authenticating as the ServiceAccount
/// `namespace`/`name` instead of `config`'s own credentials; `admin`
/// (allowed to create ServiceAccounts and their tokens) makes the account
/// and requests its tokens. The token is renewed while the client lives.
///
/// ```no_run
/// use stratus_runtime::client::{ClientOptions, build_client, service_account_client};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = kube::Config::infer().await?;
/// let options = ClientOptions::new("cloud-controller-manager");
/// let admin = build_client(config.clone(), &options)?;
/// let client =
///     service_account_client(&admin, config, "kube-system", "service-controller", &options).await?;
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
pub async fn service_account_client(
    admin: &kube::Client,
    mut config: kube::Config,
    namespace: &str,
    name: &str,
    options: &ClientOptions,
) -> Result<kube::Client, ClientError> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let failed = |source: kube::Error| ClientError::ServiceAccount {
        account: format!("{namespace}/{name}"),
        source,
    };
    if accounts.get_opt(name).await.map_err(failed)?.is_none() {
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            // Another replica made it first.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(failed(e)),
        }
    }
    let (header, lifetime) = request_token(&accounts, name).await.map_err(failed)?;
    let (alive, dropped) = watch::channel(());
    let current: Current = Arc::new(Shared {
        header: RwLock::new(header),
        _alive: alive,
    });
    tokio::spawn(refresh(
        accounts,
        name.to_owned(),
        Arc::downgrade(&current),
        dropped,
        lifetime,
    ));
    // Only the token identifies the client (Go: an anonymous config plus
    // the bearer token).
    config.auth_info = Default::default();
    super::build_client_with(config, options, Some(BearerLayer { current }))
}

/// One token: its `Authorization` header and its lifetime.
#[allow(
    clippy::useless_conversion,
    reason = "a conversion in one Kubernetes minor, the identity in another"
)]
async fn request_token(
    accounts: &Api<ServiceAccount>,
    name: &str,
) -> Result<(HeaderValue, Duration), kube::Error> {
    // `.into()` and `Option::from` where a field is required in some
    // Kubernetes minors' types and optional in others (1.37).
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(TOKEN_EXPIRATION.as_secs() as i64),
            ..Default::default()
        }
        .into(),
        ..Default::default()
    };
    let answer: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await?;
    let token = answer
        .status
        .and_then(|s| Option::<String>::from(s.token))
        .filter(|t| !t.is_empty())
        .ok_or_else(|| kube::Error::Service("the TokenRequest answered no token".into()))?;
    let header = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
        kube::Error::Service("the TokenRequest answered a token that is not a header value".into())
    })?;
    let lifetime = Option::<TokenRequestSpec>::from(answer.spec)
        .and_then(|s| s.expiration_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .map_or(TOKEN_EXPIRATION, Duration::from_secs);
    Ok((header, lifetime))
}

/// Replace the token once 80 % of its lifetime has passed (Go's 20 %
/// leeway), retrying every few seconds on failure, until the client is
/// dropped.
async fn refresh(
    accounts: Api<ServiceAccount>,
    name: String,
    current: Weak<Shared>,
    mut dropped: watch::Receiver<()>,
    mut lifetime: Duration,
) {
    // Sleep, unless the client is dropped first.
    let mut pause = async |d: Duration| {
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = dropped.changed() => false,
        }
    };
    loop {
        if !pause(lifetime.mul_f64(0.8)).await {
            return;
        }
        loop {
            match request_token(&accounts, &name).await {
                Ok((header, fresh)) => {
                    let Some(shared) = current.upgrade() else {
                        return;
                    };
                    *shared.header.write().unwrap_or_else(|e| e.into_inner()) = header;
                    lifetime = fresh;
                    break;
                }
                Err(e) => {
                    tracing::warn!(account = %name, error = %e, "cannot renew the ServiceAccount token; retrying");
                    if !pause(Duration::from_secs(5)).await {
                        return;
                    }
                }
            }
        }
    }
}

/// Sets the current bearer token on every request.
#[derive(Clone)]
pub(super) struct BearerLayer {
    current: Current,
}

impl<S> Layer<S> for BearerLayer {
    type Service = Bearer<S>;

    fn layer(&self, inner: S) -> Bearer<S> {
        Bearer {
            inner,
            current: self.current.clone(),
        }
    }
}

/// The service of [`BearerLayer`].
pub(super) struct Bearer<S> {
    inner: S,
    current: Current,
}

impl<S, B> Service<http::Request<B>> for Bearer<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let header = self
            .current
            .header
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        request.headers_mut().insert(AUTHORIZATION, header);
        self.inner.call(request)
    }
}
