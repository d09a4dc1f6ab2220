//! Go's secure-serving flags, enforced: a client offering only a refused
//! TLS version or cipher suite cannot connect, SNI picks the certificate by
//! name, HTTP/2 can be turned off, port sharing lets two servers bind
//! one port, and a restarted server binds its port again at once.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use rustls::pki_types::ServerName;
use stratus_runtime::serving::{self, Handler, Listener, ServingOptions};
use stratus_runtime::tls_policy::TlsPolicy;

/// A client with only `versions` and `suites` (all when empty), asking for
/// `name`: the leaf certificate and ALPN protocol it got, or the error.
async fn connect(
    addr: std::net::SocketAddr,
    versions: &[&'static rustls::SupportedProtocolVersion],
    suites: &[&str],
    name: &str,
) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
    let mut provider = rustls::crypto::ring::default_provider();
    if !suites.is_empty() {
        provider
            .cipher_suites
            .retain(|s| suites.contains(&format!("{:?}", s.suite()).as_str()));
    }
    let provider = Arc::new(provider);
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(stratus_testing::insecure::any_server_certificate(
            provider,
        ))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(name.to_owned()).unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let session = tls.get_ref().1;
    Ok((
        session.peer_certificates().unwrap()[0].to_vec(),
        session.alpn_protocol().map(<[u8]>::to_vec),
    ))
}

/// A server under `options`; it stops when the returned sender is dropped.
async fn serve(
    options: ServingOptions,
) -> (std::net::SocketAddr, tokio::sync::watch::Sender<bool>) {
    let tls = serving::acceptor_with(false, None, None, "policy-test", &options).unwrap();
    let listener = Listener::bind_with("127.0.0.1:0".parse().unwrap(), tls, &options)
        .await
        .unwrap();
    let addr = listener.local_addr();
    let handler: Handler<Full<Bytes>> =
        Arc::new(|_| Box::pin(async { http::Response::new(Full::new(Bytes::new())) }));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(listener.serve(stopped, handler));
    (addr, stop)
}

fn policy(min: &str, suites: &[&str], sni: &[String]) -> TlsPolicy {
    let suites: Vec<String> = suites.iter().map(|s| s.to_string()).collect();
    TlsPolicy::from_go_flags(min, &suites, &[], sni).unwrap().0
}

const TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
const TLS13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

#[tokio::test]
async fn the_minimum_version_and_cipher_suites_are_enforced() {
    let (addr, _stop) = serve(ServingOptions {
        tls: policy("VersionTLS13", &[], &[]),
        ..Default::default()
    })
    .await;
    assert!(connect(addr, TLS13, &[], "localhost").await.is_ok());
    let refused = connect(addr, TLS12, &[], "localhost").await.unwrap_err();
    assert!(refused.to_lowercase().contains("version"), "{refused}");

    let (addr, _stop) = serve(ServingOptions {
        tls: policy("", &["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"], &[]),
        ..Default::default()
    })
    .await;
    // The self-signed certificate is ECDSA: the named suite works, another
    // TLS 1.2 suite is refused; TLS 1.3 is always on.
    assert!(
        connect(
            addr,
            TLS12,
            &["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"],
            "localhost"
        )
        .await
        .is_ok()
    );
    assert!(
        connect(
            addr,
            TLS12,
            &["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"],
            "localhost"
        )
        .await
        .is_err()
    );
    assert!(connect(addr, TLS13, &[], "localhost").await.is_ok());
}

#[tokio::test]
async fn sni_certificates_are_chosen_by_name_and_http2_can_be_off() {
    let dir = std::env::temp_dir().join(format!("stratus-sni-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["api.example.com".into()]).unwrap();
    let (cert, key) = (dir.join("sni.crt"), dir.join("sni.key"));
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    let sni_der = generated.cert.der().to_vec();
    let by_names = format!("{},{}", cert.display(), key.display());
    let by_pattern = format!("{},{}:*.wild.example", cert.display(), key.display());
    let (addr, _stop) = serve(ServingOptions {
        tls: policy("", &[], &[by_names, by_pattern]),
        disable_http2: true,
        ..Default::default()
    })
    .await;
    let (leaf, alpn) = connect(addr, TLS13, &[], "api.example.com").await.unwrap();
    assert_eq!(leaf, sni_der, "the certificate's own name");
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]), "HTTP/2 is off");
    let (leaf, _) = connect(addr, TLS13, &[], "a.wild.example").await.unwrap();
    assert_eq!(leaf, sni_der, "a wildcard pattern");
    let (leaf, _) = connect(addr, TLS13, &[], "localhost").await.unwrap();
    assert_ne!(leaf, sni_der, "other names get the default certificate");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[tokio::test]
async fn port_sharing_lets_two_servers_bind_one_port() {
    let shared = ServingOptions {
        reuse_port: true,
        ..Default::default()
    };
    let first = Listener::bind_with("127.0.0.1:0".parse().unwrap(), None, &shared)
        .await
        .unwrap();
    let port = first.local_addr();
    let second = Listener::bind_with(port, None, &shared).await;
    assert!(second.is_ok(), "{second:?}");
    let exclusive = Listener::bind_with(port, None, &ServingOptions::default()).await;
    assert!(exclusive.is_err(), "without sharing the port is taken");
}

/// The listener behind the manager's admin and webhook ports and the
/// kubelet API: hostile connections (silent, a partial ClientHello, a
/// handshake then a partial header, idle after a request) are closed after
/// the timeouts while other clients are answered; at the connection limit a
/// client waits for a free place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_connections_are_closed_and_others_answered_meanwhile() {
    let limits = |max_connections| serving::ConnectionLimits {
        max_connections,
        handshake_timeout: std::time::Duration::from_secs(1),
        first_request_timeout: std::time::Duration::from_secs(1),
        header_read_timeout: std::time::Duration::from_secs(1),
    };
    let (addr, _stop) = serve(ServingOptions {
        connections: limits(2_000),
        ..Default::default()
    })
    .await;
    stratus_testing::hostile::besiege_tls(addr, 75, std::time::Duration::from_secs(15))
        .await
        .unwrap();

    let (addr, _stop) = serve(ServingOptions {
        connections: limits(20),
        ..Default::default()
    })
    .await;
    stratus_testing::hostile::limit_holds(addr, 20, true)
        .await
        .unwrap();
}

/// As Go's listeners on Unix (SO_REUSEADDR on every socket), a server
/// restarted on its port while its last connection lingers in TIME_WAIT
/// binds again at once, with the default options.
#[cfg(unix)]
#[tokio::test]
async fn a_restarted_server_binds_its_port_again_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = Listener::bind_with(
        "127.0.0.1:0".parse().unwrap(),
        None,
        &ServingOptions::default(),
    )
    .await
    .unwrap();
    let addr = listener.local_addr();
    let handler: Handler<Full<Bytes>> =
        Arc::new(|_| Box::pin(async { http::Response::new(Full::new(Bytes::new())) }));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(listener.serve(stopped, handler));
    // The server closes the connection first (`Connection: close`), so its
    // side of it is left in TIME_WAIT.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).await.unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    drop(tcp);
    drop(stop);
    server.await.unwrap();
    let again = Listener::bind_with(addr, None, &ServingOptions::default()).await;
    assert!(again.is_ok(), "{:?}", again.err());
}
