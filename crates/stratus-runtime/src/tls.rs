//! Serving certificates for the admin server (and the harness): a
//! self-signed pair made in memory (a CA and a certificate it signs, as Go's
//! `GenerateSelfSignedCertKey` does), or a certificate and key read from PEM
//! files (`--tls-cert-file`, `--tls-private-key-file`), read once or
//! reloaded whenever they change ([`reloading_pem_files`]).
//!
//! ```
//! let cert = stratus_runtime::tls::self_signed("my-ccm", &["localhost"]).unwrap();
//! assert!(cert.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
//! let policy = stratus_runtime::tls_policy::TlsPolicy::default();
//! let config = policy.server_config(&cert, None, true).unwrap();
//! assert_eq!(config.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why a serving certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating the self-signed pair failed.
    #[error("could not create a self-signed serving certificate: {0}")]
    Generate(String),
    /// A PEM file could not be read or holds nothing usable.
    #[error("could not read {path}: {message}")]
    Pem {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// rustls refused the certificate and key (for example, they do not
    /// match).
    #[error("invalid serving certificate or key: {0}")]
    Config(String),
    /// The client CA bundle holds no usable certificate.
    #[error("invalid client CA: {0}")]
    ClientCa(String),
}

/// The certificate authority (made in memory) that issues client and
/// serving certificates and signs requests: `stratus-pki`'s, the one the
/// API server and the harness use too.
///
/// ```
/// let ca = stratus_runtime::tls::CertificateAuthority::new("test-client-ca").unwrap();
/// let (cert_pem, key_pem) = ca.issue_client("alice", &["system:masters"]).unwrap();
/// assert!(cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// assert!(key_pem.contains("PRIVATE KEY"));
/// ```
pub use stratus_pki::{CertificateAuthority, PkiError};

impl From<PkiError> for TlsError {
    fn from(e: PkiError) -> Self {
        TlsError::Generate(e.to_string())
    }
}

/// A certificate chain and its private key, and the CA that signed it when
/// it was made here.
#[derive(Debug)]
pub struct ServingCertificate {
    /// The CA certificate (PEM) of a self-signed pair; empty for files.
    pub ca_pem: String,
    /// The CA certificate (DER) of a self-signed pair; empty for files.
    pub ca_der: Vec<u8>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    resolver: Option<Arc<dyn Served>>,
}

/// A resolver of a certificate that changes (renewed, reloaded, rotated),
/// which can also say what it serves now.
trait Served: rustls::server::ResolvesServerCert {
    /// The pair served now (without renewing or reloading it first).
    fn served(&self) -> Option<Arc<rustls::sign::CertifiedKey>>;
}

/// When the certificate a [`ServingCertificate`] serves now expires, read
/// each time it is asked (a renewed, reloaded or rotated certificate's
/// new date): for metrics such as the kubelet's
/// `kubelet_certificate_manager_server_ttl_seconds`.
///
/// ```
/// use std::time::{Duration, SystemTime};
///
/// let day = Duration::from_secs(24 * 3600);
/// let cert = stratus_runtime::tls::self_signed_valid_for("vk", &["vk"], day).unwrap();
/// let expiry = cert.expiry();
/// let left = expiry.not_after().unwrap().duration_since(SystemTime::now()).unwrap();
/// assert!(left <= day && left > day - Duration::from_secs(600));
/// ```
#[derive(Clone)]
pub struct CertificateExpiry(ExpirySource);

/// Where a [`CertificateExpiry`] reads the date.
#[derive(Clone)]
enum ExpirySource {
    /// A certificate that never changes: its date, read once.
    Fixed(Option<std::time::SystemTime>),
    /// One that is renewed, reloaded or rotated: whatever it serves now.
    Served(Arc<dyn Served>),
}

impl std::fmt::Debug for CertificateExpiry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateExpiry")
            .field("not_after", &self.not_after())
            .finish()
    }
}

impl CertificateExpiry {
    /// The served leaf certificate's `notAfter`; `None` if it cannot be
    /// read.
    pub fn not_after(&self) -> Option<std::time::SystemTime> {
        match &self.0 {
            ExpirySource::Served(served) => served
                .served()
                .and_then(|key| key.cert.first().cloned())
                .and_then(|leaf| stratus_pki::not_after_of_certificate(&leaf).ok()),
            ExpirySource::Fixed(at) => *at,
        }
    }
}

