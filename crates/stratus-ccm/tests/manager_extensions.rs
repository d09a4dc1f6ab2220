//! What a vendor adds to the manager: its own controllers (disabled by
//! default or not), its own flags, a cloud initializer reading them, and
//! admission webhooks served on `--webhook-secure-port`, all against the
//! harness over real HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use stratus_testing::http_status::{get, insecure_client, send};

use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::core::admission::AdmissionResponse;
use stratus_ccm::app::{
    CloudControllerManager, Command, CommandError, ManagedController, ManagerError, ManagerOptions,
    OptionsError, Started, Webhook,
};
use stratus_cloud::CloudProvider;
use stratus_cloud::names::ControllerNames;
use stratus_testing::{FakeCloud, TestCluster};
use tokio::sync::watch;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    options: ManagerOptions,
}

fn options(args: &[&str]) -> ManagerOptions {
    let mut all = vec!["ccm"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).unwrap().options
}

/// The vendor's flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "acme cloud")]
struct AcmeFlags {
    /// The tag the tagging controller writes.
    #[arg(long = "acme-tag", default_value = "untagged")]
    tag: String,
}

const TAGGING: ControllerNames = ControllerNames::new("tagging-controller", "tagging");

/// A vendor controller with an observable effect: it writes a ConfigMap
/// holding the `--acme-tag` flag, counts its starts, then waits to stop.
fn tagging(starts: Arc<AtomicUsize>) -> ManagedController {
    ManagedController::new(TAGGING, move |ctx| {
        starts.fetch_add(1, Ordering::SeqCst);
        let tag = ctx
            .flags::<AcmeFlags>()
            .map(|f| f.tag.clone())
            .ok_or("the command was built without AcmeFlags")?;
        let mut stop = ctx.stop.clone();
        Ok(Started::run(async move {
            let maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "kube-system");
            let map = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some("acme-tagging".into()),
                    ..Default::default()
                },
                data: Some([("tag".to_string(), tag)].into()),
                ..Default::default()
            };
            if let Err(e) = maps.create(&PostParams::default(), &map).await {
                ctx.health.watch_failed(&e.to_string());
            }
            let _ = stop.wait_for(|s| *s).await;
        }))
    })
    .disabled_by_default()
}

/// Denies Services without `spec.loadBalancerClass` when they are of type
/// LoadBalancer.
fn lb_class_webhook() -> Webhook {
    Webhook::new("lb-class", "/validate-lb-class", |request| async move {
        let response = AdmissionResponse::from(&request);
        let spec = request.object.as_ref().and_then(|o| o.data.get("spec"));
        let lb = spec.and_then(|s| s.get("type")).and_then(|t| t.as_str()) == Some("LoadBalancer");
        let class = spec.and_then(|s| s.get("loadBalancerClass")).is_some();
        Ok(if lb && !class {
            response.deny("LoadBalancer Services need a loadBalancerClass")
        } else {
            response
        })
    })
}

