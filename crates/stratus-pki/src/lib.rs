//! The one certificate authority of the Stratus workspace, and the one
//! reading of a Kubernetes user from an X.509 subject.
//!
//! ```
//! use stratus_pki::{CertificateAuthority, user_of_certificate};
//!
//! let ca = CertificateAuthority::new("cluster-ca").unwrap();
//! // A client certificate: the subject's CN is the user, its O the groups.
//! let (cert_pem, key_pem) = ca.issue_client("alice", &["devs"]).unwrap();
//! assert!(cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
//! assert!(key_pem.contains("PRIVATE KEY"));
//! // A serving certificate for names, 127.0.0.1 and ::1 (DER, for rustls).
//! let serving = ca.issue_serving("apiserver", &["localhost"]).unwrap();
//! let user = user_of_certificate(&serving.cert_der).unwrap();
//! assert_eq!(user.name, "apiserver");
//! assert!(user.groups.is_empty());
//! ```
//!
//! Kubernetes reads a client certificate's subject as a user: the common
//! name is the user name, each organization a group
//! ([`user_of_certificate`]); a kubelet's serving-certificate request names
//! its node the same way ([`CertificateRequest`]). The API server, the
//! runtime's admin server and the harness's CSR signer all read subjects
//! here, and all make certificates with [`CertificateAuthority`].

#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::x509::X509Name;

/// Why a certificate could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PkiError {
    /// Generating a key or signing a certificate failed.
    #[error("could not make a certificate: {0}")]
    Generate(String),
    /// A certificate signing request could not be parsed or signed.
    #[error("unreadable certificate signing request: {0}")]
    Request(String),
    /// A certificate could not be parsed.
    #[error("unreadable certificate: {0}")]
    Certificate(String),
    /// The subject names no user (no common name, or an empty one).
    #[error("the certificate's subject has no common name")]
    NoCommonName,
    /// A client certificate for more than one group was asked for: rcgen
    /// writes at most one value of each attribute in a subject, so the
    /// others would be lost.
    #[error("a client certificate can name at most one group here, not {0:?}")]
    SeveralGroups(Vec<String>),
}

/// A self-signed certificate authority made in memory, which issues client
/// and serving certificates and signs requests.
pub struct CertificateAuthority {
    ca_pem: String,
    ca_der: Vec<u8>,
    params: CertificateParams,
    key: KeyPair,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

/// A serving certificate and its key, DER, as rustls takes them.
#[derive(Debug, Clone)]
pub struct IssuedServing {
    /// The leaf certificate.
    pub cert_der: Vec<u8>,
    /// Its private key, PKCS#8.
    pub key_der: Vec<u8>,
}

/// How long a CA made here is valid (kubeadm's CAs: ten years).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How long a certificate issued here is valid (kubeadm's and client-go's
/// self-signed serving certificates: one year).
pub const CERTIFICATE_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// How far back a certificate's validity starts, for clocks a little
/// behind this one (kubeadm backdates by five minutes).
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// `params` valid from [`BACKDATE`] ago for `validity`.
fn valid_for(params: &mut CertificateParams, validity: Duration) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + validity;
}

fn generate(e: impl std::fmt::Display) -> PkiError {
    PkiError::Generate(e.to_string())
}

/// A subject with `common_name` and at most one organization (rcgen keeps
/// one value per attribute: a second would replace the first).
fn subject(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}

