//! The kubelet API's serving certificate through a
//! `kubernetes.io/kubelet-serving` CSR: approved and signed by the
//! harness's strict signer, served (clients verify it against the cluster
//! CA), rotated before it expires; bad requests are denied, unanswered ones
//! time out.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, ListParams, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use stratus_kubelet::api::serving_certificate::{CsrConfig, CsrError, ServingCertificateRotation};
use stratus_kubelet::api::{ApiAuth, KubeletApi, KubeletServer};
use stratus_testing::http_status::get;
use stratus_testing::{ApiServer, MockPodProvider, csr_signer, eventually};
use tokio::sync::watch;

fn config(node: &str) -> CsrConfig {
    let mut config = CsrConfig::new(node);
    config.ip_addresses.push("127.0.0.1".parse().unwrap());
    config.dns_names.push(node.to_owned());
    config.poll_interval = Duration::from_millis(50);
    config.issue_timeout = Duration::from_secs(10);
    config
}

/// A client that trusts only the harness's CA.
fn verifying_client(server: &ApiServer, addr: std::net::SocketAddr) -> kube::Client {
    let ca = CertificateDer::from_pem_slice(server.kubelet_client_ca_pem().as_bytes()).unwrap();
    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.root_cert = Some(vec![ca.to_vec()]);
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_serve_and_rotate() {
    let server = ApiServer::start().await.unwrap();
    let signer = csr_signer::spawn(&server, Duration::from_secs(3));
    let (certificate, rotation) =
        ServingCertificateRotation::bootstrap(server.client(), config("vk-csr"))
            .await
            .unwrap();
    let first = rotation.current().clone();
    let lifetime = first.not_after.duration_since(first.not_before).unwrap();
    assert!(lifetime <= Duration::from_secs(4), "{lifetime:?}");

    let api = KubeletApi::new(
        "vk-csr",
        Arc::new(MockPodProvider::new()),
        server.client(),
        ApiAuth::AllowAll,
    );
    let kubelet = KubeletServer::builder(api)
        .bind("127.0.0.1:0".parse().unwrap())
        .certificate(certificate)
        .start()
        .await
        .unwrap();
    let addr = kubelet.local_addr();
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(kubelet.run(stopped.clone()));
    let client = verifying_client(&server, addr);
    assert_eq!(get(&client, "/healthz").await, (200, "ok".to_owned()));

    // Rotation: a second request is issued before the first expires, and
    // new connections still verify.
    tokio::spawn(rotation.run(stopped));
    let csrs: Api<CertificateSigningRequest> = Api::all(server.client());
    eventually("a renewal request", Duration::from_secs(10), || async {
        csrs.list(&ListParams::default()).await.unwrap().items.len() >= 2
    })
    .await;
    let renewed = csrs.list(&ListParams::default()).await.unwrap();
    let second = renewed
        .items
        .iter()
        .find(|c| c.metadata.name.as_deref() != Some(first.request.as_str()))
        .unwrap();
    eventually("the renewal is issued", Duration::from_secs(10), || async {
        csrs.get(second.metadata.name.as_deref().unwrap())
            .await
            .unwrap()
            .status
            .and_then(|s| s.certificate)
            .is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        get(&verifying_client(&server, addr), "/healthz").await.0,
        200
    );
    // Past the first certificate's expiry, the server still verifies: it
    // serves the renewed one.
    let expired_in = first
        .not_after
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    tokio::time::sleep(expired_in + Duration::from_millis(1100)).await;
    assert_eq!(
        get(&verifying_client(&server, addr), "/healthz").await.0,
        200,
        "the rotated certificate is served"
    );
    stop.send(true).unwrap();
    signer.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_requests_time_out_and_bad_ones_are_denied() {
    let server = ApiServer::start().await.unwrap();
    // No signer for this signer name: a typed timeout.
    let mut other = config("vk-x");
    other.signer_name = "example.com/nobody".into();
    other.issue_timeout = Duration::from_millis(300);
    let err = ServingCertificateRotation::bootstrap(server.client(), other)
        .await
        .unwrap_err();
    assert!(matches!(err, CsrError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("example.com/nobody"), "{err}");

    // The harness's approver denies a request that is not a node's.
    let signer = csr_signer::spawn(&server, Duration::from_secs(60));
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["evil".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "system:admin");
    let request = params.serialize_request(&key).unwrap().pem().unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(server.client());
    let csr = CertificateSigningRequest {
        metadata: kube::api::ObjectMeta {
            name: Some("impostor".into()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.into_bytes()),
            signer_name: csr_signer::KUBELET_SERVING_SIGNER.into(),
            usages: Some(vec!["digital signature".into(), "server auth".into()]),
            ..Default::default()
        },
        status: None,
    };
    csrs.create(&PostParams::default(), &csr).await.unwrap();
    eventually("the impostor is denied", Duration::from_secs(5), || async {
        let status = csrs
            .get("impostor")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        status.certificate.is_none()
            && status.conditions.unwrap_or_default().iter().any(|c| {
                c.type_ == "Denied"
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("system:node:"))
            })
    })
    .await;

    // A node's request is approved and issued.
    let (_, rotation) = ServingCertificateRotation::bootstrap(server.client(), config("vk-ok"))
        .await
        .unwrap();
    assert!(
        rotation
            .current()
            .cert_pem
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    signer.abort();
}
