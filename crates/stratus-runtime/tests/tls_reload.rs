//! A serving certificate from files is reloaded when the files change: new
//! connections get the new certificate without a restart, and a broken
//! file keeps the previous one. A self-signed one is renewed from its CA
//! before it expires.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use rustls::pki_types::ServerName;
use stratus_runtime::serving::{self, Handler, Listener};
use stratus_runtime::tls::{RELOAD_CHECK_INTERVAL, reloading_pem_files, self_signed_valid_for};

/// The leaf certificate the server at `addr` presents.
async fn presented(addr: std::net::SocketAddr) -> Vec<u8> {
    leaf_over(addr, stratus_testing::insecure::client_config(&[]).unwrap()).await
}

/// The leaf certificate the server at `addr` presents to a client that
/// trusts only `ca_der` (the handshake fails on an expired or foreign one).
async fn presented_trusting(addr: std::net::SocketAddr, ca_der: &[u8]) -> Vec<u8> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der.to_vec().into()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    leaf_over(addr, config).await
}

async fn leaf_over(addr: std::net::SocketAddr, config: rustls::ClientConfig) -> Vec<u8> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn pair(name: &str) -> (String, String, Vec<u8>) {
    let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
    (
        generated.cert.pem(),
        generated.signing_key.serialize_pem(),
        generated.cert.der().to_vec(),
    )
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let dir = std::env::temp_dir().join(format!("stratus-tls-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    let (cert_a, key_a, der_a) = pair("first.example");
    std::fs::write(&cert_path, &cert_a).unwrap();
    std::fs::write(&key_path, &key_a).unwrap();

    let certificate = reloading_pem_files(&cert_path, &key_path).unwrap();
    let tls = serving::acceptor(false, Some(certificate), None, "unused").unwrap();
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    let addr = listener.local_addr();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let handler: Handler<Full<Bytes>> =
        Arc::new(|_| Box::pin(async { http::Response::new(Full::new(Bytes::new())) }));
    tokio::spawn(listener.serve(stopped, handler));
    assert_eq!(presented(addr).await, der_a);

    // Rotate both files.
    let (cert_b, key_b, der_b) = pair("second.example");
    std::fs::write(&cert_path, &cert_b).unwrap();
    std::fs::write(&key_path, &key_b).unwrap();
    tokio::time::sleep(RELOAD_CHECK_INTERVAL + Duration::from_millis(100)).await;
    assert_eq!(
        presented(addr).await,
        der_b,
        "the new certificate is served"
    );

    // A half-written file is not taken: the last good pair stays.
    std::fs::write(&cert_path, "-----BEGIN CERTIFICATE-----\ntrunc").unwrap();
    tokio::time::sleep(RELOAD_CHECK_INTERVAL + Duration::from_millis(100)).await;
    assert_eq!(presented(addr).await, der_b);
    std::fs::remove_dir_all(&dir).unwrap();
}

async fn serve(certificate: stratus_runtime::tls::ServingCertificate) -> std::net::SocketAddr {
    let tls = serving::acceptor(false, Some(certificate), None, "unused").unwrap();
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    let addr = listener.local_addr();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let handler: Handler<Full<Bytes>> =
        Arc::new(|_| Box::pin(async { http::Response::new(Full::new(Bytes::new())) }));
    tokio::spawn(async move {
        listener.serve(stopped, handler).await;
        drop(stop);
    });
    addr
}

#[tokio::test]
async fn a_self_signed_certificate_is_renewed_from_its_ca_before_it_expires() {
    // Valid 5 s, renewed after four fifths of that (4 s).
    let validity = Duration::from_secs(5);
    let certificate = self_signed_valid_for("renewing", &["localhost"], validity).unwrap();
    let ca_der = certificate.ca_der.clone();
    let addr = serve(certificate).await;
    let first = presented_trusting(addr, &ca_der).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        presented_trusting(addr, &ca_der).await,
        first,
        "not due yet"
    );

    // Past the renewal point, and past the first certificate's expiry: a
    // client trusting the same CA is served a fresh, valid certificate.
    tokio::time::sleep(validity).await;
    let renewed = presented_trusting(addr, &ca_der).await;
    assert_ne!(renewed, first, "renewed");
    assert_eq!(
        presented_trusting(addr, &ca_der).await,
        renewed,
        "renewed once"
    );
}
