//! Typed cloud errors whose classification survives wrapping.
//!
//! The Go library signals special outcomes with sentinel errors compared by
//! `==` (`InstanceNotFound`, `NotImplemented`, `ImplementedElsewhere`) and a
//! `RetryError` type found with `errors.As`. Wrapping a sentinel with
//! `fmt.Errorf("...: %w")` hides it from most controllers. Here every error
//! carries a [`CloudErrorKind`], and [`CloudError::kind`] looks through the
//! whole [`source`](std::error::Error::source) chain, so a kind set deep inside
//! a provider is still seen by the controllers after any amount of wrapping.

use std::borrow::Cow;
use std::time::Duration;

/// The result type of every cloud-provider call.
pub type Result<T, E = CloudError> = std::result::Result<T, E>;

/// How a controller should treat a failed cloud call.
///
/// | kind | Go counterpart | what the controllers do |
/// |---|---|---|
/// | `NotFound` | `cloudprovider.InstanceNotFound` | the resource does not exist: a load balancer or route to delete is already deleted; a legacy `instance_id` answering it means the instance is gone. From `InstancesV2` it is an error like any other, so it never deletes a Node (as Go's V2 path) |
/// | `NotImplemented` | `cloudprovider.NotImplemented` | the capability is absent; go on without it |
/// | `ImplementedElsewhere` | `cloudprovider.ImplementedElsewhere` | another controller owns it; stop without error |
/// | `RetryAfter(d)` | `api.RetryError` | requeue after exactly `d`, no backoff growth |
/// | `Throttled { retry_after }` | (none) | the cloud rate-limited us; wait `retry_after` or back off |
/// | `InvalidInput` | (none) | the input is garbage (bad provider ID, bad annotation); warn once, back off |
/// | `Other` | any other error | retry with per-item exponential backoff |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloudErrorKind {
    /// The instance, load balancer or route does not exist.
    NotFound,
    /// The provider does not implement this call.
    NotImplemented,
    /// The resource is handled by something other than this provider.
    ImplementedElsewhere,
    /// Try again after this fixed delay (for example, a load balancer that is
    /// still provisioning).
    RetryAfter(Duration),
    /// The cloud API throttled the call; retry after the given delay if known.
    Throttled {
        /// The delay the cloud asked for, if it said.
        retry_after: Option<Duration>,
    },
    /// The request could not be served because its input is invalid.
    InvalidInput,
    /// Any other failure.
    Other,
}

impl CloudErrorKind {
    /// The message used when an error of this kind is built without one.
    ///
    /// The first three are the exact texts of the Go sentinels.
    pub fn default_message(self) -> &'static str {
        match self {
            Self::NotFound => "instance not found",
            Self::NotImplemented => "unimplemented",
            Self::ImplementedElsewhere => "implemented by alternate to cloud provider",
            Self::RetryAfter(_) => "retry requested by the cloud provider",
            Self::Throttled { .. } => "throttled by the cloud provider",
            Self::InvalidInput => "invalid input",
            Self::Other => "cloud provider error",
        }
    }
}

stratus_error_kind::kinded_error! {
    /// An error returned by a cloud provider.
    ///
    /// Build one with a kind constructor ([`CloudError::not_found`],
    /// [`CloudError::retry_after`], ...) or wrap any error with
    /// [`CloudError::other`]; add context with [`CloudError::context`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use stratus_cloud::{CloudError, CloudErrorKind};
    ///
    /// let err = CloudError::retry_after(Duration::from_secs(5), "load balancer is provisioning")
    ///     .context("ensuring load balancer for default/web");
    /// assert_eq!(err.kind(), CloudErrorKind::RetryAfter(Duration::from_secs(5)));
    /// assert_eq!(err.retry_delay(), Some(Duration::from_secs(5)));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "ensuring load balancer for default/web: load balancer is provisioning"
    /// );
    /// ```
    pub struct CloudError(CloudErrorKind);
    /// Classify any error by walking its source chain for a [`CloudError`] of a
    /// specific kind.
    ///
    /// This is what lets a provider return its own error type that wraps a
    /// `CloudError` (or an error chain built with another library) and still be
    /// understood by the controllers.
    ///
    /// ```
    /// use stratus_cloud::{classify, CloudError, CloudErrorKind};
    ///
    /// #[derive(Debug)]
    /// struct SdkError(CloudError);
    /// impl std::fmt::Display for SdkError {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         f.write_str("sdk call failed")
    ///     }
    /// }
    /// impl std::error::Error for SdkError {
    ///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
    ///         Some(&self.0)
    ///     }
    /// }
    ///
    /// let err = SdkError(CloudError::not_found("i-123 is gone"));
    /// assert_eq!(classify(&err), CloudErrorKind::NotFound);
    /// ```
    pub fn classify;
}

impl CloudError {
    /// An error of `kind` with the kind's default message.
    pub fn from_kind(kind: CloudErrorKind) -> Self {
        Self::new(kind, kind.default_message())
    }

    /// The resource does not exist (Go's `InstanceNotFound`).
    pub fn not_found(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(CloudErrorKind::NotFound, message)
    }

