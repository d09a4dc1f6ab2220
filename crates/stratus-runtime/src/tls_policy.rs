//! What a server's TLS accepts, from Go's flags: `--tls-min-version`,
//! `--tls-cipher-suites`, `--tls-curve-preferences` and `--tls-sni-cert-key`
//! (and their `--webhook-` twins), with Go's names and syntax.
//!
//! rustls serves TLS 1.2 and 1.3 with AEAD suites only. Names Go knows but
//! rustls cannot serve (CBC, RC4 and 3DES suites, RSA key exchange, TLS 1.0
//! and 1.1, the P-521 curve) are accepted with a warning and left out;
//! names Go does not know are errors, as in Go. As in Go, the cipher list
//! governs TLS 1.2: TLS 1.3 suites are always offered.
//!
//! ```
//! use stratus_runtime::tls_policy::TlsPolicy;
//!
//! let (policy, warnings) = TlsPolicy::from_go_flags(
//!     "VersionTLS12",
//!     &["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(), "TLS_RSA_WITH_AES_128_CBC_SHA".into()],
//!     &[],
//!     &[],
//! )
//! .unwrap();
//! assert_eq!(warnings.len(), 1, "the CBC suite is not served");
//! assert!(policy.is_restricted());
//! assert!(TlsPolicy::from_go_flags("VersionTLS14", &[], &[], &[]).is_err());
//! ```

use std::path::Path;
use std::sync::Arc;

use rustls::SupportedCipherSuite;
use rustls::crypto::SupportedKxGroup;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::tls::{ServingCertificate, TlsError, client_verifier};

/// A bad TLS flag value.
#[derive(Debug, thiserror::Error)]
pub enum TlsPolicyError {
    /// `--tls-min-version` is not one of Go's names.
    #[error("unknown tls version {0:?} (VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13)")]
    Version(String),
    /// A cipher suite Go does not know.
    #[error("cipher suite {0} not supported or doesn't exist")]
    CipherSuite(String),
    /// A curve Go does not know.
    #[error(
        "unknown curve {0:?} (X25519, CurveP256, CurveP384, CurveP521, X25519MLKEM768 or their IDs)"
    )]
    Curve(String),
    /// Nothing servable is left of the curves named.
    #[error("none of the curves {0:?} can be served (X25519, CurveP256, CurveP384)")]
    NoCurve(Vec<String>),
    /// A `--tls-sni-cert-key` value is not `cert,key[:name,...]`.
    #[error("--tls-sni-cert-key {0:?}: expected cert,key or cert,key:name1,name2")]
    SniSyntax(String),
    /// An SNI certificate could not be read.
    #[error("--tls-sni-cert-key {value:?}: {source}")]
    SniCertificate {
        /// The flag value.
        value: String,
        /// Why.
        source: TlsError,
    },
}

/// A certificate served to clients asking for one of its names.
#[derive(Debug, Clone)]
struct SniCertificate {
    /// Names, lower case; `*.example.com` matches one label.
    names: Vec<String>,
    key: Arc<CertifiedKey>,
}

/// What a server's TLS accepts (the default: rustls's safe defaults).
#[derive(Debug, Clone, Default)]
pub struct TlsPolicy {
    tls13_only: bool,
    cipher_suites: Option<Vec<SupportedCipherSuite>>,
    kx_groups: Option<Vec<&'static dyn SupportedKxGroup>>,
    sni: Vec<SniCertificate>,
}

/// Go's TLS 1.2 suite names rustls cannot serve (known, refused with a
/// warning).
const GO_UNSERVABLE_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Go's TLS 1.3 suite names: always offered, as in Go.
const GO_TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