/// A CA and a certificate it signs for `dns_names`, 127.0.0.1 and ::1,
/// valid for a year ([`stratus_pki::CERTIFICATE_VALIDITY`]) and renewed
/// before it expires ([`self_signed_valid_for`]).
pub fn self_signed(common_name: &str, dns_names: &[&str]) -> Result<ServingCertificate, TlsError> {
    self_signed_valid_for(common_name, dns_names, stratus_pki::CERTIFICATE_VALIDITY)
}

/// How far into its validity a self-signed serving certificate is renewed:
/// four fifths (client-go's certificate manager rotates between 70 % and
/// 90 % of a certificate's life).
pub const RENEW_AFTER_FIFTHS: u32 = 4;

/// How long a self-signed certificate whose renewal failed is served
/// before the renewal is tried again.
const RENEWAL_RETRY: Duration = Duration::from_secs(60);

/// A CA (valid ten years, [`stratus_pki::CA_VALIDITY`]) and a serving
/// certificate it signs for `dns_names`, 127.0.0.1 and ::1, valid for
/// `validity`. Once [`RENEW_AFTER_FIFTHS`] fifths of that have passed, the
/// next TLS handshake gets a fresh certificate from the same CA, so clients
/// trusting [`ServingCertificate::ca_pem`] never see an expired one; a
/// renewal that fails is logged, the current certificate kept and the
/// renewal tried again a minute later.
///
/// ```
/// let day = std::time::Duration::from_secs(24 * 3600);
/// let cert = stratus_runtime::tls::self_signed_valid_for("my-ccm", &["localhost"], day).unwrap();
/// assert!(cert.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// ```
pub fn self_signed_valid_for(
    common_name: &str,
    dns_names: &[&str],
    validity: Duration,
) -> Result<ServingCertificate, TlsError> {
    let ca = CertificateAuthority::new(&format!("{common_name}-ca"))?;
    let renewing = Renewing {
        common_name: common_name.to_owned(),
        dns_names: dns_names.iter().map(|n| (*n).to_owned()).collect(),
        validity,
        ca,
        current: Mutex::new(None),
    };
    let (chain, key) = renewing.issue()?;
    let certified = certified_key(&chain, &key)?;
    *renewing.current.lock().unwrap_or_else(|e| e.into_inner()) =
        Some((certified, renewing.renew_at(SystemTime::now())));
    Ok(ServingCertificate {
        ca_pem: renewing.ca.ca_pem().to_owned(),
        ca_der: renewing.ca.ca_der().to_vec(),
        chain,
        key,
        resolver: Some(Arc::new(renewing)),
    })
}

/// Serves a self-signed certificate and renews it from its CA before it
/// expires.
struct Renewing {
    common_name: String,
    dns_names: Vec<String>,
    validity: Duration,
    ca: CertificateAuthority,
    /// The certificate served and when to renew it.
    current: Mutex<Option<(Arc<rustls::sign::CertifiedKey>, SystemTime)>>,
}

impl std::fmt::Debug for Renewing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renewing")
            .field("common_name", &self.common_name)
            .field("validity", &self.validity)
            .finish_non_exhaustive()
    }
}

impl Renewing {
    /// A fresh certificate (chained to the CA) and its key.
    fn issue(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        let names: Vec<&str> = self.dns_names.iter().map(String::as_str).collect();
        let serving = self
            .ca
            .issue_serving_valid_for(&self.common_name, &names, self.validity)?;
        Ok((
            vec![
                CertificateDer::from(serving.cert_der),
                CertificateDer::from(self.ca.ca_der().to_vec()),
            ],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(serving.key_der)),
        ))
    }

    /// When a certificate issued at `issued` is due for renewal.
    fn renew_at(&self, issued: SystemTime) -> SystemTime {
        issued + self.validity / 5 * RENEW_AFTER_FIFTHS
    }
}

impl Served for Renewing {
    fn served(&self) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current.as_ref().map(|(served, _)| served.clone())
    }
}

impl rustls::server::ResolvesServerCert for Renewing {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let now = SystemTime::now();
        if let Some((served, renew_at)) = current.as_mut()
            && now >= *renew_at
        {
            match self
                .issue()
                .and_then(|(chain, key)| certified_key(&chain, &key))
            {
                Ok(fresh) => {
                    tracing::info!(common_name = %self.common_name, "self-signed serving certificate renewed");
                    *served = fresh;
                    *renew_at = self.renew_at(now);
                }
                Err(e) => {
                    tracing::warn!(common_name = %self.common_name, error = %e, "could not renew the self-signed serving certificate; serving the current one");
                    *renew_at = now + RENEWAL_RETRY;
                }
            }
        }
        current.as_ref().map(|(served, _)| served.clone())
    }
}

