//! Front-proxy (request-header) authentication, as Go's
//! `--requestheader-*` flags: a proxy presenting a client certificate signed
//! by the request-header CA (and, when names are listed, with one of them as
//! its common name) says who the user is in headers.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;

use super::UserInfo;
use crate::tls::TlsError;

/// The trusted front proxy: its CA, the names it may have, and the headers
/// it writes.
///
/// ```
/// use stratus_runtime::auth::RequestHeader;
/// use stratus_runtime::tls::CertificateAuthority;
///
/// let ca = CertificateAuthority::new("front-proxy-ca").unwrap();
/// let header = RequestHeader::new(ca.ca_pem(), vec!["front-proxy-client".into()]).unwrap();
/// assert_eq!(header.username_headers, ["X-Remote-User"]);
/// assert!(RequestHeader::new("not a certificate", vec![]).is_err());
/// ```
#[derive(Debug)]
pub struct RequestHeader {
    verifier: Arc<dyn ClientCertVerifier>,
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    /// Common names the proxy's certificate may have (any when empty).
    pub allowed_names: Vec<String>,
    /// Headers holding the user name, first present wins (Go's default
    /// `X-Remote-User`).
    pub username_headers: Vec<String>,
    /// Headers holding the user's UID (Go's default `X-Remote-Uid`).
    pub uid_headers: Vec<String>,
    /// Headers holding the groups, every value counts (Go's default
    /// `X-Remote-Group`).
    pub group_headers: Vec<String>,
    /// Prefixes of headers holding extra attributes (Go's default
    /// `X-Remote-Extra-`).
    pub extra_headers_prefix: Vec<String>,
}

impl RequestHeader {
    /// Trust proxies whose certificates `ca_pem` signed, with one of
    /// `allowed_names` as common name (any when empty), writing Go's
    /// default headers.
    pub fn new(ca_pem: &str, allowed_names: Vec<String>) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(Self {
            verifier: crate::tls::client_verifier(ca_pem, provider)?,
            client_ca: None,
            allowed_names,
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec!["X-Remote-Uid".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        })
    }

    /// The CA of ordinary client certificates (Go's `--client-ca-file`),
    /// when the TLS layer trusts both it and the proxy's: a certificate of
    /// the proxy's CA is then still a user of its own when this CA issued it
    /// too (Go tries both authenticators). Without it, a proxy certificate
    /// that names no user is nobody, as in Go with separate CAs.
    ///
    /// ```
    /// use stratus_runtime::auth::RequestHeader;
    /// use stratus_runtime::tls::CertificateAuthority;
    ///
    /// let proxy = CertificateAuthority::new("front-proxy-ca").unwrap();
    /// let clients = CertificateAuthority::new("client-ca").unwrap();
    /// let header = RequestHeader::new(proxy.ca_pem(), vec![]).unwrap().with_client_ca(clients.ca_pem()).unwrap();
    /// # let _ = header;
    /// ```
    pub fn with_client_ca(mut self, ca_pem: &str) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        self.client_ca = Some(crate::tls::client_verifier(ca_pem, provider)?);
        Ok(self)
    }

    /// What the certificate `der` and the headers say: not the proxy's
    /// certificate, the proxy's without a user header, or the user the
    /// proxy names; `Err` (401) for a certificate of the proxy's CA with a
    /// name not allowed.
    pub(crate) fn authenticate(
        &self,
        der: &[u8],
        headers: &http::HeaderMap,
    ) -> Result<ProxyAnswer, String> {
        let cert = CertificateDer::from(der.to_vec());
        if self
            .verifier
            .verify_client_cert(&cert, &[], UnixTime::now())
            .is_err()
        {
            return Ok(ProxyAnswer::NotTheProxy);
        }
        let client_ca_issued = self.client_ca.as_ref().is_some_and(|client_ca| {
            client_ca
                .verify_client_cert(&cert, &[], UnixTime::now())
                .is_ok()
        });
        if !self.allowed_names.is_empty() {
            let cn = super::user_of_certificate(der)
                .map(|u| u.username)
                .unwrap_or_default();
            if !self.allowed_names.contains(&cn) {
                if client_ca_issued {
                    return Ok(ProxyAnswer::NotTheProxy);
                }
                return Err(format!(
                    "the front proxy's certificate {cn:?} is not one of --requestheader-allowed-names"
                ));
            }
        }
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_owned)
                .filter(|v| !v.is_empty())
                .collect()
        };
        let first = |names: &[String]| names.iter().flat_map(|n| values(n)).next();
        let Some(username) = first(&self.username_headers) else {
            return Ok(if client_ca_issued {
                ProxyAnswer::NotTheProxy
            } else {
                ProxyAnswer::NoUser
            });
        };
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            for prefix in &self.extra_headers_prefix {
                if let Some(key) = name.as_str().strip_prefix(&prefix.to_ascii_lowercase())
                    && let Ok(v) = value.to_str()
                {
                    extra.entry(unescape(key)).or_default().push(v.to_owned());
                }
            }
        }
        Ok(ProxyAnswer::User(UserInfo {
            username,
            uid: first(&self.uid_headers).unwrap_or_default(),
            groups: self.group_headers.iter().flat_map(|n| values(n)).collect(),
            extra,
        }))
    }
}

/// What a front proxy's certificate and headers say.
#[derive(Debug)]
pub(crate) enum ProxyAnswer {
    /// The certificate is not one the proxy CA issued.
    NotTheProxy,
    /// The proxy's certificate (not also the client CA's), without a user
    /// header: as in Go, the proxy itself is not a user.
    NoUser,
    /// The user the proxy names.
    User(UserInfo),
}

/// Extra keys are percent-encoded in header names (Go's rule), and lower
/// case.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&key[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_lowercase()
}

#[cfg(test)]
mod tests {
    #[test]
    fn extra_keys_are_unescaped() {
        assert_eq!(super::unescape("scopes%2fread"), "scopes/read");
        assert_eq!(super::unescape("a%zz"), "a%zz");
    }
}