impl CertificateAuthority {
    /// A new CA called `common_name`, valid for [`CA_VALIDITY`], which may
    /// sign certificates only (path length 0), with kubeadm's key usages
    /// (certificate signing, digital signature, key encipherment).
    pub fn new(common_name: &str) -> Result<Self, PkiError> {
        let key = KeyPair::generate().map_err(generate)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generate)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        valid_for(&mut params, CA_VALIDITY);
        params.distinguished_name = subject(common_name, None);
        let cert = params.self_signed(&key).map_err(generate)?;
        Ok(Self {
            ca_pem: cert.pem(),
            ca_der: cert.der().to_vec(),
            params,
            key,
        })
    }

    /// The CA certificate, PEM: what clients (or servers) trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> &[u8] {
        &self.ca_der
    }

    /// The CA's private key, PKCS#8 PEM, for a component that signs with
    /// the CA itself (kube-controller-manager's `--cluster-signing-key-file`).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A client certificate for `user` in `groups` (subject CN and O, as
    /// Kubernetes reads them), valid for [`CERTIFICATE_VALIDITY`], for
    /// client authentication only: certificate and key, PEM. At most one group
    /// ([`PkiError::SeveralGroups`] otherwise: the certificate library
    /// writes one organization per subject).
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<(String, String), PkiError> {
        let group = match groups {
            [] => None,
            [group] => Some(*group),
            several => {
                return Err(PkiError::SeveralGroups(
                    several.iter().map(|g| (*g).to_owned()).collect(),
                ));
            }
        };
        let key = KeyPair::generate().map_err(generate)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generate)?;
        params.distinguished_name = subject(user, group);
        leaf(&mut params, ExtendedKeyUsagePurpose::ClientAuth);
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(generate)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// A serving certificate called `common_name` for `dns_names`,
    /// 127.0.0.1 and ::1, valid for [`CERTIFICATE_VALIDITY`], for server
    /// authentication only.
    pub fn issue_serving(
        &self,
        common_name: &str,
        dns_names: &[&str],
    ) -> Result<IssuedServing, PkiError> {
        self.issue_serving_valid_for(common_name, dns_names, CERTIFICATE_VALIDITY)
    }

    /// [`issue_serving`](Self::issue_serving), valid from [`BACKDATE`] ago
    /// until `validity` from now (a server renewing its own certificate
    /// sooner, or a test of that renewal).
    ///
    /// ```
    /// let ca = stratus_pki::CertificateAuthority::new("ca").unwrap();
    /// let day = std::time::Duration::from_secs(24 * 3600);
    /// let serving = ca.issue_serving_valid_for("apiserver", &["localhost"], day).unwrap();
    /// assert!(!serving.cert_der.is_empty());
    /// ```
    pub fn issue_serving_valid_for(
        &self,
        common_name: &str,
        dns_names: &[&str],
        validity: Duration,
    ) -> Result<IssuedServing, PkiError> {
        let key = KeyPair::generate().map_err(generate)?;
        let names: Vec<String> = dns_names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(generate)?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()));
        params.distinguished_name = subject(common_name, None);
        leaf(&mut params, ExtendedKeyUsagePurpose::ServerAuth);
        valid_for(&mut params, validity);
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(generate)?;
        Ok(IssuedServing {
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }

    /// A serving certificate called `common_name` for exactly `dns_names`
    /// and `addresses` (no loopback address added), valid for
    /// [`CERTIFICATE_VALIDITY`], for server authentication only: certificate
    /// and key, PEM, as Kubernetes components read them from files.
    ///
    /// ```
    /// let ca = stratus_pki::CertificateAuthority::new("kubernetes").unwrap();
    /// let service: std::net::IpAddr = "10.96.0.1".parse().unwrap();
    /// let (cert, key) = ca.issue_serving_pem("kube-apiserver", &["kubernetes"], &[service]).unwrap();
    /// assert!(cert.starts_with("-----BEGIN CERTIFICATE-----") && key.contains("PRIVATE KEY"));
    /// ```
    pub fn issue_serving_pem(
        &self,
        common_name: &str,
        dns_names: &[&str],
        addresses: &[IpAddr],
    ) -> Result<(String, String), PkiError> {
        let key = KeyPair::generate().map_err(generate)?;
        let names: Vec<String> = dns_names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(generate)?;
        params
            .subject_alt_names
            .extend(addresses.iter().copied().map(SanType::IpAddress));
        params.distinguished_name = subject(common_name, None);
        leaf(&mut params, ExtendedKeyUsagePurpose::ServerAuth);
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(generate)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Sign a PEM certificate signing request as it asks (its subject,
    /// alternative names and extensions), valid from now for `validity`: a
    /// certificate (PEM) chained to this CA.
    ///
    /// ```
    /// let ca = stratus_pki::CertificateAuthority::new("cluster-ca").unwrap();
    /// let key = rcgen::KeyPair::generate().unwrap();
    /// let csr = rcgen::CertificateParams::new(vec!["vk-0".to_string()]).unwrap()
    ///     .serialize_request(&key).unwrap().pem().unwrap();
    /// let cert = ca.sign_request(&csr, std::time::Duration::from_secs(3600)).unwrap();
    /// assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
    /// assert!(ca.sign_request("not a request", std::time::Duration::from_secs(1)).is_err());
    /// ```
    pub fn sign_request(&self, csr_pem: &str, validity: Duration) -> Result<String, PkiError> {
        let mut request = rcgen::CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| PkiError::Request(e.to_string()))?;
        // From now, not backdated: the request's lifetime is what it asked
        // for (a rotation schedule reads it).
        let now = time::OffsetDateTime::now_utc();
        request.params.not_before = now;
        request.params.not_after = now + validity;
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        Ok(request.signed_by(&issuer).map_err(generate)?.pem())
    }
}

/// A key pair for signing that is not a certificate authority (a cluster's
/// service-account token signer): the private key, PKCS#8 PEM, and the
/// public key, PEM.
///
/// ```
/// let (private, public) = stratus_pki::signing_key().unwrap();
/// assert!(private.contains("PRIVATE KEY") && public.contains("BEGIN PUBLIC KEY"));
/// ```
pub fn signing_key() -> Result<(String, String), PkiError> {
    let key = KeyPair::generate().map_err(generate)?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// A leaf certificate's validity and usages (client-go's
/// `GenerateSelfSignedCertKey`): digital signature and key encipherment,
/// for `purpose` only.
fn leaf(params: &mut CertificateParams, purpose: ExtendedKeyUsagePurpose) {
    valid_for(params, CERTIFICATE_VALIDITY);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![purpose];
}

/// The Kubernetes user an X.509 subject names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateUser {
    /// The subject's common name (the last, when there are several, as Go
    /// reads a subject).
    pub name: String,
    /// The subject's organizations, in order.
    pub groups: Vec<String>,
}

/// Every common name of `subject`, in order.
fn common_names(subject: &X509Name<'_>) -> Vec<String> {
    subject
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_owned))
        .collect()
}

