//! A TLS client verifier that accepts any server certificate, for tests
//! that check what a server presents rather than whom it is (and for the
//! harness's calls to kubelets, as kube-apiserver makes them without
//! `--kubelet-certificate-authority`). Signatures are still checked.
//!
//! ```
//! let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
//! let config = rustls::ClientConfig::builder_with_provider(provider.clone())
//!     .with_safe_default_protocol_versions()
//!     .unwrap()
//!     .dangerous()
//!     .with_custom_certificate_verifier(stratus_apiserver::insecure::any_server_certificate(provider))
//!     .with_no_client_auth();
//! assert!(config.alpn_protocols.is_empty());
//! ```

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A verifier that trusts every server certificate (handshake signatures
/// are verified with `provider`'s algorithms).
pub fn any_server_certificate(
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Arc<dyn ServerCertVerifier> {
    Arc::new(AnyServerCertificate(provider))
}

/// A client configuration (ring, rustls's safe protocol versions, no
/// client certificate) that trusts every server certificate and offers
/// `alpn` (for example `[b"h2", b"http/1.1"]`).
///
/// ```
/// let config = stratus_apiserver::insecure::client_config(&[b"http/1.1"]).unwrap();
/// assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
/// ```
pub fn client_config(alpn: &[&[u8]]) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(any_server_certificate(provider))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

#[derive(Debug)]
struct AnyServerCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
