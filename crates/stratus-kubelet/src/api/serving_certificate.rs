//! The kubelet API's serving certificate from the cluster: a
//! `kubernetes.io/kubelet-serving` CertificateSigningRequest for
//! `system:node:<node>` in `system:nodes`, with the node's IP addresses and
//! DNS names, waited on until an approver approves it and the signer
//! issues the certificate; then renewed the same way when 80 % of its
//! lifetime has passed, swapped in without a restart (Go's
//! `--rotate-server-certificates`).
//!
//! Core approvers never approve serving certificates: a cluster needs an
//! approver that checks the request (the subject is the node, the usages
//! are only digital signature, key encipherment and server auth, the
//! names are the node's own).
//!
//! ```no_run
//! use stratus_kubelet::api::serving_certificate::{CsrConfig, ServingCertificateRotation};
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = CsrConfig::new("vk-0");
//! config.ip_addresses.push("10.0.0.7".parse()?);
//! let (certificate, rotation) = ServingCertificateRotation::bootstrap(client, config).await?;
//! // hand `certificate` to KubeletServer::builder(...).certificate(...), then:
//! let (_stop, stop) = tokio::sync::watch::channel(false);
//! tokio::spawn(rotation.run(stop));
//! # Ok(()) }
//! ```

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, PostParams};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
use stratus_runtime::tls::{ServingCertificate, SharedCertificate, TlsError, shared_pem};
use tokio::sync::watch;

/// The signer of kubelet serving certificates.
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// What to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrConfig {
    /// The node name (subject `system:node:<node>`).
    pub node: String,
    /// IP addresses the certificate is for.
    pub ip_addresses: Vec<IpAddr>,
    /// DNS names the certificate is for.
    pub dns_names: Vec<String>,
    /// The signer (default [`KUBELET_SERVING_SIGNER`]).
    pub signer_name: String,
    /// The lifetime to ask for (`spec.expirationSeconds`; the signer may
    /// give less). `None`: the signer's default.
    pub expiration: Option<Duration>,
    /// How long to wait for approval and issuance (default 15 min).
    pub issue_timeout: Duration,
    /// How often to look at the request while waiting (default 1 s).
    pub poll_interval: Duration,
}

impl CsrConfig {
    /// A request for node `node` with the default signer and timeouts.
    pub fn new(node: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            ip_addresses: Vec::new(),
            dns_names: Vec::new(),
            signer_name: KUBELET_SERVING_SIGNER.into(),
            expiration: None,
            issue_timeout: Duration::from_secs(15 * 60),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// Why no certificate was issued.
#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    /// The key or the request could not be made.
    #[error("could not make the certificate request: {0}")]
    Generate(String),
    /// The API server refused or failed a call.
    #[error("certificate request {name}: {source}")]
    Api {
        /// The request's name (empty before it exists).
        name: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// An approver denied the request.
    #[error("certificate request {name} was denied: {reason}")]
    Denied {
        /// The request.
        name: String,
        /// The approver's reason and message.
        reason: String,
    },
    /// The signer failed the request.
    #[error("certificate request {name} failed: {reason}")]
    Failed {
        /// The request.
        name: String,
        /// The signer's reason and message.
        reason: String,
    },
    /// No certificate in time.
    #[error(
        "certificate request {name} was not issued within {waited:?} (is an approver for {signer} running?)"
    )]
    Timeout {
        /// The request.
        name: String,
        /// The signer asked.
        signer: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The issued certificate is unusable (unreadable, or not for our key).
    #[error("certificate request {name}: the issued certificate is unusable: {reason}")]
    BadCertificate {
        /// The request.
        name: String,
        /// Why.
        reason: String,
    },
    /// The certificate could not be served.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// An issued certificate and its key.
#[derive(Debug, Clone)]
pub struct IssuedCertificate {
    /// The certificate chain, PEM.
    pub cert_pem: String,
    /// The private key, PEM (PKCS#8).
    pub key_pem: String,
    /// Valid from.
    pub not_before: SystemTime,
    /// Valid until.
    pub not_after: SystemTime,
    /// The CertificateSigningRequest it came from.
    pub request: String,
}

impl IssuedCertificate {
    /// When to renew: 80 % into its lifetime.
    pub fn renew_at(&self) -> SystemTime {
        let lifetime = self
            .not_after
            .duration_since(self.not_before)
            .unwrap_or_default();
        self.not_before + lifetime.mul_f64(0.8)
    }
}

fn condition_reason(csr: &CertificateSigningRequest, kind: &str) -> Option<String> {
    csr.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status != "False")
        .map(|c| {
            format!(
                "{}: {}",
                c.reason.as_deref().unwrap_or(kind),
                c.message.as_deref().unwrap_or_default()
            )
        })
}

/// The validity and public key of the first certificate in `pem`.
fn inspect(pem: &[u8]) -> Result<(SystemTime, SystemTime, Vec<u8>), String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| e.to_string())?;
    let cert = pem.parse_x509().map_err(|e| e.to_string())?;
    let at = |t: x509_parser::time::ASN1Time| {
        SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(t.timestamp()).unwrap_or(0))
    };
    let validity = cert.validity();
    Ok((
        at(validity.not_before),
        at(validity.not_after),
        cert.public_key().subject_public_key.data.to_vec(),
    ))
}

