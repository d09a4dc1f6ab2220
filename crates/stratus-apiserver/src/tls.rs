//! Serving over TLS with a self-signed certificate authority, exported for
//! kubeconfigs and clients.

use std::sync::Arc;

/// A CA and a serving certificate signed by it.
pub(crate) struct ServingCert {
    pub(crate) ca_pem: String,
    pub(crate) ca_der: Vec<u8>,
    pub(crate) config: Arc<rustls::ServerConfig>,
}

/// Make a CA and a certificate for 127.0.0.1, ::1 and localhost (the
/// runtime's self-signed pair, as the managers' admin server uses).
pub(crate) fn self_signed() -> Result<ServingCert, String> {
    let cert = stratus_runtime::tls::self_signed("stratus-harness-apiserver", &["localhost"])
        .map_err(|e| e.to_string())?;
    Ok(ServingCert {
        ca_pem: cert.ca_pem.clone(),
        ca_der: cert.ca_der.clone(),
        config: cert.server_config().map_err(|e| e.to_string())?,
    })
}
