//! Serving over TLS with a self-signed certificate authority, exported for
//! kubeconfigs and clients.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use stratus_pki::CertificateAuthority;

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
    let ca =
        CertificateAuthority::new("stratus-harness-apiserver-ca").map_err(|e| e.to_string())?;
    let serving = ca
        .issue_serving("stratus-harness-apiserver", &["localhost"])
        .map_err(|e| e.to_string())?;
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
                CertificateDer::from(serving.cert_der),
                CertificateDer::from(ca.ca_der().to_vec()),
            ],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(serving.key_der)),
        )
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ServingCert {
        ca_pem: ca.ca_pem().to_owned(),
        ca_der: ca.ca_der().to_vec(),
        config: Arc::new(config),
    })
}

/// The user a client certificate names: [`stratus_pki::user_of_certificate`],
/// in `system:authenticated` too (as kube-apiserver's x509 authenticator
/// adds it).
pub(crate) fn user_of_certificate(der: &[u8]) -> Result<crate::ReviewUser, stratus_pki::PkiError> {
    let user = stratus_pki::user_of_certificate(der)?;
    let mut groups = user.groups;
    groups.push("system:authenticated".into());
    Ok(crate::ReviewUser {
        username: user.name,
        uid: String::new(),
        groups,
    })
}