/// The user `subject` names.
fn user_of_subject(subject: &X509Name<'_>) -> Result<CertificateUser, PkiError> {
    let name = common_names(subject)
        .pop()
        .filter(|name| !name.is_empty())
        .ok_or(PkiError::NoCommonName)?;
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Ok(CertificateUser { name, groups })
}

/// The user a (verified) client certificate names, DER: the subject's
/// common name and organizations, as kube-apiserver's x509 authenticator
/// reads them (it adds `system:authenticated`; callers do too where they
/// need it).
///
/// ```
/// let ca = stratus_pki::CertificateAuthority::new("ca").unwrap();
/// let serving = ca.issue_serving("kube-apiserver", &[]).unwrap();
/// assert_eq!(stratus_pki::user_of_certificate(&serving.cert_der).unwrap().name, "kube-apiserver");
/// assert!(stratus_pki::user_of_certificate(b"garbage").is_err());
/// ```
pub fn user_of_certificate(der: &[u8]) -> Result<CertificateUser, PkiError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| PkiError::Certificate(e.to_string()))?;
    user_of_subject(cert.subject())
}

/// The DNS names a certificate (DER) serves, lower case: its DNS
/// alternative names, or, when it has none, its common name.
///
/// ```
/// let ca = stratus_pki::CertificateAuthority::new("ca").unwrap();
/// let serving = ca.issue_serving("api", &["API.example.com"]).unwrap();
/// assert_eq!(stratus_pki::dns_names_of_certificate(&serving.cert_der).unwrap(), ["api.example.com"]);
/// let bare = ca.issue_serving("api.internal", &[]).unwrap();
/// assert_eq!(stratus_pki::dns_names_of_certificate(&bare.cert_der).unwrap(), ["api.internal"]);
/// ```
pub fn dns_names_of_certificate(der: &[u8]) -> Result<Vec<String>, PkiError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| PkiError::Certificate(e.to_string()))?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let GeneralName::DNSName(dns) = name {
                names.push(dns.to_ascii_lowercase());
            }
        }
    }
    if names.is_empty()
        && let Some(cn) = common_names(cert.subject()).into_iter().next()
    {
        names.push(cn.to_ascii_lowercase());
    }
    Ok(names)
}

