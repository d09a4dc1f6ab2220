//! The serving flags: the secure port and the webhooks' (Go's `SecureServingOptions`,
//! `WebhookOptions`, `WebhookServingOptions`).

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{ArgAction, Args};

/// Which admission webhooks are served (Go's `WebhookOptions`).
#[derive(Debug, Clone, Args)]
pub struct WebhookOptions {
    /// Admission webhooks to serve: `*` for all registered, `name` to add
    /// one, `-name` to leave one out. None by default.
    #[arg(long = "webhooks", value_delimiter = ',', help_heading = "webhook")]
    pub webhooks: Vec<String>,
}

/// Where and how the webhooks are served (Go's `WebhookServingOptions`).
#[derive(Debug, Clone, Args)]
pub struct WebhookServingOptions {
    /// The HTTPS port of the admission webhooks, bound only when a webhook
    /// is enabled; 0 turns them off.
    #[arg(
        long = "webhook-secure-port",
        default_value_t = 10260,
        help_heading = "webhook serving"
    )]
    pub webhook_secure_port: u16,
    /// The address the webhooks are served on.
    #[arg(
        long = "webhook-bind-address",
        default_value = "0.0.0.0",
        help_heading = "webhook serving"
    )]
    pub webhook_bind_address: IpAddr,
    /// Where a generated webhook certificate would be written (kept for
    /// compatibility; Stratus keeps it in memory).
    #[arg(
        long = "webhook-cert-dir",
        default_value = "",
        help_heading = "webhook serving"
    )]
    pub webhook_cert_dir: String,
    /// The webhooks' serving certificate (PEM); self-signed in memory if
    /// empty.
    #[arg(long = "webhook-tls-cert-file", help_heading = "webhook serving")]
    pub webhook_tls_cert_file: Option<PathBuf>,
    /// The webhooks' serving key (PEM).
    #[arg(
        long = "webhook-tls-private-key-file",
        help_heading = "webhook serving"
    )]
    pub webhook_tls_private_key_file: Option<PathBuf>,
    /// The webhooks' TLS 1.2 cipher suites (Go's names).
    #[arg(
        long = "webhook-tls-cipher-suites",
        value_delimiter = ',',
        help_heading = "webhook serving"
    )]
    pub webhook_tls_cipher_suites: Vec<String>,
    /// The webhooks' minimum TLS version (VersionTLS12, VersionTLS13).
    #[arg(
        long = "webhook-tls-min-version",
        default_value = "",
        help_heading = "webhook serving"
    )]
    pub webhook_tls_min_version: String,
    /// The webhooks' key exchange curves (Go's names or IDs).
    #[arg(
        long = "webhook-tls-curve-preferences",
        value_delimiter = ',',
        help_heading = "webhook serving"
    )]
    pub webhook_tls_curve_preferences: Vec<String>,
    /// The webhooks' SNI certificates: `cert,key` or `cert,key:name1,name2`
    /// (repeatable).
    #[arg(long = "webhook-tls-sni-cert-key", help_heading = "webhook serving")]
    pub webhook_tls_sni_cert_key: Vec<String>,
    /// Serve the webhooks over HTTP/1.1 only.
    #[arg(long = "webhook-disable-http2-serving", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "webhook serving")]
    pub webhook_disable_http2_serving: bool,
}

/// The secure port of `/healthz`, `/metrics` and `/configz` (Go's `SecureServingOptions`).
#[derive(Debug, Clone, Args)]
pub struct SecureServingOptions {
    /// The HTTPS port of /healthz, /metrics and /configz; 0 turns serving
    /// off.
    #[arg(
        long = "secure-port",
        default_value_t = 10258,
        help_heading = "secure serving"
    )]
    pub secure_port: u16,
    /// The address to serve on.
    #[arg(
        long = "bind-address",
        default_value = "0.0.0.0",
        help_heading = "secure serving"
    )]
    pub bind_address: IpAddr,
    /// Where a generated certificate would be written (kept for
    /// compatibility; Stratus keeps it in memory).
    #[arg(long = "cert-dir", default_value = "", help_heading = "secure serving")]
    pub cert_dir: String,
    /// The serving certificate (PEM); self-signed in memory if empty.
    #[arg(long = "tls-cert-file", help_heading = "secure serving")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving key (PEM).
    #[arg(long = "tls-private-key-file", help_heading = "secure serving")]
    pub tls_private_key_file: Option<PathBuf>,
    /// TLS 1.2 cipher suites (Go's names; TLS 1.3 suites are always on).
    #[arg(
        long = "tls-cipher-suites",
        value_delimiter = ',',
        help_heading = "secure serving"
    )]
    pub tls_cipher_suites: Vec<String>,
    /// The minimum TLS version: VersionTLS12 or VersionTLS13 (VersionTLS10
    /// and VersionTLS11 are accepted with a warning; rustls serves 1.2+).
    #[arg(
        long = "tls-min-version",
        default_value = "",
        help_heading = "secure serving"
    )]
    pub tls_min_version: String,
    /// Key exchange curves (Go's names or IDs).
    #[arg(
        long = "tls-curve-preferences",
        value_delimiter = ',',
        help_heading = "secure serving"
    )]
    pub tls_curve_preferences: Vec<String>,
    /// SNI certificates: `cert,key` or `cert,key:name1,*.name2` (repeatable;
    /// without names, the certificate's DNS names).
    #[arg(long = "tls-sni-cert-key", help_heading = "secure serving")]
    pub tls_sni_cert_key: Vec<String>,
    /// The most concurrent streams of one HTTP/2 connection; 0 keeps the
    /// default.
    #[arg(
        long = "http2-max-streams-per-connection",
        default_value_t = 0,
        help_heading = "secure serving"
    )]
    pub http2_max_streams_per_connection: u32,
    /// Bind with SO_REUSEPORT (several processes on one port).
    #[arg(long = "permit-port-sharing", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "secure serving")]
    pub permit_port_sharing: bool,
    /// Bind with SO_REUSEADDR (rebind while old connections linger).
    #[arg(long = "permit-address-sharing", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "secure serving")]
    pub permit_address_sharing: bool,
}
