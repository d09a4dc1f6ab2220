//! Serving over TLS with a self-signed certificate authority, exported for
//! kubeconfigs and clients.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::tls_ca::Authority;

/// A CA and a serving certificate signed by it.
pub(crate) struct ServingCert {
    pub(crate) ca_pem: String,
    pub(crate) ca_der: Vec<u8>,
    pub(crate) config: Arc<rustls::ServerConfig>,
}

/// Make a CA and a certificate for 127.0.0.1, ::1 and localhost, served
/// with HTTP/2 and HTTP/1.1 offered through ALPN. Clients may present a
/// certificate signed by `client_ca_pem` (kube-apiserver's
/// `--client-ca-file`); those without one are served too (tokens, or
/// anonymous).
pub(crate) fn self_signed(client_ca_pem: &str) -> Result<ServingCert, String> {
    let ca = Authority::new("stratus-harness-apiserver-ca")?;
    let (leaf, key) = ca.issue_serving("stratus-harness-apiserver", &["localhost"])?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| e.to_string())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![
                CertificateDer::from(leaf),
                CertificateDer::from(ca.ca_der.clone()),
            ],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ServingCert {
        ca_pem: ca.ca_pem.clone(),
        ca_der: ca.ca_der.clone(),
        config: Arc::new(config),
    })
}

/// The user a client certificate names: the subject's common name, its
/// organizations as groups (as kube-apiserver reads x509 client
/// certificates).
pub(crate) fn user_of_certificate(der: &[u8]) -> Option<crate::ReviewUser> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let username = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_owned();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    groups.push("system:authenticated".into());
    Some(crate::ReviewUser {
        username,
        uid: String::new(),
        groups,
    })
}
