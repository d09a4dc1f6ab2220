//! The admin server over real TLS, read with a kube client trusting its
//! self-signed CA.

use std::sync::Arc;
use stratus_testing::http_status::get;

use stratus_runtime::admin::AdminServer;
use stratus_runtime::health::{ControllerHealth, HealthChecks};
use stratus_runtime::metrics::RuntimeMetrics;
use stratus_runtime::tls::self_signed;

#[tokio::test]
async fn serves_health_metrics_and_configz_over_tls() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = RuntimeMetrics::register(&mut registry);
    metrics.workqueue.queue("service").added();
    let checks = HealthChecks::new();
    let route = ControllerHealth::new();
    checks.add("node-route-controller", route.clone());
    checks.add("leaderElection", || Ok(()));
    let readiness = HealthChecks::new();
    readiness.add("informer-sync", || Err("Nodes not synced".to_string()));
    let certificate = self_signed("test-ccm", &["localhost"]).unwrap();
    let ca = certificate.ca_der.clone();
    let server = AdminServer::builder("127.0.0.1:0".parse().unwrap())
        .certificate(certificate)
        .health(checks)
        .readiness(readiness)
        .registry(Arc::new(registry))
        .configz(serde_json::json!({"cloud-controller-manager": {"concurrentServiceSyncs": 4}}))
        .bind()
        .await
        .unwrap();
    let addr = server.local_addr();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(server.serve(stopped));

    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.root_cert = Some(vec![ca]);
    let client = kube::Client::try_from(config).unwrap();

    assert_eq!(get(&client, "/healthz").await, (200, "ok".into()));
    assert_eq!(get(&client, "/livez").await, (200, "ok".into()));
    let (code, body) = get(&client, "/healthz?verbose").await;
    assert_eq!(code, 200);
    assert_eq!(
        body,
        "[+]leaderElection ok\n[+]node-route-controller ok\nhealthz check passed\n"
    );
    assert_eq!(
        get(&client, "/healthz/leaderElection").await,
        (200, "ok".into())
    );
    assert_eq!(get(&client, "/healthz/nope").await.0, 404);

    route.stopped();
    let (code, body) = get(&client, "/healthz").await;
    assert_eq!(code, 500);
    assert!(
        body.contains("[-]node-route-controller failed: reason withheld"),
        "{body}"
    );
    let (code, body) = get(&client, "/healthz/node-route-controller").await;
    assert_eq!(code, 500);
    assert!(body.contains("the controller has stopped"), "{body}");

    let (code, body) = get(&client, "/readyz").await;
    assert_eq!(code, 500);
    assert!(body.contains("[-]informer-sync failed"), "{body}");

    let (code, body) = get(&client, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        body.contains("workqueue_adds_total{name=\"service\"} 1"),
        "{body}"
    );

    let (code, body) = get(&client, "/configz").await;
    assert_eq!(code, 200);
    let config: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        config["cloud-controller-manager"]["concurrentServiceSyncs"],
        4
    );
    assert_eq!(get(&client, "/nothing-here").await.0, 404);
}

#[tokio::test]
async fn bad_certificate_files_and_busy_ports_are_typed_errors() {
    let dir = std::env::temp_dir().join(format!("stratus-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = dir.join("tls.crt");
    let key = dir.join("tls.key");
    std::fs::write(&cert, "not a certificate").unwrap();
    std::fs::write(&key, "not a key").unwrap();
    let err = stratus_runtime::tls::from_pem_files(&cert, &key).unwrap_err();
    assert!(err.to_string().contains("tls.crt"), "{err}");
    let err = stratus_runtime::tls::from_pem_files(&dir.join("missing.crt"), &key).unwrap_err();
    assert!(err.to_string().contains("missing.crt"), "{err}");

    let first = AdminServer::builder("127.0.0.1:0".parse().unwrap())
        .plain_http()
        .bind()
        .await
        .unwrap();
    let taken = first.local_addr();
    let err = AdminServer::builder(taken)
        .plain_http()
        .bind()
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&taken.to_string()), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