fn review(service_type: &str) -> String {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r-1",
            "kind": {"group": "", "version": "v1", "kind": "Service"},
            "resource": {"group": "", "version": "v1", "resource": "services"},
            "name": "web",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {},
            "object": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"type": service_type}},
        }
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_controllers_flags_and_webhooks_run_in_the_manager() {
    let cluster = TestCluster::start().await.unwrap();
    let starts = Arc::new(AtomicUsize::new(0));
    let flags = options(&[
        "--cloud-provider=acme",
        "--controllers=*,tagging,-route",
        "--webhooks=*",
        "--leader-elect=false",
    ]);
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(flags)
        .with_client(cluster.client())
        .with_provider(Arc::new(FakeCloud::new()))
        .with_controller(tagging(starts.clone()))
        .with_webhook(lb_class_webhook())
        .with_flags(Arc::new(AcmeFlags { tag: "blue".into() }))
        .with_admin_addr("127.0.0.1:0".parse().unwrap())
        .with_webhook_addr("127.0.0.1:0".parse().unwrap())
        .start(stopped)
        .await
        .unwrap();

    // The vendor controller ran, with the vendor flag.
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client(), "kube-system");
    stratus_testing::eventually(
        "the tagging controller ran",
        Duration::from_secs(10),
        || async {
            maps.get_opt("acme-tagging")
                .await
                .unwrap()
                .and_then(|m| m.data)
                .is_some_and(|d| d["tag"] == "blue")
        },
    )
    .await;
    let admin = insecure_client(manager.admin_addr().unwrap());
    let (code, body) = get(&admin, "/healthz?verbose").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]tagging-controller ok"), "{body}");

    // The webhook answers on its own port; its metrics are on /metrics.
    let webhooks = insecure_client(manager.webhook_addr().expect("a webhook is enabled"));
    let post = |service_type: &str| {
        http::Request::post("/validate-lb-class")
            .header("content-type", "application/json")
            .body(review(service_type).into_bytes())
            .unwrap()
    };
    let (code, body) = send(&webhooks, post("LoadBalancer")).await;
    assert_eq!(code, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{body}");
    let (code, body) = send(&webhooks, post("ClusterIP")).await;
    assert_eq!(code, 200);
    assert!(body.contains("\"allowed\":true"), "{body}");
    let (_, metrics) = get(&admin, "/metrics").await;
    assert!(
        metrics
            .contains("cloud_provider_webhook_request_total{code=\"200\",webhook=\"lb-class\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("running_managed_controllers{name=\"tagging-controller\",manager=\"cloud-controller-manager\"} 1"),
        "{metrics}"
    );

    stop.send(true).unwrap();
    manager.wait().await.unwrap();
    assert_eq!(starts.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_by_default_controller_and_unselected_webhooks_stay_off() {
    let cluster = TestCluster::start().await.unwrap();
    let starts = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(options(&[
        "--cloud-provider=acme",
        "--configure-cloud-routes=false",
        "--leader-elect=false",
        "--secure-port=0",
    ]))
    .with_client(cluster.client())
    .with_provider(Arc::new(FakeCloud::new()))
    .with_controller(tagging(starts.clone()))
    .with_webhook(lb_class_webhook())
    .start(stopped)
    .await
    .unwrap();
    assert_eq!(
        manager.webhook_addr(),
        None,
        "no webhook enabled: no port bound"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(true).unwrap();
    manager.wait().await.unwrap();
    assert_eq!(starts.load(Ordering::SeqCst), 0, "`*` leaves it out");
}

#[tokio::test]
async fn unknown_webhooks_clashing_names_and_failing_starts_are_errors() {
    let cluster = TestCluster::start().await.unwrap();
    let start = |args: &[&str], extra: Option<ManagedController>| {
        let mut manager = CloudControllerManager::new(options(args))
            .with_client(cluster.client())
            .with_provider(Arc::new(FakeCloud::new()))
            .with_webhook(lb_class_webhook());
        if let Some(c) = extra {
            manager = manager.with_controller(c);
        }
        let (_stop, stopped) = watch::channel(false);
        async move { manager.start(stopped).await.map(|_| ()) }
    };

    let err = start(
        &[
            "--cloud-provider=acme",
            "--webhooks=lb-class,nope",
            "--webhook-secure-port=10258",
        ],
        None,
    )
    .await
    .unwrap_err();
    let ManagerError::Options(problems) = err else {
        panic!("{err}")
    };
    assert!(
        problems.contains(&OptionsError::SamePorts(10258)),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, OptionsError::UnknownWebhook { name, .. } if name == "nope")),
        "{problems:?}"
    );

    let clash = ManagedController::new(ControllerNames::new("my-service", "service"), |_| {
        Ok(Started::not_enabled("never"))
    });
    let err = start(&["--cloud-provider=acme"], Some(clash))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ManagerError::DuplicateController(ref n) if n == "my-service"),
        "{err}"
    );

    // A controller that fails to start stops the manager (Go exits).
    let broken = ManagedController::new(ControllerNames::new("broken", "broken"), |_| {
        Err("the tagging API is not configured".into())
    });
    let mut manager = CloudControllerManager::new(options(&[
        "--cloud-provider=acme",
        "--controllers=broken",
        "--leader-elect=false",
        "--secure-port=0",
    ]))
    .with_client(cluster.client())
    .with_provider(Arc::new(FakeCloud::new()))
    .with_controller(broken);
    manager = manager.with_controllers(vec![]);
    let (_stop, stopped) = watch::channel(false);
    // Without the controller registered, `broken` is an unknown name.
    let err = manager.start(stopped.clone()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("\"broken\" is not a known controller"),
        "{err}"
    );
    let broken = ManagedController::new(ControllerNames::new("broken", "broken"), |_| {
        Err("the tagging API is not configured".into())
    });
    let outcome = CloudControllerManager::new(options(&[
        "--cloud-provider=acme",
        "--controllers=broken",
        "--leader-elect=false",
        "--secure-port=0",
    ]))
    .with_client(cluster.client())
    .with_provider(Arc::new(FakeCloud::new()))
    .with_controller(broken)
    .run(stopped)
    .await;
    assert!(
        matches!(
            outcome,
            Err(ManagerError::ControllerStart { name: "broken", .. })
        ),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_passes_vendor_flags_to_the_built_in_provider_and_controllers() {
    let cluster = TestCluster::start().await.unwrap();
    let path = std::env::temp_dir().join(format!("stratus-ext-{}.kubeconfig", std::process::id()));
    cluster.server().write_kubeconfig(&path).unwrap();
    let starts = Arc::new(AtomicUsize::new(0));
    let seen_tag = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = seen_tag.clone();
    let command = Command::with_flags::<AcmeFlags>()
        .provider("acme", move |options, flags: &AcmeFlags| {
            *seen.lock().unwrap() = format!("{}:{}", options.cloud.cloud_provider, flags.tag);
            Ok(Arc::new(FakeCloud::new()) as Arc<dyn CloudProvider>)
        })
        .without_controller("node-route-controller")
        .controller(tagging(starts.clone()));
    let (stop, stopped) = watch::channel(false);
    // No --cloud-provider: the built-in provider is the default, and the
    // options name it.
    let args = vec![
        "acme-ccm".to_string(),
        format!("--kubeconfig={}", path.display()),
        "--secure-port=0".into(),
        "--leader-elect=false".into(),
        "--controllers=tagging".into(),
        "--acme-tag=green".into(),
    ];
    let task = tokio::spawn(command.run_with_args(args, stopped));
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client(), "kube-system");
    stratus_testing::eventually(
        "tagged through the command",
        Duration::from_secs(10),
        || async {
            maps.get_opt("acme-tagging")
                .await
                .unwrap()
                .and_then(|m| m.data)
                .is_some_and(|d| d["tag"] == "green")
        },
    )
    .await;
    assert_eq!(*seen_tag.lock().unwrap(), "acme:green");
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();

    // Another --cloud-provider is looked up in the registry, not given to
    // the built-in initializer.
    let (_stop, stopped) = watch::channel(false);
    let err = Command::new()
        .provider("acme", |_options, _flags| {
            Ok(Arc::new(FakeCloud::new()) as Arc<dyn CloudProvider>)
        })
        .run_with_args(
            [
                "acme-ccm".to_string(),
                "--cloud-provider=elsewhere".into(),
                format!("--kubeconfig={}", path.display()),
                "--secure-port=0".into(),
                "--leader-elect=false".into(),
            ],
            stopped,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CommandError::Manager(ManagerError::Provider { name, .. }) if name == "elsewhere"),
        "{err:?}"
    );
    let _ = std::fs::remove_file(&path);

    // The vendor's flags are in --help, in their own group; bad ones fail.
    let (_s, never) = watch::channel(false);
    let help = Command::with_flags::<AcmeFlags>()
        .run_with_args(["acme-ccm", "--help"], never.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        help.contains("acme cloud:") && help.contains("--acme-tag"),
        "{help}"
    );
    assert!(
        help.contains("webhook serving:") && help.contains("--webhook-secure-port"),
        "{help}"
    );
    let err = Command::with_flags::<AcmeFlags>()
        .run_with_args(["acme-ccm", "--acme-tag"], never)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--acme-tag"), "{err}");
}