/// The certificate chain and key in PEM files.
pub fn from_pem_files(cert: &Path, key: &Path) -> Result<ServingCertificate, TlsError> {
    let pem_err = |path: &Path, message: String| TlsError::Pem {
        path: path.display().to_string(),
        message,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_err(cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_err(cert, "no certificate in the file".into()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_err(key, e.to_string()))?;
    Ok(ServingCertificate {
        ca_pem: String::new(),
        ca_der: Vec::new(),
        chain,
        key: key_der,
        resolver: None,
    })
}

/// The certificate chain and key in PEM files, read again whenever either
/// file changes (checked at most once per [`RELOAD_CHECK_INTERVAL`], on a
/// handshake): a rotated certificate is served to new connections without
/// a restart. A change that cannot be read (a half-written file) is
/// logged and the previous pair kept.
///
/// ```no_run
/// let cert = stratus_runtime::tls::reloading_pem_files(
///     "/var/lib/kubelet/pki/kubelet.crt".as_ref(),
///     "/var/lib/kubelet/pki/kubelet.key".as_ref(),
/// ).unwrap();
/// let policy = stratus_runtime::tls_policy::TlsPolicy::default();
/// let config = policy.server_config(&cert, None, true).unwrap(); // always the files' current pair
/// ```
pub fn reloading_pem_files(cert: &Path, key: &Path) -> Result<ServingCertificate, TlsError> {
    let mut loaded = from_pem_files(cert, key)?;
    let certified = certified_key(&loaded.chain, &loaded.key)?;
    loaded.resolver = Some(Arc::new(Reloader {
        cert: cert.to_owned(),
        key: key.to_owned(),
        state: Mutex::new(ReloadState {
            current: certified,
            stamps: stamps(cert, key),
            checked: Instant::now(),
        }),
    }));
    Ok(loaded)
}

/// A serving certificate replaced in place (by a rotation through
/// certificate signing requests): every new connection gets the current
/// pair.
pub struct SharedCertificate {
    current: std::sync::RwLock<Arc<rustls::sign::CertifiedKey>>,
}

impl std::fmt::Debug for SharedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCertificate").finish_non_exhaustive()
    }
}

