//! Container logs.

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::{ByteStream, ContainerRef, PodError, Result};

/// The options of a log request, as the kubelet's `/containerLogs` takes them
/// (Go: `ContainerLogOpts`; Kubernetes: `PodLogOptions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerLogOptions {
    /// Only the last N lines (`tailLines`).
    pub tail_lines: Option<i64>,
    /// At most N bytes (`limitBytes`).
    pub limit_bytes: Option<i64>,
    /// Prefix each line with an RFC3339 timestamp (`timestamps`).
    pub timestamps: bool,
    /// Keep streaming new output (`follow`).
    pub follow: bool,
    /// The previous, terminated instance of the container (`previous`).
    pub previous: bool,
    /// Only output from the last N seconds (`sinceSeconds`).
    pub since_seconds: Option<i64>,
    /// Only output after this time (`sinceTime`).
    pub since_time: Option<Time>,
}

impl ContainerLogOptions {
    /// Check the options as the API server does for `PodLogOptions`.
    ///
    /// ```
    /// use stratus_pod::ContainerLogOptions;
    ///
    /// assert!(ContainerLogOptions { tail_lines: Some(0), ..Default::default() }.validate().is_ok());
    /// assert!(ContainerLogOptions { tail_lines: Some(-1), ..Default::default() }.validate().is_err());
    /// assert!(ContainerLogOptions { limit_bytes: Some(0), ..Default::default() }.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = self.tail_lines
            && n < 0
        {
            return Err(PodError::invalid_input(format!(
                "tailLines: Invalid value: {n}: must be greater than or equal to 0"
            )));
        }
        if let Some(n) = self.limit_bytes
            && n < 1
        {
            return Err(PodError::invalid_input(format!(
                "limitBytes: Invalid value: {n}: must be greater than 0"
            )));
        }
        if let Some(n) = self.since_seconds
            && n < 1
        {
            return Err(PodError::invalid_input(format!(
                "sinceSeconds: Invalid value: {n}: must be greater than 0"
            )));
        }
        if self.since_seconds.is_some() && self.since_time.is_some() {
            return Err(PodError::invalid_input(
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            ));
        }
        Ok(())
    }

    /// The earliest time a line may have to be served, the time being
    /// `now`: `sinceTime`, or `now` minus `sinceSeconds` (the beginning of
    /// time when that reaches past it: no panic on
    /// `sinceSeconds=999999999999`); `None` for every line.
    ///
    /// ```
    /// use stratus_pod::ContainerLogOptions;
    /// use k8s_openapi::jiff::Timestamp;
    ///
    /// let now = Timestamp::from_second(1_800_000_000).unwrap();
    /// assert_eq!(ContainerLogOptions::default().since(now), None);
    /// let recent = ContainerLogOptions { since_seconds: Some(60), ..Default::default() };
    /// assert_eq!(recent.since(now), Some(Timestamp::from_second(1_799_999_940).unwrap()));
    /// let all = ContainerLogOptions { since_seconds: Some(999_999_999_999), ..Default::default() };
    /// assert_eq!(all.since(now), Some(Timestamp::MIN));
    /// ```
    pub fn since(&self, now: k8s_openapi::jiff::Timestamp) -> Option<k8s_openapi::jiff::Timestamp> {
        use k8s_openapi::jiff::{SignedDuration, Timestamp};
        match (&self.since_time, self.since_seconds) {
            (Some(time), _) => Some(time.0),
            (None, Some(seconds)) => Some(
                now.checked_sub(SignedDuration::from_secs(seconds))
                    .unwrap_or(Timestamp::MIN),
            ),
            (None, None) => None,
        }
    }
}

/// Serves container logs (Go: `GetContainerLogs`).
#[async_trait]
pub trait ContainerLogs: Send + Sync {
    /// The container's log as a stream. With `follow`, the stream stays open
    /// until the container ends or the client goes away (the stream is then
    /// dropped). `NotFound` for an unknown pod or container.
    async fn container_logs(
        &self,
        container: &ContainerRef,
        options: &ContainerLogOptions,
    ) -> Result<ByteStream>;
}
