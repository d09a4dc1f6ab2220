//! Serving over TLS with a self-signed certificate authority, exported for
//! kubeconfigs and clients.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA and a serving certificate signed by it.
pub(crate) struct ServingCert {
    pub(crate) ca_pem: String,
    pub(crate) ca_der: Vec<u8>,
    pub(crate) config: Arc<rustls::ServerConfig>,
}

/// Make a CA and a certificate for 127.0.0.1, ::1 and localhost.
pub(crate) fn self_signed() -> Result<ServingCert, String> {
    let err = |e: &dyn std::fmt::Display| format!("could not create the serving certificate: {e}");
    let ca_key = KeyPair::generate().map_err(|e| err(&e))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| err(&e))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "stratus-harness-ca");
    ca_params.distinguished_name = dn;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(|e| err(&e))?;
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);

    let key = KeyPair::generate().map_err(|e| err(&e))?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).map_err(|e| err(&e))?;
    params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()));
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "stratus-harness-apiserver");
    params.distinguished_name = dn;
    let cert = params.signed_by(&key, &issuer).map_err(|e| err(&e))?;

    let chain = vec![
        CertificateDer::from(cert.der().to_vec()),
        CertificateDer::from(ca_cert.der().to_vec()),
    ];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(&e))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| err(&e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ServingCert {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().to_vec(),
        config: Arc::new(config),
    })
}