    /// The call is not implemented (Go's `NotImplemented`).
    pub fn not_implemented() -> Self {
        Self::from_kind(CloudErrorKind::NotImplemented)
    }

    /// The resource is handled elsewhere (Go's `ImplementedElsewhere`).
    pub fn implemented_elsewhere() -> Self {
        Self::from_kind(CloudErrorKind::ImplementedElsewhere)
    }

    /// Ask the controller to retry after exactly `delay` (Go's `api.RetryError`).
    pub fn retry_after(delay: Duration, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(CloudErrorKind::RetryAfter(delay), message)
    }

    /// The cloud API throttled the call.
    pub fn throttled(retry_after: Option<Duration>) -> Self {
        Self::from_kind(CloudErrorKind::Throttled { retry_after })
    }

    /// The input (a provider ID, an annotation, ...) is invalid.
    pub fn invalid_input(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(CloudErrorKind::InvalidInput, message)
    }

    /// True if the kind is [`CloudErrorKind::NotFound`].
    pub fn is_not_found(&self) -> bool {
        self.kind() == CloudErrorKind::NotFound
    }

    /// True if the kind is [`CloudErrorKind::NotImplemented`].
    pub fn is_not_implemented(&self) -> bool {
        self.kind() == CloudErrorKind::NotImplemented
    }

    /// True if the kind is [`CloudErrorKind::ImplementedElsewhere`].
    pub fn is_implemented_elsewhere(&self) -> bool {
        self.kind() == CloudErrorKind::ImplementedElsewhere
    }

    /// True if the kind is [`CloudErrorKind::InvalidInput`].
    pub fn is_invalid_input(&self) -> bool {
        self.kind() == CloudErrorKind::InvalidInput
    }

    /// The delay the provider asked for: the duration of `RetryAfter`, or the
    /// `retry_after` of `Throttled` when the cloud gave one.
    pub fn retry_delay(&self) -> Option<Duration> {
        match self.kind() {
            CloudErrorKind::RetryAfter(delay) => Some(delay),
            CloudErrorKind::Throttled { retry_after } => retry_after,
            _ => None,
        }
    }
}
impl From<CloudErrorKind> for CloudError {
    fn from(kind: CloudErrorKind) -> Self {
        Self::from_kind(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as StdError;
    use std::fmt;

    #[derive(Debug)]
    struct Wrapper(Box<dyn StdError + Send + Sync>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "wrapped: {}", self.0)
        }
    }

    impl StdError for Wrapper {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(self.0.as_ref())
        }
    }

    #[test]
    fn sentinel_messages_match_go() {
        assert_eq!(CloudError::not_implemented().to_string(), "unimplemented");
        assert_eq!(
            CloudError::implemented_elsewhere().to_string(),
            "implemented by alternate to cloud provider"
        );
        assert_eq!(
            CloudError::from_kind(CloudErrorKind::NotFound).to_string(),
            "instance not found"
        );
    }

    #[test]
    fn kind_survives_context_wrapping() {
        let err = CloudError::not_found("i-1")
            .context("describing instance")
            .context("syncing node n1");
        assert_eq!(err.kind(), CloudErrorKind::NotFound);
        assert!(err.is_not_found());
        assert_eq!(err.to_string(), "syncing node n1: describing instance: i-1");
    }

    #[test]
    fn kind_survives_foreign_wrapping() {
        let inner = CloudError::implemented_elsewhere();
        let foreign = Wrapper(Box::new(Wrapper(Box::new(inner))));
        let err = CloudError::other(foreign);
        assert!(err.is_implemented_elsewhere());
        assert_eq!(
            err.to_string(),
            "wrapped: wrapped: implemented by alternate to cloud provider"
        );
    }

    #[test]
    fn retry_after_survives_wrapping() {
        let err = CloudError::retry_after(Duration::from_secs(7), "provisioning").context("ensure");
        let foreign = Wrapper(Box::new(err));
        assert_eq!(
            classify(&foreign),
            CloudErrorKind::RetryAfter(Duration::from_secs(7))
        );
        let outer = CloudError::other(foreign);
        assert_eq!(outer.retry_delay(), Some(Duration::from_secs(7)));
    }

    #[test]
    fn throttled_delay() {
        assert_eq!(
            CloudError::throttled(Some(Duration::from_millis(250))).retry_delay(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(CloudError::throttled(None).retry_delay(), None);
        assert_eq!(CloudError::not_found("x").retry_delay(), None);
    }

    #[test]
    fn outermost_specific_kind_wins() {
        let err = CloudError::not_found("inner").context("middle");
        let outer = CloudError::invalid_input("outer").with_source(err);
        assert_eq!(outer.kind(), CloudErrorKind::InvalidInput);
    }

    #[test]
    fn plain_errors_are_other() {
        let io = std::io::Error::other("boom");
        let err = CloudError::other(io);
        assert_eq!(err.kind(), CloudErrorKind::Other);
        assert_eq!(err.to_string(), "boom");
        assert!(err.source().is_some());
    }
}
