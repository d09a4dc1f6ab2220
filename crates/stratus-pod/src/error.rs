//! Typed pod-provider errors whose classification survives wrapping.
//!
//! Go's virtual-kubelet knows two error classes (`errdefs.NotFound`,
//! `errdefs.InvalidInput`) and finds them only through `Cause()` chains, so a
//! provider that wraps with `%w` loses them. [`PodError::kind`] walks the whole
//! [`source`](std::error::Error::source) chain instead.

use std::borrow::Cow;
use std::time::Duration;

/// The result type of every pod-provider call.
pub type Result<T, E = PodError> = std::result::Result<T, E>;

/// How the virtual node treats a failed provider call, and what the kubelet
/// API answers for it.
///
/// | kind | Go counterpart | controllers | kubelet API |
/// |---|---|---|---|
/// | `NotFound` | `errdefs.NotFound` | the pod is absent (a delete succeeded) | 404 |
/// | `InvalidInput` | `errdefs.InvalidInput` | the pod cannot run as specified | 400 |
/// | `NotImplemented` | (none) | the capability is absent | 501 |
/// | `AlreadyExists` | (none) | a create found the pod; treated as success | 409 |
/// | `Unavailable { retry_after }` | (none) | transient; retried, never fails the pod | 503 |
/// | `Other` | any other error | retried with backoff | 500 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PodErrorKind {
    /// The pod, container or resource does not exist.
    NotFound,
    /// The request is invalid (bad spec, bad parameters).
    InvalidInput,
    /// The provider does not implement this call.
    NotImplemented,
    /// The pod already exists in the provider.
    AlreadyExists,
    /// The backend is temporarily unavailable or throttling; retry later.
    Unavailable {
        /// The delay the backend asked for, if it said.
        retry_after: Option<Duration>,
    },
    /// Any other failure.
    Other,
}

impl PodErrorKind {
    /// The HTTP status the kubelet API answers with for this kind.
    pub fn http_status(self) -> u16 {
        match self {
            Self::NotFound => 404,
            Self::InvalidInput => 400,
            Self::NotImplemented => 501,
            Self::AlreadyExists => 409,
            Self::Unavailable { .. } => 503,
            Self::Other => 500,
        }
    }
}

stratus_error_kind::kinded_error! {
    /// An error returned by a pod provider.
    ///
    /// ```
    /// use stratus_pod::{PodError, PodErrorKind};
    ///
    /// let err = PodError::not_found("pod default/web is not running")
    ///     .context("reading logs");
    /// assert!(err.is_not_found());
    /// assert_eq!(err.kind().http_status(), 404);
    /// assert_eq!(err.to_string(), "reading logs: pod default/web is not running");
    /// ```
    pub struct PodError(PodErrorKind);
    /// Classify any error by walking its source chain for a [`PodError`] of a
    /// specific kind.
    pub fn classify;
}

impl PodError {
    /// Not found.
    pub fn not_found(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(PodErrorKind::NotFound, message)
    }

    /// Invalid input.
    pub fn invalid_input(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(PodErrorKind::InvalidInput, message)
    }

    /// Not implemented.
    pub fn not_implemented(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(PodErrorKind::NotImplemented, message)
    }

    /// Already exists.
    pub fn already_exists(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(PodErrorKind::AlreadyExists, message)
    }

    /// Temporarily unavailable; retry after `retry_after` if given.
    pub fn unavailable(
        retry_after: Option<Duration>,
        message: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self::new(PodErrorKind::Unavailable { retry_after }, message)
    }

    /// True if the kind is `NotFound`.
    pub fn is_not_found(&self) -> bool {
        self.kind() == PodErrorKind::NotFound
    }

    /// True if the kind is `InvalidInput`.
    pub fn is_invalid_input(&self) -> bool {
        self.kind() == PodErrorKind::InvalidInput
    }

    /// True if the kind is `NotImplemented`.
    pub fn is_not_implemented(&self) -> bool {
        self.kind() == PodErrorKind::NotImplemented
    }

    /// True if the kind is `Unavailable` (transient).
    pub fn is_transient(&self) -> bool {
        matches!(self.kind(), PodErrorKind::Unavailable { .. })
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as StdError;
    use std::fmt;

    #[derive(Debug)]
    struct Foreign(PodError);

    impl fmt::Display for Foreign {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "backend said: {}", self.0)
        }
    }

    impl StdError for Foreign {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn classification_survives_wrapping() {
        let err = PodError::other(Foreign(PodError::not_found("gone").context("get")));
        assert!(err.is_not_found());
        assert_eq!(err.to_string(), "backend said: get: gone");
        let transient =
            PodError::unavailable(Some(Duration::from_secs(1)), "503").context("create");
        assert!(transient.is_transient());
        assert_eq!(classify(&Foreign(transient)).http_status(), 503);
    }

    #[test]
    fn http_mapping() {
        assert_eq!(PodErrorKind::NotFound.http_status(), 404);
        assert_eq!(PodErrorKind::InvalidInput.http_status(), 400);
        assert_eq!(PodErrorKind::NotImplemented.http_status(), 501);
        assert_eq!(
            PodError::other(std::io::Error::other("x"))
                .kind()
                .http_status(),
            500
        );
    }
}
