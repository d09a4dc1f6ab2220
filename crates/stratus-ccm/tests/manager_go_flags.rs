//! The manager as a drop-in for Go's cloud-controller-manager: every flag
//! of Go's command line is accepted with Go's syntax, and the example
//! DaemonSet of the Kubernetes documentation starts it, each controller
//! writing as its own ServiceAccount (`--use-service-account-credentials`).

mod common;
mod documented;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use common::free_port;
use documented::DocumentedManager;
use kube::api::Api;
use stratus_ccm::app::{Command, ManagerOptions, OptionsError, known_controllers};
use stratus_cloud::CloudProvider;
use stratus_testing::apiserver::Verb;
use stratus_testing::http_status::{get, insecure_client};
use stratus_testing::{FakeCloud, TestCluster, eventually};
use tokio::sync::watch;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    options: ManagerOptions,
}

fn parse(args: &[String]) -> Result<ManagerOptions, clap::Error> {
    let mut all = vec!["cloud-controller-manager".to_string()];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).map(|c| c.options)
}

/// A PEM certificate and key on disk (for the file flags).
fn pem_files(dir: &std::path::Path) -> (String, String) {
    let ca = stratus_runtime::tls::CertificateAuthority::new("test-ca").unwrap();
    let (cert, key) = ca.issue_client("front-proxy-client", &[]).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    std::fs::write(dir.join("ca.crt"), ca.ca_pem()).unwrap();
    (
        cert_path.display().to_string(),
        key_path.display().to_string(),
    )
}

/// Go's cloud-controller-manager flags (cloud-provider's options and
/// component-base's generic, secure-serving, authentication,
/// authorization, logging, metrics and feature-gate flags), each with a
/// value Go accepts.
fn every_go_flag(dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let (cert, key) = pem_files(dir);
    let ca = dir.join("ca.crt").display().to_string();
    let kubeconfig = dir.join("kubeconfig").display().to_string();
    vec![
        ("allocate-node-cidrs", "true".into()),
        ("allow-metric-labels", "workqueue_depth,name='service,Nodes'".into()),
        ("allow-untagged-cloud", "true".into()),
        ("authentication-kubeconfig", kubeconfig.clone()),
        ("authentication-skip-lookup", "true".into()),
        ("authentication-token-webhook-cache-ttl", "30s".into()),
        ("authentication-tolerate-lookup-failure", "true".into()),
        ("authorization-always-allow-paths", "/healthz,/readyz,/livez,/metrics".into()),
        ("authorization-kubeconfig", kubeconfig.clone()),
        ("authorization-webhook-cache-authorized-ttl", "10s".into()),
        ("authorization-webhook-cache-unauthorized-ttl", "10s".into()),
        ("bind-address", "127.0.0.1".into()),
        ("cert-dir", dir.display().to_string()),
        ("cidr-allocator-type", "RangeAllocator".into()),
        ("client-ca-file", ca.clone()),
        ("cloud-config", dir.join("cloud.conf").display().to_string()),
        ("cloud-provider", "fake".into()),
        ("cluster-cidr", "172.17.0.0/16".into()),
        ("cluster-name", "kubernetes".into()),
        ("concurrent-node-status-updates", "2".into()),
        ("concurrent-node-syncs", "1".into()),
        ("concurrent-service-syncs", "1".into()),
        ("configure-cloud-routes", "true".into()),
        ("contention-profiling", "false".into()),
        ("controller-start-interval", "0s".into()),
        ("controllers", "*,-cloud-node-lifecycle".into()),
        ("disabled-metrics", "workqueue_adds_total".into()),
        ("external-cloud-volume-plugin", "gce".into()),
        ("feature-gates", "CloudControllerManagerWebhook=true,AllAlpha=false".into()),
        ("http2-max-streams-per-connection", "1000".into()),
        ("kube-api-burst", "30".into()),
        ("kube-api-content-type", "application/vnd.kubernetes.protobuf".into()),
        ("kube-api-qps", "20".into()),
        ("kubeconfig", kubeconfig),
        ("leader-elect", "true".into()),
        ("leader-elect-lease-duration", "15s".into()),
        ("leader-elect-renew-deadline", "10s".into()),
        ("leader-elect-resource-lock", "leases".into()),
        ("leader-elect-resource-name", "cloud-controller-manager".into()),
        ("leader-elect-resource-namespace", "kube-system".into()),
        ("leader-elect-retry-period", "2s".into()),
        ("log-flush-frequency", "5s".into()),
        ("logging-format", "text".into()),
        ("master", "https://127.0.0.1:6443".into()),
        ("min-resync-period", "12h0m0s".into()),
        ("node-monitor-period", "5s".into()),
        ("node-status-update-frequency", "5m0s".into()),
        ("node-sync-period", "0s".into()),
        ("permit-address-sharing", "true".into()),
        ("permit-port-sharing", "false".into()),
        ("profiling", "true".into()),
        ("requestheader-allowed-names", "front-proxy-client".into()),
        ("requestheader-client-ca-file", ca),
        ("requestheader-extra-headers-prefix", "x-remote-extra-".into()),
        ("requestheader-group-headers", "x-remote-group".into()),
        ("requestheader-username-headers", "x-remote-user".into()),
        ("route-reconciliation-period", "10s".into()),
        ("secure-port", "10258".into()),
        ("show-hidden-metrics-for-version", "1.32".into()),
        (
            "tls-cipher-suites",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA".into(),
        ),
        ("tls-cert-file", cert.clone()),
        ("tls-min-version", "VersionTLS12".into()),
        ("tls-private-key-file", key.clone()),
        ("tls-sni-cert-key", format!("{cert},{key}:*.example.com")),
        ("use-service-account-credentials", "true".into()),
        ("v", "2".into()),
        ("vmodule", "service*=4,node=6".into()),
        ("webhook-bind-address", "0.0.0.0".into()),
        ("webhook-cert-dir", dir.display().to_string()),
        ("webhook-disable-http2-serving", "true".into()),
        ("webhook-secure-port", "10260".into()),
        ("webhook-tls-cert-file", cert),
        ("webhook-tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".into()),
        ("webhook-tls-curve-preferences", "X25519,CurveP256".into()),
        ("webhook-tls-min-version", "VersionTLS13".into()),
        ("webhook-tls-private-key-file", key),
        ("webhooks", "".into()),
    ]
}

