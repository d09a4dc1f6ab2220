//! The real control plane's certificates, laid out as kubeadm lays out
//! `/etc/kubernetes/pki`: a cluster CA (serving certificates, client
//! certificates, the controller manager's CSR signer), a front-proxy CA
//! (request-header authentication of aggregated servers), and a
//! service-account signing key. ECDSA P-256 keys in PKCS#8 PEM, which every
//! Kubernetes component reads.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// Why the certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PkiError {
    /// rcgen refused the parameters.
    #[error("could not make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("could not write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A certificate authority whose certificate and key are on disk.
pub(crate) struct Authority {
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate file.
    pub(crate) cert: PathBuf,
    /// The CA key file.
    pub(crate) key_file: PathBuf,
}

/// A certificate and key written to `<name>.crt` and `<name>.key`.
pub(crate) struct Issued {
    /// The certificate file.
    pub(crate) cert: PathBuf,
    /// The key file.
    pub(crate) key: PathBuf,
}

/// What a certificate is for.
pub(crate) enum Usage<'a> {
    /// A client certificate: Kubernetes reads the user from the common
    /// name and the groups from the organizations.
    Client { groups: &'a [&'a str] },
    /// A serving certificate for these DNS names and addresses.
    Serving {
        dns: &'a [&'a str],
        ips: &'a [IpAddr],
    },
}

fn write(path: &Path, contents: &str) -> Result<(), PkiError> {
    std::fs::write(path, contents).map_err(|source| PkiError::Write {
        path: path.to_owned(),
        source,
    })
}

fn subject(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for o in organizations {
        dn.push(DnType::OrganizationName, *o);
    }
    dn
}

/// About a year, as kubeadm's leaf certificates; CAs ten years.
const LEAF_DAYS: i64 = 365;
const CA_DAYS: i64 = 3650;

fn validity(params: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(days);
}

impl Authority {
    /// A new CA called `common_name`, written to `dir/<name>.crt|.key`.
    pub(crate) fn create(dir: &Path, name: &str, common_name: &str) -> Result<Self, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyCertSign,
        ];
        params.distinguished_name = subject(common_name, &[]);
        validity(&mut params, CA_DAYS);
        let cert = params.self_signed(&key)?;
        let authority = Self {
            cert: dir.join(format!("{name}.crt")),
            key_file: dir.join(format!("{name}.key")),
            params,
            key,
        };
        write(&authority.cert, &cert.pem())?;
        write(&authority.key_file, &authority.key.serialize_pem())?;
        Ok(authority)
    }

    /// Issue `<name>.crt|.key` in `dir` for `common_name`.
    pub(crate) fn issue(
        &self,
        dir: &Path,
        name: &str,
        common_name: &str,
        usage: Usage<'_>,
    ) -> Result<Issued, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        match usage {
            Usage::Client { groups } => {
                params.distinguished_name = subject(common_name, groups);
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
            Usage::Serving { dns, ips } => {
                params.distinguished_name = subject(common_name, &[]);
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                for name in dns {
                    params
                        .subject_alt_names
                        .push(SanType::DnsName((*name).try_into()?));
                }
                for ip in ips {
                    params.subject_alt_names.push(SanType::IpAddress(*ip));
                }
            }
        }
        validity(&mut params, LEAF_DAYS);
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        let issued = Issued {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        write(&issued.cert, &cert.pem())?;
        write(&issued.key, &key.serialize_pem())?;
        Ok(issued)
    }
}

/// A bare key pair (the service-account token signer): the private key in
/// `dir/<name>.key` (kube-apiserver signs with it, the controller manager
/// too), the public key in `dir/<name>.pub` (kube-apiserver verifies with
/// it).
pub(crate) fn signing_key(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf), PkiError> {
    let key = KeyPair::generate()?;
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    write(&private, &key.serialize_pem())?;
    write(&public, &key.public_key_pem())?;
    Ok((private, public))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_client_and_serving_certificates_chained_to_the_ca() {
        let dir = std::env::temp_dir().join(format!("stratus-pki-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = Authority::create(&dir, "ca", "kubernetes").unwrap();
        let client = ca
            .issue(
                &dir,
                "admin",
                "kubernetes-admin",
                Usage::Client {
                    groups: &["system:masters"],
                },
            )
            .unwrap();
        let serving = ca
            .issue(
                &dir,
                "apiserver",
                "kube-apiserver",
                Usage::Serving {
                    dns: &["kubernetes.default"],
                    ips: &["127.0.0.1".parse().unwrap()],
                },
            )
            .unwrap();
        for file in [&ca.cert, &client.cert, &serving.cert] {
            let pem = std::fs::read(file).unwrap();
            let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
            let cert = pem.parse_x509().unwrap();
            assert_eq!(cert.issuer().to_string(), "CN=kubernetes");
        }
        let pem = std::fs::read(&client.cert).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = pem.parse_x509().unwrap();
        assert_eq!(
            cert.subject().to_string(),
            "CN=kubernetes-admin, O=system:masters"
        );
        let (private, public) = signing_key(&dir, "sa").unwrap();
        assert!(
            std::fs::read_to_string(private)
                .unwrap()
                .contains("PRIVATE KEY")
        );
        assert!(
            std::fs::read_to_string(public)
                .unwrap()
                .contains("BEGIN PUBLIC KEY")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