impl TlsPolicy {
    /// The policy of Go's flags: `min_version` (`VersionTLS12`; empty is
    /// Go's default, TLS 1.2 here), `cipher_suites` (Go's names; empty:
    /// the defaults), `curves` (Go's names or IDs; empty: the defaults) and
    /// `sni` (`cert,key` or `cert,key:name1,name2`; without names, the
    /// certificate's DNS names). Also the warnings for values accepted but
    /// not served.
    pub fn from_go_flags(
        min_version: &str,
        cipher_suites: &[String],
        curves: &[String],
        sni: &[String],
    ) -> Result<(Self, Vec<String>), TlsPolicyError> {
        let mut warnings = Vec::new();
        let tls13_only = match min_version {
            "" | "VersionTLS12" => false,
            "VersionTLS10" | "VersionTLS11" => {
                warnings.push(format!(
                    "--tls-min-version {min_version}: TLS 1.0 and 1.1 are not served (rustls); the minimum is TLS 1.2"
                ));
                false
            }
            "VersionTLS13" => true,
            other => return Err(TlsPolicyError::Version(other.to_owned())),
        };
        let all = provider().cipher_suites;
        let cipher_suites = match cipher_suites.iter().filter(|s| !s.is_empty()).count() {
            0 => None,
            _ => {
                let mut chosen: Vec<SupportedCipherSuite> = all
                    .iter()
                    .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)))
                    .copied()
                    .collect();
                for name in cipher_suites
                    .iter()
                    .map(|s| s.trim())
                    .filter(|s| !s.is_empty())
                {
                    // Go's short ChaCha20 aliases.
                    let canonical = match name {
                        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
                            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
                        }
                        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
                            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
                        }
                        n => n,
                    };
                    if GO_TLS13_SUITES.contains(&canonical) {
                        continue;
                    }
                    if GO_UNSERVABLE_SUITES.contains(&canonical) {
                        warnings.push(format!(
                            "cipher suite {name} is not served (rustls offers AEAD suites with ECDHE only)"
                        ));
                        continue;
                    }
                    let found = all.iter().find(|s| {
                        matches!(s, SupportedCipherSuite::Tls12(_))
                            && format!("{:?}", s.suite()) == canonical
                    });
                    match found {
                        Some(s) if !chosen.contains(s) => chosen.push(*s),
                        Some(_) => {}
                        None => return Err(TlsPolicyError::CipherSuite(name.to_owned())),
                    }
                }
                if !tls13_only
                    && !chosen
                        .iter()
                        .any(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
                {
                    warnings.push(
                        "no TLS 1.2 cipher suite of --tls-cipher-suites can be served; only TLS 1.3 clients can connect".into(),
                    );
                }
                Some(chosen)
            }
        };
        let kx_groups = match curves.iter().filter(|c| !c.is_empty()).count() {
            0 => None,
            _ => {
                let groups = provider().kx_groups;
                let mut chosen: Vec<&'static dyn SupportedKxGroup> = Vec::new();
                for curve in curves.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
                    let wanted = match curve {
                        "X25519" | "29" => rustls::NamedGroup::X25519,
                        "CurveP256" | "P256" | "23" => rustls::NamedGroup::secp256r1,
                        "CurveP384" | "P384" | "24" => rustls::NamedGroup::secp384r1,
                        "CurveP521" | "P521" | "25" | "X25519MLKEM768" | "4588" => {
                            warnings
                                .push(format!("curve {curve} is not served (rustls with ring)"));
                            continue;
                        }
                        other => return Err(TlsPolicyError::Curve(other.to_owned())),
                    };
                    if let Some(g) = groups.iter().find(|g| g.name() == wanted) {
                        chosen.push(*g);
                    }
                }
                if chosen.is_empty() {
                    return Err(TlsPolicyError::NoCurve(curves.to_vec()));
                }
                Some(chosen)
            }
        };
        let sni = sni
            .iter()
            .filter(|v| !v.is_empty())
            .map(|v| sni_certificate(v))
            .collect::<Result<_, _>>()?;
        Ok((
            Self {
                tls13_only,
                cipher_suites,
                kx_groups,
                sni,
            },
            warnings,
        ))
    }

    /// Whether it differs from rustls's defaults.
    pub fn is_restricted(&self) -> bool {
        self.tls13_only
            || self.cipher_suites.is_some()
            || self.kx_groups.is_some()
            || !self.sni.is_empty()
    }

    /// A rustls server configuration serving `certificate` under this
    /// policy (versions, suites, curves, SNI certificates), offering
    /// HTTP/2 through ALPN only when `http2`. With `client_ca_pem`, clients
    /// are asked for a certificate and any they present is verified
    /// against its CAs (clients without one are still served; see
    /// [`auth`](crate::auth)).
    ///
    /// ```
    /// use stratus_runtime::tls_policy::TlsPolicy;
    /// let cert = stratus_runtime::tls::self_signed("my-ccm", &["localhost"]).unwrap();
    /// let config = TlsPolicy::default().server_config(&cert, None, false).unwrap();
    /// assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    /// assert!(TlsPolicy::default().server_config(&cert, Some("no CA"), true).is_err());
    /// ```
    pub fn server_config(
        &self,
        certificate: &ServingCertificate,
        client_ca_pem: Option<&str>,
        http2: bool,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let err = |e: &dyn std::fmt::Display| TlsError::Config(e.to_string());
        let mut provider = provider();
        if let Some(suites) = &self.cipher_suites {
            provider.cipher_suites = suites.clone();
        }
        if let Some(groups) = &self.kx_groups {
            provider.kx_groups = groups.clone();
        }
        let provider = Arc::new(provider);
        let versions: &[&'static rustls::SupportedProtocolVersion] = if self.tls13_only {
            &[&rustls::version::TLS13]
        } else {
            &[&rustls::version::TLS13, &rustls::version::TLS12]
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| err(&e))?;
        let builder = match client_ca_pem {
            None => builder.with_no_client_auth(),
            Some(pem) => builder.with_client_cert_verifier(client_verifier(pem, provider)?),
        };
        let reloads = certificate.reloads();
        let mut config = match (&reloads, self.sni.is_empty()) {
            (Some(resolver), true) => builder.with_cert_resolver(resolver.clone()),
            (None, true) => {
                let (chain, key) = certificate.pair();
                builder.with_single_cert(chain, key).map_err(|e| err(&e))?
            }
            (_, false) => {
                let default = match reloads {
                    Some(resolver) => resolver,
                    None => Arc::new(Fixed(certificate.certified_key()?)),
                };
                builder.with_cert_resolver(Arc::new(SniResolver {
                    sni: self.sni.clone(),
                    default,
                }))
            }
        };
        config.alpn_protocols = if http2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        Ok(Arc::new(config))
    }
}