#[test]
fn every_flag_of_go_s_manager_is_accepted() {
    let dir = std::env::temp_dir().join(format!("stratus-go-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let flags = every_go_flag(&dir);
    assert_eq!(flags.len(), 77, "the 77 flags of Go's manager");
    let value_of = |name: &str| &flags.iter().find(|(f, _)| *f == name).unwrap().1;
    // Each alone (with its pair, for certificate and key), then all
    // together.
    for (flag, value) in &flags {
        let mut args = vec![
            "--cloud-provider=fake".to_string(),
            "--cluster-cidr=172.17.0.0/16".into(),
            format!("--{flag}={value}"),
        ];
        for (a, b) in [
            ("tls-cert-file", "tls-private-key-file"),
            ("webhook-tls-cert-file", "webhook-tls-private-key-file"),
        ] {
            if *flag == a || *flag == b {
                args.push(format!("--{a}={}", value_of(a)));
                args.push(format!("--{b}={}", value_of(b)));
            }
        }
        let parsed = parse(&args);
        let options = parsed.unwrap_or_else(|e| panic!("--{flag}={value}: {e}"));
        let problems = options.validate(&known_controllers());
        assert!(problems.is_empty(), "--{flag}={value}: {problems:?}");
    }
    let all: Vec<String> = flags.iter().map(|(f, v)| format!("--{f}={v}")).collect();
    let options = parse(&all).unwrap();
    assert!(options.validate(&known_controllers()).is_empty());
    assert!(options.cloud.use_service_account_credentials);
    assert!(options.feature_gates().unwrap()["CloudControllerManagerWebhook"]);
    assert_eq!(options.vmodule_rules().unwrap().len(), 2);
    let warnings = options.ignored_flag_warnings();
    for flag in [
        "--node-sync-period",
        "--kube-api-content-type",
        "--external-cloud-volume-plugin",
        "--profiling",
    ] {
        assert!(
            warnings.iter().any(|w| w.contains(flag)),
            "{flag}: {warnings:?}"
        );
    }
    let (_, _, tls_warnings) = options.serving().unwrap();
    assert!(
        tls_warnings
            .iter()
            .any(|w| w.contains("TLS_RSA_WITH_AES_128_CBC_SHA")),
        "{tls_warnings:?}"
    );
    // Boolean flags without a value, as Go's.
    let bare = parse(&[
        "--use-service-account-credentials".into(),
        "--profiling".into(),
    ])
    .unwrap();
    assert!(bare.cloud.use_service_account_credentials && bare.debugging.profiling == Some(true));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_values_are_typed_errors() {
    let problems = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        parse(&args).unwrap().validate(&known_controllers())
    };
    assert!(matches!(
        problems(&["--cloud-provider=x", "--feature-gates=NoSuchGate=true"])[..],
        [OptionsError::UnknownFeatureGate(ref g)] if g == "NoSuchGate"
    ));
    assert!(matches!(
        problems(&["--cloud-provider=x", "--feature-gates=AllAlpha=maybe"])[..],
        [OptionsError::FeatureGateValue(_)]
    ));
    assert!(matches!(
        problems(&["--cloud-provider=x", "--tls-min-version=VersionTLS9"])[..],
        [OptionsError::Tls { .. }]
    ));
    assert!(matches!(
        problems(&["--cloud-provider=x", "--tls-cipher-suites=TLS_FANCY"])[..],
        [OptionsError::Tls { .. }]
    ));
    assert!(matches!(
        problems(&["--cloud-provider=x", "--vmodule=service"])[..],
        [OptionsError::Vmodule(_)]
    ));
    assert!(matches!(
        problems(&["--cloud-provider=x", "--allow-metric-labels=nolabel"])[..],
        [OptionsError::Metrics(_)]
    ));
    assert!(matches!(
        problems(&[
            "--cloud-provider=x",
            "--show-hidden-metrics-for-version=latest"
        ])[..],
        [OptionsError::Metrics(_)]
    ));
    assert!(parse(&["--min-resync-period=twelve".into()]).is_err());
}

/// The example DaemonSet of "Cloud Controller Manager Administration"
/// (kubernetes.io), plus where to reach the harness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_daemonset_arguments_run_each_controller_as_its_service_account() {
    let cluster = TestCluster::start().await.unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("stratus-ds-{}.kubeconfig", std::process::id()));
    cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let manager = DocumentedManager::start(
        &kubeconfig,
        &["--disabled-metrics=running_managed_controllers"],
    );
    let _kubelet = manager.converge(&cluster, || {}).await;

    // Each controller's writes were made by its own ServiceAccount.
    let writes: Vec<_> = cluster
        .server()
        .requests()
        .into_iter()
        .filter(|r| {
            matches!(
                r.verb,
                Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
            )
        })
        .filter(|r| r.status < 300)
        .collect();
    let by = |account: &str, resource: &str| {
        writes.iter().any(|r| {
            r.user == format!("system:serviceaccount:kube-system:{account}")
                && r.resource == resource
        })
    };
    let summary: Vec<String> = writes
        .iter()
        .map(|r| {
            format!(
                "{:?} {} by {:?} ({})",
                r.verb, r.resource, r.user, r.user_agent
            )
        })
        .collect();
    assert!(by("cloud-node-controller", "nodes"), "{summary:#?}");
    assert!(by("service-controller", "services/status"), "{summary:#?}");
    assert!(by("route-controller", "nodes/status"), "{summary:#?}");
    assert!(by("node-controller", "nodes"), "nodeipam: {summary:#?}");
    // No controller wrote nodes or services with the manager's own
    // credentials (the test and the simulated kubelet write as the
    // harness's admin).
    assert!(
        !writes.iter().any(|r| r.user.is_empty()
            && r.user_agent.starts_with("cloud-controller-manager")
            && (r.resource.starts_with("nodes") || r.resource.starts_with("services"))),
        "{summary:#?}"
    );
    // The tokens came from TokenRequest for accounts the manager made.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(cluster.client(), "kube-system");
    for account in [
        "cloud-node-controller",
        "service-controller",
        "route-controller",
        "node-controller",
    ] {
        assert!(
            accounts.get_opt(account).await.unwrap().is_some(),
            "{account}"
        );
    }

    let admin = insecure_client(([127, 0, 0, 1], manager.port).into());
    let (code, body) = get(&admin, "/healthz").await;
    assert_eq!(code, 200, "{body}");
    let (_, metrics) = get(&admin, "/metrics").await;
    assert!(
        !metrics.contains("running_managed_controllers"),
        "--disabled-metrics: {metrics}"
    );
    assert!(metrics.contains("workqueue_adds"), "{metrics}");

    manager.stop().await;
    let _ = std::fs::remove_file(&kubeconfig);
}