fn parse_pem_pair(
    cert_pem: &str,
    key_pem: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let pem_err = |what: &str, message: String| TlsError::Pem {
        path: what.to_owned(),
        message,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err("the certificate", e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_err("the certificate", "no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| pem_err("the key", e.to_string()))?;
    Ok((chain, key))
}

impl SharedCertificate {
    /// Serve `cert_pem` (a chain) with `key_pem` from now on.
    pub fn set_pem(&self, cert_pem: &str, key_pem: &str) -> Result<(), TlsError> {
        let (chain, key) = parse_pem_pair(cert_pem, key_pem)?;
        let fresh = certified_key(&chain, &key)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }
}

impl Served for SharedCertificate {
    fn served(&self) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

impl rustls::server::ResolvesServerCert for SharedCertificate {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// A serving certificate from PEM text that can be replaced later through
/// the returned [`SharedCertificate`].
///
/// ```
/// let ca = stratus_runtime::tls::CertificateAuthority::new("ca").unwrap();
/// let (cert, key) = ca.issue_client("x", &[]).unwrap();
/// let (serving, shared) = stratus_runtime::tls::shared_pem(&cert, &key).unwrap();
/// let policy = stratus_runtime::tls_policy::TlsPolicy::default();
/// let _config = policy.server_config(&serving, None, true).unwrap();
/// shared.set_pem(&cert, &key).unwrap(); // a rotation
/// assert!(shared.set_pem("garbage", &key).is_err());
/// ```
pub fn shared_pem(
    cert_pem: &str,
    key_pem: &str,
) -> Result<(ServingCertificate, Arc<SharedCertificate>), TlsError> {
    let (chain, key) = parse_pem_pair(cert_pem, key_pem)?;
    let shared = Arc::new(SharedCertificate {
        current: std::sync::RwLock::new(certified_key(&chain, &key)?),
    });
    Ok((
        ServingCertificate {
            ca_pem: String::new(),
            ca_der: Vec::new(),
            chain,
            key,
            resolver: Some(shared.clone()),
        },
        shared,
    ))
}

/// How often a reloading certificate looks at its files.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

fn certified_key(
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> Result<Arc<rustls::sign::CertifiedKey>, TlsError> {
    let signing = rustls::crypto::ring::sign::any_supported_type(key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(Arc::new(rustls::sign::CertifiedKey::new(
        chain.to_vec(),
        signing,
    )))
}

type Stamp = Option<(SystemTime, u64)>;

fn stamps(cert: &Path, key: &Path) -> (Stamp, Stamp) {
    let stamp = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    };
    (stamp(cert), stamp(key))
}

struct ReloadState {
    current: Arc<rustls::sign::CertifiedKey>,
    stamps: (Stamp, Stamp),
    checked: Instant,
}

/// Serves the current pair of a [`reloading_pem_files`] certificate.
struct Reloader {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<ReloadState>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Served for Reloader {
    fn served(&self) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Some(state.current.clone())
    }
}

impl rustls::server::ResolvesServerCert for Reloader {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= RELOAD_CHECK_INTERVAL {
            state.checked = Instant::now();
            let now = stamps(&self.cert, &self.key);
            if now != state.stamps {
                match from_pem_files(&self.cert, &self.key)
                    .and_then(|c| certified_key(&c.chain, &c.key))
                {
                    Ok(fresh) => {
                        tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                        state.current = fresh;
                        state.stamps = now;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the changed serving certificate could not be read; keeping the previous one");
                    }
                }
            }
        }
        Some(state.current.clone())
    }
}

impl ServingCertificate {
    /// The chain and key, to serve as they are.
    pub(crate) fn pair(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (self.chain.clone(), self.key.clone_key())
    }

    /// What serves a certificate that changes (reloaded files, a rotation),
    /// if it does.
    pub(crate) fn reloads(&self) -> Option<Arc<dyn rustls::server::ResolvesServerCert>> {
        self.resolver
            .clone()
            .map(|served| served as Arc<dyn rustls::server::ResolvesServerCert>)
    }

    /// When the certificate served expires, now and after every renewal,
    /// reload or rotation.
    pub fn expiry(&self) -> CertificateExpiry {
        CertificateExpiry(match &self.resolver {
            Some(served) => ExpirySource::Served(served.clone()),
            None => ExpirySource::Fixed(
                self.leaf()
                    .and_then(|leaf| stratus_pki::not_after_of_certificate(leaf).ok()),
            ),
        })
    }

    /// The names the leaf certificate serves, lower case
    /// ([`stratus_pki::dns_names_of_certificate`]); none if it is unreadable.
    pub(crate) fn dns_names(&self) -> Vec<String> {
        self.leaf()
            .and_then(|leaf| stratus_pki::dns_names_of_certificate(leaf).ok())
            .unwrap_or_default()
    }

    /// The leaf certificate (DER).
    pub(crate) fn leaf(&self) -> Option<&[u8]> {
        self.chain.first().map(|c| c.as_ref())
    }

    /// The chain and key, ready to sign handshakes.
    pub(crate) fn certified_key(&self) -> Result<Arc<rustls::sign::CertifiedKey>, TlsError> {
        certified_key(&self.chain, &self.key)
    }
}

/// A verifier of client certificates signed by the CAs in `pem` (clients
/// without a certificate are still served).
pub(crate) fn client_verifier(
    pem: &str,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|e| TlsError::ClientCa(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsError::ClientCa("no certificate in the client CA".into()));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::ClientCa(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_from_files_tells_its_expiry() {
        let ca = CertificateAuthority::new("ca").unwrap();
        let (cert, key) = ca.issue_serving_pem("api", &["api"], &[]).unwrap();
        let dir = std::env::temp_dir().join(format!("stratus-tls-expiry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        let fixed = from_pem_files(&cert_path, &key_path).unwrap().expiry();
        let reloading = reloading_pem_files(&cert_path, &key_path).unwrap().expiry();
        std::fs::remove_dir_all(&dir).unwrap();
        let left = |expiry: &CertificateExpiry| {
            expiry
                .not_after()
                .unwrap()
                .duration_since(std::time::SystemTime::now())
                .unwrap()
        };
        for expiry in [&fixed, &reloading] {
            let left = left(expiry);
            assert!(left <= stratus_pki::CERTIFICATE_VALIDITY, "{left:?}");
            assert!(
                left > stratus_pki::CERTIFICATE_VALIDITY - Duration::from_secs(3600),
                "{left:?}"
            );
        }
    }
}
