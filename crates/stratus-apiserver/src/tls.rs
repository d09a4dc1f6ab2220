//! Serving over TLS with a self-signed certificate authority, exported for
//! kubeconfigs and clients.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::tls_ca::Authority;

/// A CA and a serving certificate signed by it.
pub(crate) struct ServingCert {
    pub(crate) ca_pem: String,
    pub(crate) ca_der: Vec<u8>,
    pub(crate) config: Arc<rustls::ServerConfig>,
}

/// Make a CA and a certificate for 127.0.0.1, ::1 and localhost, served
/// with HTTP/2 and HTTP/1.1 offered through ALPN.
pub(crate) fn self_signed() -> Result<ServingCert, String> {
    let ca = Authority::new("stratus-harness-apiserver-ca")?;
    let (leaf, key) = ca.issue_serving("stratus-harness-apiserver", &["localhost"])?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
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