/// A client of the manager's admin port (self-signed) presenting `identity`.
fn admin_client(port: u16, identity: (String, String)) -> kube::Client {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.accept_invalid_certs = true;
    config.auth_info.client_certificate_data = Some(b64(&identity.0));
    config.auth_info.client_key_data = Some(b64(&identity.1).into());
    kube::Client::try_from(config).unwrap()
}

/// GET `path` with request headers.
async fn get_as(client: &kube::Client, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = http::Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    stratus_testing::http_status::send(client, request.body(Vec::new()).unwrap()).await
}

/// `--requestheader-*`: a front proxy's certificate makes the admin port
/// believe the user named in its headers; nobody else's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_proxy_names_the_user_in_headers() {
    use stratus_runtime::tls::CertificateAuthority;
    let cluster = TestCluster::start().await.unwrap();
    // Only alice may read /metrics; the reviews the manager asks for are kept.
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    cluster.server().set_access_policy(move |r| {
        seen.lock()
            .unwrap()
            .push((r.user.clone(), r.groups.clone()));
        let allowed = r.path == "/metrics" && r.user == "alice";
        (allowed, if allowed { "allowed" } else { "no rule" }.into())
    });
    let dir = std::env::temp_dir().join(format!("stratus-front-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let proxy_ca = CertificateAuthority::new("front-proxy-ca").unwrap();
    let client_ca = CertificateAuthority::new("client-ca").unwrap();
    std::fs::write(dir.join("front-proxy-ca.crt"), proxy_ca.ca_pem()).unwrap();
    std::fs::write(dir.join("client-ca.crt"), client_ca.ca_pem()).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let port = free_port();
    let args = vec![
        "cloud-controller-manager".to_string(),
        "--cloud-provider=fake".into(),
        "--leader-elect=false".into(),
        "--controllers=cloud-node".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        format!("--client-ca-file={}", dir.join("client-ca.crt").display()),
        format!(
            "--requestheader-client-ca-file={}",
            dir.join("front-proxy-ca.crt").display()
        ),
        "--requestheader-allowed-names=front-proxy-client".into(),
        "--requestheader-username-headers=X-Remote-User".into(),
        "--requestheader-group-headers=X-Remote-Group".into(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
    ];
    let cloud = FakeCloud::new();
    let command = Command::new().provider("fake", move |_options, _flags| {
        Ok(Arc::new(cloud) as Arc<dyn CloudProvider>)
    });
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(command.run_with_args(args, stopped));
    let proxy = admin_client(
        port,
        proxy_ca.issue_client("front-proxy-client", &[]).unwrap(),
    );
    eventually(
        "the admin port listens",
        Duration::from_secs(20),
        || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        },
    )
    .await;
    assert_eq!(get_as(&proxy, "/healthz", &[]).await.0, 200);

    // The proxy speaks for alice, and for an admin of system:masters.
    let alice = [("X-Remote-User", "alice"), ("X-Remote-Group", "dev")];
    assert_eq!(get_as(&proxy, "/metrics", &alice).await.0, 200);
    let (code, body) = get_as(&proxy, "/configz", &alice).await;
    assert_eq!(code, 403);
    assert!(
        body.contains(r#"User "alice" cannot get path "/configz""#),
        "{body}"
    );
    assert!(
        asked
            .lock()
            .unwrap()
            .contains(&("alice".to_string(), vec!["dev".to_string()]))
    );
    let root = [
        ("X-Remote-User", "root"),
        ("X-Remote-Group", "system:masters"),
    ];
    assert_eq!(get_as(&proxy, "/configz", &root).await.0, 200);
    // Without a user header the proxy itself is nobody: anonymous.
    let (code, body) = get_as(&proxy, "/metrics", &[]).await;
    assert_eq!(code, 403);
    assert!(body.contains(r#"User "system:anonymous""#), "{body}");

    // A certificate of the proxy CA with another name is refused.
    let intruder = admin_client(port, proxy_ca.issue_client("intruder", &[]).unwrap());
    let (code, body) = get_as(&intruder, "/metrics", &alice).await;
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("--requestheader-allowed-names"), "{body}");

    // An ordinary client's headers count for nothing: its certificate names it.
    let bob = admin_client(port, client_ca.issue_client("bob", &[]).unwrap());
    let (code, body) = get_as(&bob, "/metrics", &alice).await;
    assert_eq!(code, 403);
    assert!(body.contains(r#"User "bob""#), "{body}");
    let alice_cert = admin_client(port, client_ca.issue_client("alice", &[]).unwrap());
    assert_eq!(get_as(&alice_cert, "/metrics", &[]).await.0, 200);

    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `Command::run_main_with_args` runs the arguments it is given, not the
/// process's (the test binary's would not parse): a provider that is not
/// registered ends it with exit code 1 and the reason.
#[test]
fn run_main_with_args_runs_the_arguments_given() {
    let code = Command::new().run_main_with_args([
        "cloud-controller-manager",
        "--cloud-provider=not-registered-anywhere",
        "--leader-elect=false",
        "--secure-port=0",
        "--kubeconfig=/nonexistent/kubeconfig",
    ]);
    assert_eq!(code, std::process::ExitCode::FAILURE);
}
