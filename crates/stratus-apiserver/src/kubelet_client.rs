//! The harness's client of kubelets: the identity it presents (a client
//! certificate of its own CA) and what a proxied request is for.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The user the harness presents to kubelets (kubeadm's name).
pub const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";

/// The harness's identity towards kubelets.
pub(crate) struct KubeletClient {
    /// The CA that signed the harness's client certificate; issues client
    /// certificates for tests.
    pub(crate) ca: stratus_pki::CertificateAuthority,
    /// The TLS client configuration: the certificate, any server accepted.
    pub(crate) config: Arc<rustls::ClientConfig>,
}

impl KubeletClient {
    pub(crate) fn new() -> Result<Self, String> {
        let ca = stratus_pki::CertificateAuthority::new("stratus-harness-client-ca")
            .map_err(|e| e.to_string())?;
        let (cert_pem, key_pem) = ca
            .issue_client(KUBELET_CLIENT_USER, &["system:masters"])
            .map_err(|e| e.to_string())?;
        let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| e.to_string())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(crate::insecure::any_server_certificate(provider))
            .with_client_auth_cert(certs, key)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            ca,
            config: Arc::new(config),
        })
    }
}

/// What a proxied request is for.
pub(crate) enum Target {
    /// A pod subresource: `log`, `exec`, `attach` or `portforward`.
    Pod {
        namespace: String,
        name: String,
        sub: String,
    },
    /// `nodes/{name}/proxy/{path}`.
    Node { name: String, path: String },
}
