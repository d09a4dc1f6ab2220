//! The local cloud's API client: one HTTP/1.1 call per connection, retried
//! on throttling and on the cloud's own failures, answers typed.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use serde::Serialize;
use serde::de::DeserializeOwned;
use stratus_cloud::{CloudError, CloudErrorKind};
use stratus_local_cloud::api::{ApiError, ErrorCode, List, MAX_PAGE};

/// How calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts of one call in all (1 = no retry).
    pub attempts: u32,
    /// The first wait after a failure that did not say how long to wait;
    /// doubled each time.
    pub initial_backoff: Duration,
    /// The longest single wait, a throttled answer's `Retry-After` too.
    pub max_wait: Duration,
    /// How long one attempt may take, connecting included.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, 100 ms doubling, waits of at most 2 s, 10 s an attempt.
    fn default() -> Self {
        Self {
            attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_wait: Duration::from_secs(2),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why a call failed, after its retries.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The cloud answered with an error.
    #[error("{method} {path}: {} ({:?})", .error.message, .error.code)]
    Api {
        /// The call's method.
        method: Method,
        /// The call's path.
        path: String,
        /// What the cloud said.
        error: ApiError,
    },
    /// The cloud could not be reached or answered something that is not its
    /// API.
    #[error("{method} {path}: {why}")]
    Transport {
        /// The call's method.
        method: Method,
        /// The call's path.
        path: String,
        /// Why.
        why: String,
    },
}

impl CallError {
    /// The cloud's error code, if it answered one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Api { error, .. } => Some(error.code),
            Self::Transport { .. } => None,
        }
    }

    /// The call failed because the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(ErrorCode::NotFound)
    }
}

impl From<CallError> for CloudError {
    /// The kind the controllers act on: `NotFound`, `InvalidInput`,
    /// `Throttled` (with the cloud's delay), or `Other`.
    fn from(e: CallError) -> Self {
        let kind = match &e {
            CallError::Api { error, .. } => match error.code {
                ErrorCode::NotFound => CloudErrorKind::NotFound,
                ErrorCode::Invalid => CloudErrorKind::InvalidInput,
                ErrorCode::Throttled => CloudErrorKind::Throttled {
                    retry_after: error.retry_after_ms.map(Duration::from_millis),
                },
                ErrorCode::PortInUse | ErrorCode::AddressesExhausted | ErrorCode::Internal => {
                    CloudErrorKind::Other
                }
            },
            CallError::Transport { .. } => CloudErrorKind::Other,
        };
        CloudError::new(kind, e.to_string()).with_source(e)
    }
}

/// A client of one local cloud.
#[derive(Debug, Clone)]
pub struct Client {
    authority: String,
    retry: RetryPolicy,
}