/// When a certificate (DER) expires: its `notAfter`.
///
/// ```
/// use std::time::{Duration, SystemTime};
///
/// let ca = stratus_pki::CertificateAuthority::new("ca").unwrap();
/// let day = Duration::from_secs(24 * 3600);
/// let serving = ca.issue_serving_valid_for("api", &["api"], day).unwrap();
/// let not_after = stratus_pki::not_after_of_certificate(&serving.cert_der).unwrap();
/// let left = not_after.duration_since(SystemTime::now()).unwrap();
/// assert!(left <= day && left > day - Duration::from_secs(600));
/// assert!(stratus_pki::not_after_of_certificate(b"not a certificate").is_err());
/// ```
pub fn not_after_of_certificate(der: &[u8]) -> Result<std::time::SystemTime, PkiError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| PkiError::Certificate(e.to_string()))?;
    let seconds = cert.validity().not_after.timestamp();
    let since_epoch = std::time::Duration::from_secs(seconds.unsigned_abs());
    Ok(if seconds >= 0 {
        std::time::UNIX_EPOCH + since_epoch
    } else {
        std::time::UNIX_EPOCH - since_epoch
    })
}

/// An alternative name a certificate signing request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AltName {
    /// A DNS name.
    Dns(String),
    /// An IP address.
    Ip(IpAddr),
    /// Anything else (an e-mail address, a URI, ...), described.
    Other(String),
}

/// What a PEM certificate signing request asks for: the user its subject
/// names, every common name (a request may carry several), and its
/// alternative names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateRequest {
    /// The user the subject names.
    pub user: CertificateUser,
    /// Every common name of the subject, in order.
    pub common_names: Vec<String>,
    /// The subject alternative names requested.
    pub alt_names: Vec<AltName>,
}

impl CertificateRequest {
    /// Parse a PEM certificate signing request.
    ///
    /// ```
    /// let key = rcgen::KeyPair::generate().unwrap();
    /// let mut params = rcgen::CertificateParams::new(vec!["vk-0".to_string()]).unwrap();
    /// params.distinguished_name.push(rcgen::DnType::CommonName, "system:node:vk-0");
    /// params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:nodes");
    /// let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    /// let request = stratus_pki::CertificateRequest::from_pem(&pem).unwrap();
    /// assert_eq!(request.user.name, "system:node:vk-0");
    /// assert_eq!(request.user.groups, ["system:nodes"]);
    /// assert_eq!(request.alt_names, [stratus_pki::AltName::Dns("vk-0".into())]);
    /// assert!(stratus_pki::CertificateRequest::from_pem("not a request").is_err());
    /// ```
    pub fn from_pem(pem: &str) -> Result<Self, PkiError> {
        use x509_parser::prelude::FromDer;
        let unreadable = |e: &dyn std::fmt::Display| PkiError::Request(e.to_string());
        let (_, pem) =
            x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| unreadable(&e))?;
        let (_, csr) =
            x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
                .map_err(|e| unreadable(&e))?;
        let subject = &csr.certification_request_info.subject;
        let mut alt_names = Vec::new();
        for extension in csr.requested_extensions().into_iter().flatten() {
            if let ParsedExtension::SubjectAlternativeName(san) = extension {
                alt_names.extend(san.general_names.iter().map(|name| {
                    match name {
                        GeneralName::DNSName(dns) => AltName::Dns((*dns).to_owned()),
                        GeneralName::IPAddress(bytes) => ip_of(bytes)
                            .map(AltName::Ip)
                            .unwrap_or_else(|| AltName::Other(format!("{name:?}"))),
                        other => AltName::Other(format!("{other:?}")),
                    }
                }));
            }
        }
        Ok(Self {
            user: user_of_subject(subject)?,
            common_names: common_names(subject),
            alt_names,
        })
    }
}

