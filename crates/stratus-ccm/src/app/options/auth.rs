//! The secure port's delegated authentication and authorization flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use stratus_runtime::duration::parse_go_duration;

/// Who may call the secure port (Go's `DelegatingAuthenticationOptions`).
#[derive(Debug, Clone, Args)]
pub struct AuthenticationOptions {
    /// The kubeconfig for TokenReviews; the manager's client if empty.
    #[arg(
        long = "authentication-kubeconfig",
        default_value = "",
        help_heading = "authentication"
    )]
    pub authentication_kubeconfig: String,
    /// Do not read the client CA from the
    /// `kube-system/extension-apiserver-authentication` ConfigMap.
    #[arg(long = "authentication-skip-lookup", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "authentication")]
    pub authentication_skip_lookup: bool,
    /// A PEM bundle of CAs whose client certificates identify callers
    /// (subject CN = user, O = groups).
    #[arg(long = "client-ca-file", help_heading = "authentication")]
    pub client_ca_file: Option<PathBuf>,
    /// How long token review answers are reused.
    #[arg(long = "authentication-token-webhook-cache-ttl", value_parser = parse_go_duration, default_value = "10s", help_heading = "authentication")]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// Go on (with a warning) when the
    /// `kube-system/extension-apiserver-authentication` lookup fails;
    /// otherwise the manager stops.
    #[arg(long = "authentication-tolerate-lookup-failure", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "authentication")]
    pub authentication_tolerate_lookup_failure: bool,
    /// The CA (PEM) of front proxies; their requests name the user in
    /// headers.
    #[arg(long = "requestheader-client-ca-file", help_heading = "authentication")]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Common names a front proxy's certificate may have (any when empty).
    #[arg(
        long = "requestheader-allowed-names",
        value_delimiter = ',',
        help_heading = "authentication"
    )]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the user.
    #[arg(
        long = "requestheader-username-headers",
        value_delimiter = ',',
        default_value = "x-remote-user",
        help_heading = "authentication"
    )]
    pub requestheader_username_headers: Vec<String>,
    /// Headers naming the user's UID.
    #[arg(
        long = "requestheader-uid-headers",
        value_delimiter = ',',
        default_value = "x-remote-uid",
        help_heading = "authentication"
    )]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers naming the user's groups.
    #[arg(
        long = "requestheader-group-headers",
        value_delimiter = ',',
        default_value = "x-remote-group",
        help_heading = "authentication"
    )]
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers holding extra user attributes.
    #[arg(
        long = "requestheader-extra-headers-prefix",
        value_delimiter = ',',
        default_value = "x-remote-extra-",
        help_heading = "authentication"
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,
}

/// What callers of the secure port may do (Go's `DelegatingAuthorizationOptions`).
#[derive(Debug, Clone, Args)]
pub struct AuthorizationOptions {
    /// The kubeconfig for SubjectAccessReviews; the manager's client if
    /// empty.
    #[arg(
        long = "authorization-kubeconfig",
        default_value = "",
        help_heading = "authorization"
    )]
    pub authorization_kubeconfig: String,
    /// Paths served without authorization (`*` at the end: a prefix; `/*`
    /// opens everything).
    #[arg(
        long = "authorization-always-allow-paths",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        help_heading = "authorization"
    )]
    pub authorization_always_allow_paths: Vec<String>,
    /// How long allowing access reviews are reused.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", value_parser = parse_go_duration, default_value = "10s", help_heading = "authorization")]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long denying access reviews are reused.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", value_parser = parse_go_duration, default_value = "10s", help_heading = "authorization")]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
}
