//! The virtual-kubelet command: a registered provider runs as a node from
//! Go virtual-kubelet's flags; an unknown one is a clear error; a built-in
//! provider gets the vendor's flags typed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use stratus_kubelet::app::{
    CommandError, ProviderInit, RegistryError, register_pod_provider, run_with_args,
};
use stratus_testing::http_status::{get, insecure_client};
use stratus_testing::{ApiServer, MockPodProvider, ReviewUser};
use tokio::sync::watch;

/// A plain HTTP/1.0 GET on the loopback: the whole answer.
async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_provider_runs_from_gos_flags() {
    let api = ApiServer::start().await.unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("vk-command-{}.kubeconfig", std::process::id()));
    api.write_kubeconfig(&kubeconfig).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let record = seen.clone();
    register_pod_provider("command-test", move |init: ProviderInit| {
        *record.lock().unwrap() = Some((
            init.node_name.clone(),
            init.config_file.clone(),
            init.operating_system.clone(),
        ));
        Ok(Arc::new(MockPodProvider::new().with_node_name(&init.node_name)) as _)
    })
    .unwrap();

    // Unknown providers are named with the registered ones.
    let (_s, never) = watch::channel(false);
    let err = run_with_args(["virtual-kubelet", "--provider=nope"], never)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        CommandError::Registry(RegistryError::Unknown { .. })
    ));
    assert!(err.to_string().contains("command-test"), "{err}");

    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (stop, stopped) = watch::channel(false);
    let args = vec![
        "virtual-kubelet".to_string(),
        "--provider=command-test".into(),
        "--provider-config=/etc/vk/config.yaml".into(),
        "--nodename=vk-command".into(),
        "--os=Linux".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--listen-address=127.0.0.1".into(),
        "--kubelet-port=0".into(),
        "--authorization-mode=AlwaysAllow".into(),
        "--startup-timeout=20s".into(),
        "--full-resync-period=1m".into(),
        "--stream-idle-timeout=15s".into(),
        format!("--metrics-addr=127.0.0.1:{metrics_port}"),
    ];
    // A vendor binary at 2.3.4.
    let task = tokio::spawn(
        stratus_kubelet::app::Command::new()
            .with_version("2.3.4")
            .run_with_args(args, stopped),
    );
    let nodes: kube::Api<Node> = kube::Api::all(api.client());
    stratus_testing::eventually("vk-command Ready", Duration::from_secs(20), || async {
        nodes
            .get_opt("vk-command")
            .await
            .unwrap()
            .and_then(|n| n.status?.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;
    let node = nodes.get("vk-command").await.unwrap();
    assert_eq!(
        node.status
            .as_ref()
            .unwrap()
            .node_info
            .as_ref()
            .unwrap()
            .kubelet_version,
        "v1.37.0-vk-2.3.4",
        "the vendor binary's version, as Go's <k8s>-vk-<build>"
    );
    let taints = node.spec.unwrap().taints.unwrap();
    assert_eq!(taints[0].key, "virtual-kubelet.io/provider");
    assert_eq!(taints[0].value.as_deref(), Some("command-test"));
    assert_eq!(
        *seen.lock().unwrap(),
        Some((
            "vk-command".into(),
            Some("/etc/vk/config.yaml".into()),
            "Linux".into()
        ))
    );
    // The node's own metrics and health on --metrics-addr.
    let metrics = http_get(metrics_port, "/metrics").await;
    assert!(
        metrics.starts_with("HTTP/1.0 200") || metrics.starts_with("HTTP/1.1 200"),
        "{metrics}"
    );
    assert!(metrics.contains("stratus_kubelet_pods"), "{metrics}");
    assert!(
        metrics.contains("process_resident_memory_bytes "),
        "{metrics}"
    );
    // client-go's API client families: the node's requests, by code.
    for series in [
        "rest_client_requests_total{code=\"201\",method=\"POST\",host=\"127.0.0.1:",
        "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"127.0.0.1:",
        "rest_client_request_duration_seconds_bucket{le=\"0.005\",verb=\"GET\",host=\"127.0.0.1:",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    let health = http_get(metrics_port, "/healthz?verbose").await;
    assert!(health.contains("node/vk-command"), "{health}");

    // `AlwaysAllow` skips the access reviews, not authentication: a caller
    // without credentials is refused, one with a token is served even
    // though every access review would deny it.
    let port = node
        .status
        .unwrap()
        .daemon_endpoints
        .unwrap()
        .kubelet_endpoint
        .unwrap()
        .port;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (code, body) = get(&insecure_client(addr), "/pods").await;
    assert_eq!(code, 401, "{body}");
    api.add_token(
        "caller-token",
        ReviewUser {
            username: "caller".into(),
            uid: "u-caller".into(),
            groups: vec![],
        },
    );
    api.set_access_policy(|_| (false, "every review denies".into()));
    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.accept_invalid_certs = true;
    config.auth_info.token = Some("caller-token".to_owned().into());
    let caller = kube::Client::try_from(config).unwrap();
    let (code, body) = get(&caller, "/pods").await;
    assert_eq!(code, 200, "{body}");
    // Each kubelet-API request is counted by subresource (the kubelet's
    // authorization name: `/pods` is `proxy`) and code.
    let metrics = http_get(metrics_port, "/metrics").await;
    for series in [
        "stratus_kubelet_api_requests_total{node=\"vk-command\",subresource=\"proxy\",code=\"401\"} 1",
        "stratus_kubelet_api_requests_total{node=\"vk-command\",subresource=\"proxy\",code=\"200\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    // The serving certificate (self-signed here, valid for a year): its
    // seconds left, as the kubelet's certificate manager reports them.
    let ttl = stratus_testing::metric_sample(
        &metrics,
        "kubelet_certificate_manager_server_ttl_seconds{node=\"vk-command\"}",
    )
    .unwrap_or_else(|| panic!("no certificate TTL in {metrics}"));
    let year = 365.0 * 24.0 * 3600.0;
    assert!(ttl > year - 3600.0 && ttl <= year, "{ttl}");
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = std::fs::remove_file(&kubeconfig);
}

/// A vendor's own flags, next to Go virtual-kubelet's.
#[derive(Debug, clap::Args)]
struct BackendFlags {
    /// The backend's endpoint.
    #[arg(long, default_value = "https://backend.invalid")]
    backend_endpoint: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_flags_are_parsed_and_reach_the_factory() {
    use stratus_kubelet::app::Command;
    // The factory reports what it got as its error, so the test sees it
    // without running a node.
    register_pod_provider("flags-test", |init: ProviderInit| {
        let flags = init
            .flags::<BackendFlags>()
            .ok_or("no BackendFlags in the command")?;
        Err(format!("endpoint={}", flags.backend_endpoint))
    })
    .unwrap();
    let api = ApiServer::start().await.unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("vk-flags-{}.kubeconfig", std::process::id()));
    api.write_kubeconfig(&kubeconfig).unwrap();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let err = Command::with_flags::<BackendFlags>()
        .default_provider("flags-test")
        .run_with_args(
            [
                "my-virtual-kubelet".to_string(),
                format!("--kubeconfig={}", kubeconfig.display()),
                "--nodename=vk-flags".into(),
                "--metrics-addr=".into(),
                "--backend-endpoint=https://backend.example.com".into(),
            ],
            stopped.clone(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CommandError::Provider { message, .. } if message == "endpoint=https://backend.example.com"),
        "{err}"
    );
    // A command without them hands the factory no BackendFlags.
    let err = Command::new()
        .run_with_args(
            [
                "virtual-kubelet".to_string(),
                format!("--kubeconfig={}", kubeconfig.display()),
                "--nodename=vk-flags".into(),
                "--metrics-addr=".into(),
                "--provider=flags-test".into(),
            ],
            stopped.clone(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no BackendFlags"), "{err}");
    // They are in --help, and an unknown one is refused.
    let help = Command::with_flags::<BackendFlags>()
        .run_with_args(["my-virtual-kubelet", "--help"], stopped.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(help.contains("--backend-endpoint"), "{help}");
    assert!(help.contains("--nodename"), "{help}");
    let unknown = Command::new()
        .run_with_args(["virtual-kubelet", "--backend-endpoint=x"], stopped)
        .await
        .unwrap_err();
    assert!(matches!(unknown, CommandError::Args(_)), "{unknown}");
    let _ = std::fs::remove_file(&kubeconfig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_in_provider_gets_the_flags_typed() {
    use stratus_kubelet::app::{Command, Providers};
    let api = ApiServer::start().await.unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("vk-built-in-{}.kubeconfig", std::process::id()));
    api.write_kubeconfig(&kubeconfig).unwrap();
    // The initializer reports what it got as its error, so the test sees
    // it without running a node.
    let command = || {
        Command::with_flags::<BackendFlags>().provider(
            "built-in",
            |init: ProviderInit, flags: &BackendFlags| {
                let seen = format!("{} endpoint={}", init.node_name, flags.backend_endpoint);
                async move { Err::<Providers, _>(seen) }
            },
        )
    };
    let args = |extra: &[&str]| {
        let mut args = vec![
            "my-virtual-kubelet".to_string(),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--nodename=vk-built-in".into(),
            "--metrics-addr=".into(),
            "--backend-endpoint=https://backend.example.com".into(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args
    };
    let (_stop, stopped) = watch::channel(false);
    // No --provider, or its own name: the built-in provider.
    for extra in [&[][..], &["--provider=built-in"][..]] {
        let err = command()
            .run_with_args(args(extra), stopped.clone())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CommandError::Provider { name, message }
                if name == "built-in" && message == "vk-built-in endpoint=https://backend.example.com"),
            "{err}"
        );
    }
    // Another --provider is the registry's business.
    let err = command()
        .run_with_args(args(&["--provider=not-registered"]), stopped)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CommandError::Registry(RegistryError::Unknown { name, .. }) if name == "not-registered"),
        "{err}"
    );
    let _ = std::fs::remove_file(&kubeconfig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_nodes_run_in_one_process_from_one_configuration() {
    let api = ApiServer::start().await.unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("vk-several-{}.kubeconfig", std::process::id()));
    api.write_kubeconfig(&kubeconfig).unwrap();
    let made = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = made.clone();
    register_pod_provider("several-test", move |init: ProviderInit| {
        record
            .lock()
            .unwrap()
            .push((init.node_name.clone(), init.config_file.clone()));
        Ok(Arc::new(MockPodProvider::new().with_node_name(&init.node_name)) as _)
    })
    .unwrap();
    // Bad lists are refused before anything starts.
    for bad in [
        "--nodename=vk-a,vk-a",
        "--nodename=vk-a,,vk-b",
        "--nodename=VK",
    ] {
        let (_s, never) = watch::channel(false);
        let err = run_with_args(["virtual-kubelet", "--provider=several-test", bad], never)
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::NodeNames(_)), "{bad}: {err}");
    }
    assert!(made.lock().unwrap().is_empty());

    let (stop, stopped) = watch::channel(false);
    let args = vec![
        "virtual-kubelet".to_string(),
        "--provider=several-test".into(),
        "--provider-config=/etc/vk/shared.yaml".into(),
        "--nodename=vk-a,vk-b,vk-c".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--listen-address=127.0.0.1".into(),
        "--kubelet-port=0".into(),
        "--authorization-mode=AlwaysAllow".into(),
        "--startup-timeout=20s".into(),
        "--metrics-addr=".into(),
    ];
    // A vendor binary at 2.3.4.
    let task = tokio::spawn(
        stratus_kubelet::app::Command::new()
            .with_version("2.3.4")
            .run_with_args(args, stopped),
    );
    let nodes: kube::Api<Node> = kube::Api::all(api.client());
    stratus_testing::eventually("three Ready nodes", Duration::from_secs(20), || async {
        let list = nodes.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count()
            == 3
    })
    .await;
    // One provider per node, from the same configuration; each node's
    // kubelet API on its own port.
    let mut seen = made.lock().unwrap().clone();
    seen.sort();
    let config = Some(std::path::PathBuf::from("/etc/vk/shared.yaml"));
    assert_eq!(
        seen,
        [
            ("vk-a".to_string(), config.clone()),
            ("vk-b".to_string(), config.clone()),
            ("vk-c".to_string(), config)
        ]
    );
    let mut ports: Vec<i32> = nodes
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|n| {
            Some(
                n.status
                    .as_ref()?
                    .daemon_endpoints
                    .as_ref()?
                    .kubelet_endpoint
                    .as_ref()?
                    .port,
            )
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 3, "{ports:?}");
    // A pod bound to each node runs there.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(api.client(), "default");
    for node in ["vk-a", "vk-b", "vk-c"] {
        let pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("on-{node}")},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
    }
    stratus_testing::eventually(
        "a pod Running on each node",
        Duration::from_secs(20),
        || async {
            let list = pods.list(&Default::default()).await.unwrap();
            list.items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count()
                == 3
        },
    )
    .await;
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = std::fs::remove_file(&kubeconfig);
}