/// Always the same pair.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// Parse one `--tls-sni-cert-key` value.
fn sni_certificate(value: &str) -> Result<SniCertificate, TlsPolicyError> {
    let (files, names) = match value.split_once(':') {
        Some((files, names)) => (files, Some(names)),
        None => (value, None),
    };
    let (cert, key) = files
        .split_once(',')
        .filter(|(c, k)| !c.trim().is_empty() && !k.trim().is_empty() && !k.contains(','))
        .ok_or_else(|| TlsPolicyError::SniSyntax(value.to_owned()))?;
    let serving = crate::tls::from_pem_files(Path::new(cert.trim()), Path::new(key.trim()))
        .map_err(|source| TlsPolicyError::SniCertificate {
            value: value.to_owned(),
            source,
        })?;
    let mut names: Vec<String> = match names {
        Some(n) => n
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect(),
        None => serving.dns_names(),
    };
    names.dedup();
    if names.is_empty() {
        return Err(TlsPolicyError::SniSyntax(value.to_owned()));
    }
    let key = serving
        .certified_key()
        .map_err(|source| TlsPolicyError::SniCertificate {
            value: value.to_owned(),
            source,
        })?;
    Ok(SniCertificate { names, key })
}

/// Serves the SNI certificate whose name matches, else the default.
#[derive(Debug)]
struct SniResolver {
    sni: Vec<SniCertificate>,
    default: Arc<dyn ResolvesServerCert>,
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => name
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest == suffix),
        None => pattern == name,
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(name) = hello.server_name().map(str::to_ascii_lowercase) {
            // Exact names win over wildcards, as in Go.
            let exact = self.sni.iter().find(|c| c.names.contains(&name));
            let wild = || {
                self.sni
                    .iter()
                    .find(|c| c.names.iter().any(|p| matches(p, &name)))
            };
            if let Some(c) = exact.or_else(wild) {
                return Some(c.key.clone());
            }
        }
        self.default.resolve(hello)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_one_label() {
        assert!(matches("*.example.com", "a.example.com"));
        assert!(!matches("*.example.com", "a.b.example.com"));
        assert!(!matches("*.example.com", "example.com"));
        assert!(matches("example.com", "example.com"));
    }

    #[test]
    fn versions_suites_and_curves() {
        let (p, w) = TlsPolicy::from_go_flags("VersionTLS13", &[], &[], &[]).unwrap();
        assert!(p.tls13_only && w.is_empty());
        let (_, w) = TlsPolicy::from_go_flags("VersionTLS10", &[], &[], &[]).unwrap();
        assert_eq!(w.len(), 1);
        let err = TlsPolicy::from_go_flags("", &["TLS_NOPE".into()], &[], &[]).unwrap_err();
        assert!(err.to_string().contains("TLS_NOPE"));
        let (p, _) = TlsPolicy::from_go_flags(
            "",
            &[
                "TLS_AES_128_GCM_SHA256".into(),
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305".into(),
            ],
            &[],
            &[],
        )
        .unwrap();
        let suites = p.cipher_suites.unwrap();
        assert_eq!(
            suites
                .iter()
                .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
                .count(),
            1
        );
        let (p, w) =
            TlsPolicy::from_go_flags("", &[], &["X25519".into(), "CurveP521".into()], &[]).unwrap();
        assert_eq!(p.kx_groups.unwrap().len(), 1);
        assert_eq!(w.len(), 1);
        assert!(TlsPolicy::from_go_flags("", &[], &["CurveP521".into()], &[]).is_err());
        assert!(TlsPolicy::from_go_flags("", &[], &["Curve9".into()], &[]).is_err());
        assert!(matches!(
            TlsPolicy::from_go_flags("", &[], &[], &["only-one-file".into()]),
            Err(TlsPolicyError::SniSyntax(_))
        ));
        assert!(matches!(
            TlsPolicy::from_go_flags("", &[], &[], &["/nonexistent.crt,/nonexistent.key".into()]),
            Err(TlsPolicyError::SniCertificate { .. })
        ));
    }
}