impl Client {
    /// A client of the cloud whose API is at `endpoint` (`http://host:port`
    /// or `host:port`).
    pub fn new(endpoint: &str, retry: RetryPolicy) -> Result<Self, CloudError> {
        let authority = endpoint
            .strip_prefix("http://")
            .unwrap_or(endpoint)
            .trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') || !authority.contains(':') {
            return Err(CloudError::invalid_input(format!(
                "endpoint {endpoint:?} is not http://host:port"
            )));
        }
        Ok(Self {
            authority: authority.to_owned(),
            retry,
        })
    }

    /// The cloud's `host:port`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Call and decode the answer, retrying as the policy says.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<T, CallError> {
        let body = match body {
            Some(b) => Some(serde_json::to_vec(b).map_err(|e| CallError::Transport {
                method: method.clone(),
                path: path.to_owned(),
                why: format!("encoding the body: {e}"),
            })?),
            None => None,
        };
        let bytes = self.call_raw(method.clone(), path, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| CallError::Transport {
            method,
            path: path.to_owned(),
            why: format!("the answer does not parse: {e}"),
        })
    }

    /// Delete; `Ok(false)` if it was already gone.
    pub async fn delete(&self, path: &str) -> Result<bool, CallError> {
        match self.call_raw(Method::DELETE, path, None).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every item of a paginated list (`path` may carry a query already).
    pub async fn list_all<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, CallError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page_path = match &token {
                Some(t) => format!("{path}{sep}limit={MAX_PAGE}&continue={t}"),
                None => format!("{path}{sep}limit={MAX_PAGE}"),
            };
            let page: List<T> = self.call(Method::GET, &page_path, None::<&()>).await?;
            items.extend(page.items);
            match page.continue_token {
                Some(t) => token = Some(t),
                None => return Ok(items),
            }
        }
    }

    async fn call_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, CallError> {
        let mut backoff = self.retry.initial_backoff;
        let mut attempt = 1;
        loop {
            let result = tokio::time::timeout(
                self.retry.timeout,
                self.once(method.clone(), path, body.clone()),
            )
            .await
            .unwrap_or_else(|_| {
                Err(CallError::Transport {
                    method: method.clone(),
                    path: path.to_owned(),
                    why: format!("no answer within {:?}", self.retry.timeout),
                })
            });
            let wait = match &result {
                Ok(_) => return result,
                Err(CallError::Api { error, .. }) => match error.code {
                    ErrorCode::Throttled => error
                        .retry_after_ms
                        .map(Duration::from_millis)
                        .unwrap_or(backoff),
                    ErrorCode::Internal => backoff,
                    _ => return result,
                },
                Err(CallError::Transport { .. }) => backoff,
            };
            if attempt >= self.retry.attempts {
                return result;
            }
            tracing::debug!(%method, path, attempt, ?wait, "local cloud call failed; retrying");
            tokio::time::sleep(wait.min(self.retry.max_wait)).await;
            backoff = (backoff * 2).min(self.retry.max_wait);
            attempt += 1;
        }
    }

    async fn once(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, CallError> {
        let transport = |why: String| CallError::Transport {
            method: method.clone(),
            path: path.to_owned(),
            why,
        };
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|e| transport(format!("connecting to {}: {e}", self.authority)))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| transport(format!("handshake: {e}")))?;
        tokio::spawn(connection);
        let mut request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header("host", &self.authority);
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| transport(format!("building the request: {e}")))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| transport(format!("sending: {e}")))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| transport(format!("reading the answer: {e}")))?
            .to_bytes();
        if status.is_success() {
            return Ok(bytes);
        }
        match serde_json::from_slice::<ApiError>(&bytes) {
            Ok(error) => Err(CallError::Api {
                method,
                path: path.to_owned(),
                error,
            }),
            Err(_) => Err(transport(format!(
                "answered {status} without an API error: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_host_and_port() {
        let retry = RetryPolicy::default();
        assert_eq!(
            Client::new("http://127.0.0.1:7080/", retry)
                .unwrap()
                .authority(),
            "127.0.0.1:7080"
        );
        assert_eq!(
            Client::new("localhost:1", retry).unwrap().authority(),
            "localhost:1"
        );
        for bad in ["", "http://", "https://x:1", "127.0.0.1", "http://h:1/path"] {
            let err = Client::new(bad, retry).unwrap_err();
            assert!(err.is_invalid_input(), "{bad}: {err}");
        }
    }

    #[test]
    fn api_errors_keep_their_kind_for_the_controllers() {
        let api = |code, retry_after_ms| CallError::Api {
            method: Method::GET,
            path: "/v1/x".into(),
            error: ApiError {
                code,
                message: "m".into(),
                retry_after_ms,
            },
        };
        assert!(CloudError::from(api(ErrorCode::NotFound, None)).is_not_found());
        assert!(CloudError::from(api(ErrorCode::Invalid, None)).is_invalid_input());
        assert_eq!(
            CloudError::from(api(ErrorCode::Throttled, Some(250))).retry_delay(),
            Some(Duration::from_millis(250))
        );
        let other = CloudError::from(api(ErrorCode::PortInUse, None));
        assert_eq!(other.kind(), CloudErrorKind::Other);
        assert!(other.to_string().contains("PortInUse"), "{other}");
    }
}
