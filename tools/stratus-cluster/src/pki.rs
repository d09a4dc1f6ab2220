//! The real control plane's certificates on disk, laid out as kubeadm lays
//! out `/etc/kubernetes/pki`: a cluster CA (serving certificates, client
//! certificates, the controller manager's CSR signer), a front-proxy CA
//! (request-header authentication of aggregated servers), and a
//! service-account signing key. Every certificate and key is made by
//! `stratus-pki`, the project's one certificate authority (ECDSA P-256
//! keys in PKCS#8 PEM, which every Kubernetes component reads); this module
//! only names and writes the files.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use stratus_pki::{CertificateAuthority, PkiError};

/// Why the certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum ClusterPkiError {
    /// The certificate authority refused.
    #[error(transparent)]
    Make(#[from] PkiError),
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
pub struct Authority {
    ca: CertificateAuthority,
    /// The CA certificate file.
    pub cert: PathBuf,
    /// The CA key file.
    pub key_file: PathBuf,
}

/// A certificate and key written to `<name>.crt` and `<name>.key`.
pub struct Issued {
    /// The certificate file.
    pub cert: PathBuf,
    /// The key file.
    pub key: PathBuf,
}

/// What a certificate is for.
pub enum Usage<'a> {
    /// A client certificate: Kubernetes reads the user from the common
    /// name and the group from the organization (at most one here).
    Client {
        /// The groups (the organization).
        groups: &'a [&'a str],
    },
    /// A serving certificate for these DNS names and addresses.
    Serving {
        /// The DNS names.
        dns: &'a [&'a str],
        /// The IP addresses.
        ips: &'a [IpAddr],
    },
}

fn write(path: &Path, contents: &str) -> Result<(), ClusterPkiError> {
    std::fs::write(path, contents).map_err(|source| ClusterPkiError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Write `(certificate, key)` to `dir/<name>.crt` and `dir/<name>.key`.
fn write_pair(
    dir: &Path,
    name: &str,
    (cert, key): (String, String),
) -> Result<Issued, ClusterPkiError> {
    let issued = Issued {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    write(&issued.cert, &cert)?;
    write(&issued.key, &key)?;
    Ok(issued)
}

impl Authority {
    /// A new CA called `common_name`, written to `dir/<name>.crt|.key`.
    pub fn create(dir: &Path, name: &str, common_name: &str) -> Result<Self, ClusterPkiError> {
        let ca = CertificateAuthority::new(common_name)?;
        let files = write_pair(dir, name, (ca.ca_pem().to_owned(), ca.key_pem()))?;
        Ok(Self {
            ca,
            cert: files.cert,
            key_file: files.key,
        })
    }

    /// Issue `<name>.crt|.key` in `dir` for `common_name`.
    pub fn issue(
        &self,
        dir: &Path,
        name: &str,
        common_name: &str,
        usage: Usage<'_>,
    ) -> Result<Issued, ClusterPkiError> {
        let pair = match usage {
            Usage::Client { groups } => self.ca.issue_client(common_name, groups)?,
            Usage::Serving { dns, ips } => self.ca.issue_serving_pem(common_name, dns, ips)?,
        };
        write_pair(dir, name, pair)
    }
}

/// A bare key pair (the service-account token signer): the private key in
/// `dir/<name>.key` (kube-apiserver signs with it, the controller manager
/// too), the public key in `dir/<name>.pub` (kube-apiserver verifies with
/// it).
pub fn signing_key(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf), ClusterPkiError> {
    let (private_pem, public_pem) = stratus_pki::signing_key()?;
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    write(&private, &private_pem)?;
    write(&public, &public_pem)?;
    Ok((private, public))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject_and_issuer(file: &Path) -> (String, String) {
        let pem = std::fs::read(file).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = pem.parse_x509().unwrap();
        (cert.subject().to_string(), cert.issuer().to_string())
    }

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
            assert_eq!(subject_and_issuer(file).1, "CN=kubernetes");
        }
        assert_eq!(
            subject_and_issuer(&client.cert).0,
            "CN=kubernetes-admin, O=system:masters"
        );
        assert!(
            std::fs::read_to_string(&ca.key_file)
                .unwrap()
                .contains("PRIVATE KEY")
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
        // Two groups cannot be written: a typed error, not a lost group.
        assert!(matches!(
            ca.issue(
                &dir,
                "two",
                "someone",
                Usage::Client {
                    groups: &["a", "b"]
                }
            ),
            Err(ClusterPkiError::Make(PkiError::SeveralGroups(_)))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