/// An IP address of 4 or 16 bytes.
fn ip_of(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(names: &[(&str, DnType)], alt: Vec<SanType>) -> String {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        for (value, kind) in names {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.subject_alt_names = alt;
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    #[test]
    fn a_client_certificate_names_its_user_and_groups() {
        let ca = CertificateAuthority::new("ca").unwrap();
        let (pem, _) = ca.issue_client("alice", &["devs"]).unwrap();
        let user = user_of_certificate(&der_of(&pem)).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["devs"]);
        let (pem, _) = ca.issue_client("bob", &[]).unwrap();
        assert!(
            user_of_certificate(&der_of(&pem))
                .unwrap()
                .groups
                .is_empty()
        );
        // Two groups would lose one: refused, not half-made.
        assert_eq!(
            ca.issue_client("carol", &["devs", "ops"]).unwrap_err(),
            PkiError::SeveralGroups(vec!["devs".into(), "ops".into()])
        );
        assert!(ca.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!ca.ca_der().is_empty());
    }

    #[test]
    fn a_request_without_a_common_name_names_no_user() {
        let pem = request(&[("system:nodes", DnType::OrganizationName)], vec![]);
        assert_eq!(
            CertificateRequest::from_pem(&pem).unwrap_err(),
            PkiError::NoCommonName
        );
        let pem = request(&[("", DnType::CommonName)], vec![]);
        assert_eq!(
            CertificateRequest::from_pem(&pem).unwrap_err(),
            PkiError::NoCommonName
        );
    }

    #[test]
    fn a_request_reports_every_common_name_and_alternative_name() {
        let pem = request(
            // rcgen keeps one value per attribute type: the second common
            // name goes in under its OID spelled as a custom type.
            &[
                ("first", DnType::CommonName),
                ("second", DnType::CustomDnType(vec![2, 5, 4, 3])),
            ],
            vec![
                SanType::IpAddress([10, 0, 0, 1].into()),
                SanType::Rfc822Name("a@b.c".try_into().unwrap()),
            ],
        );
        let parsed = CertificateRequest::from_pem(&pem).unwrap();
        assert_eq!(parsed.common_names, ["first", "second"]);
        assert_eq!(parsed.user.name, "second");
        assert_eq!(parsed.alt_names[0], AltName::Ip([10, 0, 0, 1].into()));
        assert!(matches!(parsed.alt_names[1], AltName::Other(_)));
    }

    /// The certificate in `pem`, parsed.
    fn with_parsed<T>(
        der: &[u8],
        f: impl FnOnce(&x509_parser::certificate::X509Certificate<'_>) -> T,
    ) -> T {
        let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
        f(&cert)
    }

    fn der_of(pem: &str) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .unwrap()
            .1
            .contents
    }

    /// Seconds from `not_before` to `not_after`, and whether now is
    /// inside.
    fn validity(cert: &x509_parser::certificate::X509Certificate<'_>) -> (i64, bool) {
        let v = cert.validity();
        let span = v.not_after.timestamp() - v.not_before.timestamp();
        (span, v.is_valid())
    }

    #[test]
    fn certificates_are_limited_as_kubeadm_limits_them() {
        let year = CERTIFICATE_VALIDITY.as_secs() as i64;
        let backdate = BACKDATE.as_secs() as i64;
        let ca = CertificateAuthority::new("ca").unwrap();
        with_parsed(ca.ca_der(), |cert| {
            assert_eq!(
                validity(cert),
                (CA_VALIDITY.as_secs() as i64 + backdate, true)
            );
            let constraints = cert.basic_constraints().unwrap().unwrap().value;
            assert!(constraints.ca);
            assert_eq!(constraints.path_len_constraint, Some(0));
            let usage = cert.key_usage().unwrap().unwrap().value;
            assert!(usage.key_cert_sign() && usage.digital_signature() && usage.key_encipherment());
        });
        let serving = ca.issue_serving("server", &["localhost"]).unwrap();
        let (client, _) = ca.issue_client("alice", &[]).unwrap();
        for (der, server) in [(serving.cert_der, true), (der_of(&client), false)] {
            with_parsed(&der, |cert| {
                assert_eq!(validity(cert), (year + backdate, true));
                let usage = cert.key_usage().unwrap().unwrap().value;
                assert!(usage.digital_signature() && usage.key_encipherment());
                assert!(!usage.key_cert_sign());
                let eku = cert.extended_key_usage().unwrap().unwrap().value;
                assert_eq!((eku.server_auth, eku.client_auth), (server, !server));
                assert!(
                    cert.basic_constraints()
                        .unwrap()
                        .is_none_or(|c| !c.value.ca)
                );
            });
        }
        // A signed request lives exactly as long as asked, from now.
        let key = KeyPair::generate().unwrap();
        let csr = CertificateParams::new(vec!["vk-0".to_string()])
            .unwrap()
            .serialize_request(&key)
            .unwrap()
            .pem()
            .unwrap();
        let signed = ca.sign_request(&csr, Duration::from_secs(3600)).unwrap();
        with_parsed(&der_of(&signed), |cert| {
            assert_eq!(validity(cert), (3600, true));
        });
    }

    #[test]
    fn a_serving_certificate_for_addresses_names_exactly_them_and_chains_to_the_ca() {
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let service: IpAddr = "10.96.0.1".parse().unwrap();
        let (cert, key) = ca
            .issue_serving_pem("kube-apiserver", &["kubernetes.default"], &[service])
            .unwrap();
        assert!(key.contains("PRIVATE KEY"));
        with_parsed(&der_of(&cert), |parsed| {
            assert_eq!(parsed.issuer().to_string(), "CN=kubernetes");
            assert_eq!(parsed.subject().to_string(), "CN=kube-apiserver");
            let names = &parsed
                .subject_alternative_name()
                .unwrap()
                .unwrap()
                .value
                .general_names;
            assert_eq!(
                names,
                &vec![
                    GeneralName::DNSName("kubernetes.default"),
                    GeneralName::IPAddress(&[10, 96, 0, 1]),
                ]
            );
            let eku = parsed.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.server_auth && !eku.client_auth);
        });
        // The CA's key is the one its certificate carries.
        let ca_key = KeyPair::from_pem(&ca.key_pem()).unwrap();
        with_parsed(ca.ca_der(), |parsed| {
            assert_eq!(
                parsed.public_key().subject_public_key.data.as_ref(),
                ca_key.public_key_raw()
            );
        });
    }

    #[test]
    fn signing_garbage_is_a_typed_error() {
        let ca = CertificateAuthority::new("ca").unwrap();
        assert!(matches!(
            ca.sign_request("garbage", Duration::from_secs(1)),
            Err(PkiError::Request(_))
        ));
    }
}