/// A serving certificate for 127.0.0.1 signed by a new CA, written to
/// `dir`: the certificate and key paths, and the CA (PEM).
fn webhook_certificate(dir: &std::path::Path) -> (String, String, String) {
    let ca = stratus_runtime::tls::CertificateAuthority::new("webhook-ca").unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let csr = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap();
    let cert = ca.sign_request(&csr, Duration::from_secs(3600)).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (
        cert_path.display().to_string(),
        key_path.display().to_string(),
        ca.ca_pem().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_calls_the_managers_webhooks() {
    use base64::Engine as _;
    use k8s_openapi::api::core::v1::Service;

    let cluster = TestCluster::start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("stratus-webhook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key, ca_pem) = webhook_certificate(&dir);
    let flags = options(&[
        "--cloud-provider=acme",
        "--configure-cloud-routes=false",
        "--webhooks=lb-class",
        "--leader-elect=false",
        &format!("--webhook-tls-cert-file={cert}"),
        &format!("--webhook-tls-private-key-file={key}"),
    ]);
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(flags)
        .with_client(cluster.client())
        .with_provider(Arc::new(FakeCloud::new()))
        .with_webhook(lb_class_webhook())
        .with_admin_addr("127.0.0.1:0".parse().unwrap())
        .with_webhook_addr("127.0.0.1:0".parse().unwrap())
        .start(stopped)
        .await
        .unwrap();
    let port = manager.webhook_addr().unwrap().port();

    // Registered as a cluster would: a ValidatingWebhookConfiguration
    // naming the webhook's URL and CA.
    let configuration = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "lb-class"},
        "webhooks": [{
            "name": "lb-class.acme.example.com",
            "clientConfig": {
                "url": format!("https://127.0.0.1:{port}/validate-lb-class"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&ca_pem),
            },
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                "apiVersions": ["v1"], "resources": ["services"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    });
    let req = http::Request::post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    )
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&configuration).unwrap())
    .unwrap();
    cluster.client().request_text(req).await.unwrap();

    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let service = |name: &str, ty: &str| -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"type": ty, "ports": [{"port": 80}]},
        }))
        .unwrap()
    };
    let refused = services
        .create(&PostParams::default(), &service("lb", "LoadBalancer"))
        .await
        .unwrap_err();
    match refused {
        kube::Error::Api(s) => assert_eq!(
            s.message,
            "admission webhook \"lb-class.acme.example.com\" denied the request: LoadBalancer Services need a loadBalancerClass"
        ),
        other => panic!("expected a denial, got {other:?}"),
    }
    assert!(services.get_opt("lb").await.unwrap().is_none());
    services
        .create(&PostParams::default(), &service("internal", "ClusterIP"))
        .await
        .unwrap();
    let mut classed = service("classed", "LoadBalancer");
    classed.spec.as_mut().unwrap().load_balancer_class = Some("acme.example.com/lb".into());
    services
        .create(&PostParams::default(), &classed)
        .await
        .unwrap();

    stop.send(true).unwrap();
    manager.wait().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