/// Ask the cluster for a serving certificate and wait until it is issued.
pub async fn request_serving_certificate(
    client: &kube::Client,
    config: &CsrConfig,
) -> Result<IssuedCertificate, CsrError> {
    let generate = |e: &dyn std::fmt::Display| CsrError::Generate(e.to_string());
    let key = KeyPair::generate().map_err(|e| generate(&e))?;
    let mut params = CertificateParams::new(config.dns_names.clone()).map_err(|e| generate(&e))?;
    for ip in &config.ip_addresses {
        params.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, format!("system:node:{}", config.node));
    subject.push(DnType::OrganizationName, "system:nodes");
    params.distinguished_name = subject;
    let request_pem = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(|e| generate(&e))?;
    let csr = CertificateSigningRequest {
        metadata: kube::api::ObjectMeta {
            generate_name: Some("csr-".into()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request_pem.into_bytes()),
            signer_name: config.signer_name.clone(),
            usages: Some(vec!["digital signature".into(), "server auth".into()]),
            expiration_seconds: config
                .expiration
                .map(|d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX)),
            ..Default::default()
        },
        status: None,
    };
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let created = api
        .create(&PostParams::default(), &csr)
        .await
        .map_err(|source| CsrError::Api {
            name: String::new(),
            source,
        })?;
    let name = created.metadata.name.clone().unwrap_or_default();
    tracing::info!(request = %name, signer = %config.signer_name, "requested a serving certificate");
    let started = tokio::time::Instant::now();
    loop {
        let current = api.get(&name).await.map_err(|source| CsrError::Api {
            name: name.clone(),
            source,
        })?;
        if let Some(reason) = condition_reason(&current, "Denied") {
            return Err(CsrError::Denied { name, reason });
        }
        if let Some(reason) = condition_reason(&current, "Failed") {
            return Err(CsrError::Failed { name, reason });
        }
        if let Some(cert) = current
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .filter(|c| !c.0.is_empty())
        {
            let bad = |reason: String| CsrError::BadCertificate {
                name: name.clone(),
                reason,
            };
            let (not_before, not_after, public_key) = inspect(&cert.0).map_err(bad)?;
            if public_key != key.public_key_raw() {
                return Err(bad("it is not for the requested key".into()));
            }
            let cert_pem = String::from_utf8(cert.0.clone()).map_err(|e| bad(e.to_string()))?;
            return Ok(IssuedCertificate {
                cert_pem,
                key_pem: key.serialize_pem(),
                not_before,
                not_after,
                request: name,
            });
        }
        if started.elapsed() >= config.issue_timeout {
            return Err(CsrError::Timeout {
                name,
                signer: config.signer_name.clone(),
                waited: config.issue_timeout,
            });
        }
        tokio::time::sleep(config.poll_interval).await;
    }
}

/// Keeps a CSR-issued serving certificate fresh.
pub struct ServingCertificateRotation {
    client: kube::Client,
    config: CsrConfig,
    shared: Arc<SharedCertificate>,
    current: IssuedCertificate,
}

impl std::fmt::Debug for ServingCertificateRotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificateRotation")
            .field("config", &self.config)
            .field("current", &self.current.request)
            .finish_non_exhaustive()
    }
}

impl ServingCertificateRotation {
    /// Request the first certificate (waiting for it) and return it as a
    /// [`ServingCertificate`] that later rotations replace in place.
    pub async fn bootstrap(
        client: kube::Client,
        config: CsrConfig,
    ) -> Result<(ServingCertificate, Self), CsrError> {
        let current = request_serving_certificate(&client, &config).await?;
        let (certificate, shared) = shared_pem(&current.cert_pem, &current.key_pem)?;
        Ok((
            certificate,
            Self {
                client,
                config,
                shared,
                current,
            },
        ))
    }

    /// The certificate served now.
    pub fn current(&self) -> &IssuedCertificate {
        &self.current
    }

    /// Renew at 80 % of each certificate's lifetime until `stop`; a failed
    /// renewal is retried (after a tenth of the time left, 1 s to 5 min)
    /// while the old certificate keeps being served.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        loop {
            let wait = self
                .current
                .renew_at()
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stratus_runtime::stopped(&mut stop) => return,
            }
            loop {
                let renewed = tokio::select! {
                    r = request_serving_certificate(&self.client, &self.config) => r,
                    _ = stratus_runtime::stopped(&mut stop) => return,
                };
                let failure = match renewed {
                    Ok(fresh) => match self.shared.set_pem(&fresh.cert_pem, &fresh.key_pem) {
                        Ok(()) => {
                            tracing::info!(request = %fresh.request, "serving certificate rotated");
                            self.current = fresh;
                            break;
                        }
                        Err(e) => e.to_string(),
                    },
                    Err(e) => e.to_string(),
                };
                let left = self
                    .current
                    .not_after
                    .duration_since(SystemTime::now())
                    .unwrap_or_default();
                let retry = (left / 10).clamp(Duration::from_secs(1), Duration::from_secs(300));
                tracing::warn!(error = %failure, ?retry, "serving certificate renewal failed");
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = stratus_runtime::stopped(&mut stop) => return,
                }
            }
        }
    }
}
