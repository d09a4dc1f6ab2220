//! The server's certificate authorities: one signs its serving
//! certificate, one its identity towards kubelets (and any client
//! certificate a test asks for). Made with rcgen, in memory.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, SanType,
};

/// A self-signed certificate authority that issues certificates.
pub(crate) struct Authority {
    /// The CA certificate, PEM.
    pub(crate) ca_pem: String,
    /// The CA certificate, DER.
    pub(crate) ca_der: Vec<u8>,
    params: CertificateParams,
    key: KeyPair,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn named(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for o in organizations {
        dn.push(DnType::OrganizationName, *o);
    }
    dn
}

impl Authority {
    /// A new CA called `common_name`.
    pub(crate) fn new(common_name: &str) -> Result<Self, String> {
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = named(common_name, &[]);
        let cert = params.self_signed(&key).map_err(err)?;
        Ok(Self {
            ca_pem: cert.pem(),
            ca_der: cert.der().to_vec(),
            params,
            key,
        })
    }

    /// A client certificate for `user` in `groups` (subject CN and O, as
    /// Kubernetes reads them): certificate and key, PEM.
    pub(crate) fn issue_client(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(String, String), String> {
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.distinguished_name = named(user, groups);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// A serving certificate for `dns_names`, 127.0.0.1 and ::1: the leaf
    /// (DER) and its PKCS#8 key (DER).
    pub(crate) fn issue_serving(
        &self,
        common_name: &str,
        dns_names: &[&str],
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        let key = KeyPair::generate().map_err(err)?;
        let names: Vec<String> = dns_names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(err)?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()));
        params.distinguished_name = named(common_name, &[]);
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok((cert.der().to_vec(), key.serialize_der()))
    }

    /// Sign a PEM certificate signing request as it asks (subject, names,
    /// extensions), valid from now for `validity`.
    pub(crate) fn sign_request(&self, csr_pem: &str, validity: Duration) -> Result<String, String> {
        let mut request = rcgen::CertificateSigningRequestParams::from_pem(csr_pem).map_err(err)?;
        let now = time::OffsetDateTime::now_utc();
        request.params.not_before = now;
        request.params.not_after = now + validity;
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        Ok(request.signed_by(&issuer).map_err(err)?.pem())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_and_signs() {
        let ca = Authority::new("test-ca").unwrap();
        assert!(ca.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let (cert, key) = ca.issue_client("alice", &["devs"]).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(key.contains("PRIVATE KEY"));
        let (leaf, key) = ca.issue_serving("server", &["localhost"]).unwrap();
        assert!(!leaf.is_empty() && !key.is_empty());
        let csr_key = KeyPair::generate().unwrap();
        let csr = CertificateParams::new(vec!["vk-0".to_string()])
            .unwrap()
            .serialize_request(&csr_key)
            .unwrap()
            .pem()
            .unwrap();
        assert!(ca.sign_request(&csr, Duration::from_secs(60)).is_ok());
        assert!(ca.sign_request("garbage", Duration::from_secs(60)).is_err());
    }
}
