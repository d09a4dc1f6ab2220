//! The whole manager against the harness: flags → leader election →
//! controllers → admin server → graceful stop.

use std::sync::Arc;
use std::time::Duration;
use stratus_testing::http_status::get;

use clap::Parser;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use stratus_ccm::app::{CloudControllerManager, ManagerError, ManagerOptions};
use stratus_testing::{FakeCloud, FakeInstance, NodeSpec, TestCluster, Verb};
use tokio::sync::watch;

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    options: ManagerOptions,
}

fn options(args: &[&str]) -> ManagerOptions {
    let mut all = vec!["ccm"];
    all.extend_from_slice(args);
    Command::try_parse_from(all).unwrap().options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_the_enabled_controllers_under_a_lease_and_stops_gracefully() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("n1").with_internal_ip("10.0.0.1"));
    let _kubelet = cluster
        .add_node(NodeSpec::new("n1").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    // The manager builds its own client from a kubeconfig (so its requests
    // are counted in rest_client_*).
    let kubeconfig =
        std::env::temp_dir().join(format!("stratus-ccm-run-{}.kubeconfig", std::process::id()));
    cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
    let flags = options(&[
        "--cloud-provider=fake",
        &kubeconfig_flag,
        "--controllers=*,-route",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
        "--allocate-node-cidrs",
        "--cluster-cidr=10.244.0.0/16",
    ]);
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(flags)
        .with_provider(Arc::new(cloud.clone()))
        .with_admin_addr("127.0.0.1:0".parse().unwrap())
        .with_identity("ccm-a")
        .start(stopped)
        .await
        .unwrap();
    let admin = manager.admin_addr().expect("serving");

    // The node is initialized (cloud-node) and given a pod CIDR (nodeipam).
    let nodes: Api<Node> = Api::all(cluster.client());
    stratus_testing::eventually(
        "n1 initialized with a pod CIDR",
        Duration::from_secs(15),
        || async {
            let n = nodes.get("n1").await.unwrap();
            let spec = n.spec.unwrap_or_default();
            let done = spec.provider_id.as_deref() == Some("fake://n1")
                && spec.pod_cidrs.as_deref() == Some(&["10.244.0.0/24".to_owned()][..]);
            if done {
                return None;
            }
            let holder = Api::<Lease>::namespaced(cluster.client(), "kube-system")
                .get_opt("cloud-controller-manager")
                .await
                .unwrap()
                .and_then(|l| l.spec?.holder_identity);
            Some(format!(
                "providerID {:?}, podCIDRs {:?}, taints {:?}, Lease holder {holder:?}",
                spec.provider_id, spec.pod_cidrs, spec.taints
            ))
        },
    )
    .await;
    // Four controllers read Nodes (cloud-node, lifecycle, service, IPAM)
    // and the service controller Services: one list and one watch of each
    // kind, shared.
    let manager_requests = |resource: &str, verb: Verb| {
        cluster
            .server()
            .requests()
            .iter()
            .filter(|r| {
                r.user_agent.starts_with("cloud-controller-manager/")
                    && r.resource == resource
                    && r.verb == verb
            })
            .count()
    };
    for resource in ["nodes", "services"] {
        assert_eq!(
            manager_requests(resource, Verb::List),
            1,
            "{resource} lists"
        );
        assert_eq!(
            manager_requests(resource, Verb::Watch),
            1,
            "{resource} watches"
        );
    }
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "kube-system");
    let lease = leases.get("cloud-controller-manager").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("ccm-a")
    );

    // /healthz lists leader election and each started controller; the route
    // controller was left out.
    let mut config = kube::Config::new(format!("https://{admin}").parse().unwrap());
    config.accept_invalid_certs = true;
    let https = kube::Client::try_from(config).unwrap();
    let (code, body) = get(&https, "/healthz?verbose").await;
    assert_eq!(code, 200, "{body}");
    for check in [
        "leaderElection",
        "cloud-node-controller",
        "cloud-node-lifecycle-controller",
        "service-lb-controller",
        "nodeipam",
    ] {
        assert!(
            body.contains(&format!("[+]{check} ok")),
            "{check} in {body}"
        );
    }
    assert!(!body.contains("node-route-controller"), "{body}");
    let (code, body) = get(&https, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        body.contains("running_managed_controllers{name=\"cloud-node-controller\",manager=\"cloud-controller-manager\"} 1"),
        "{body}"
    );
    assert!(body.contains("node_controller_cloud_provider_taint_removal_delay_seconds_count 1"));
    // client-go's leader-election gauge: this manager holds the Lease.
    assert!(
        body.contains("leader_election_master_status{name=\"cloud-controller-manager\"} 1"),
        "{body}"
    );
    // client-go's API client families: the Node was read and patched.
    let host = format!("host=\"127.0.0.1:{}\"", cluster.server().addr().port());
    for series in [
        format!("rest_client_requests_total{{code=\"200\",method=\"GET\",{host}}} "),
        format!("rest_client_requests_total{{code=\"200\",method=\"PATCH\",{host}}} "),
        format!("rest_client_request_duration_seconds_count{{verb=\"PATCH\",{host}}} "),
    ] {
        assert!(body.contains(&series), "{series} in {body}");
    }
    // The process collector, as every Go component has it.
    for family in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(body.contains(family), "{family} in {body}");
    }
    let (code, body) = get(&https, "/configz").await;
    assert_eq!(code, 200);
    assert!(
        body.contains("cloudcontrollermanager.config.k8s.io"),
        "{body}"
    );

    // A stop releases the Lease for the next manager.
    stop.send(true).unwrap();
    manager.wait().await.unwrap();
    let lease = leases.get("cloud-controller-manager").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.unwrap_or_default(), "");
    let _ = std::fs::remove_file(&kubeconfig);
}

#[tokio::test]
async fn invalid_flags_list_every_problem() {
    let cluster = TestCluster::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let err = CloudControllerManager::new(options(&[
        "--controllers=nope",
        "--concurrent-node-syncs=0",
    ]))
    .with_client(cluster.client())
    .run(stopped)
    .await
    .unwrap_err();
    let ManagerError::Options(problems) = &err else {
        panic!("{err}");
    };
    assert_eq!(problems.len(), 3, "{err}");
    let text = err.to_string();
    assert!(text.contains("--cloud-provider cannot be empty"), "{text}");
    assert!(
        text.contains("\"nope\" is not a known controller"),
        "{text}"
    );
    assert!(
        text.contains("--concurrent-node-syncs must be greater than 0"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unknown_provider_is_a_clear_error() {
    let cluster = TestCluster::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let err = CloudControllerManager::new(options(&[
        "--cloud-provider=no-such-cloud",
        "--secure-port=0",
    ]))
    .with_client(cluster.client())
    .run(stopped)
    .await
    .unwrap_err();
    assert!(matches!(err, ManagerError::Provider { .. }), "{err}");
    assert!(err.to_string().contains("no-such-cloud"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_loads_a_kubeconfig_and_a_registered_provider() {
    use stratus_ccm::app::{CommandError, run_with_args};
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("cli-node").with_internal_ip("10.0.0.9"));
    let _kubelet = cluster
        .add_node(NodeSpec::new("cli-node").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let provider = cloud.clone();
    stratus_ccm::app::register_cloud_provider("fake-cli", move |_config| {
        Ok(Arc::new(provider.clone()) as Arc<dyn stratus_cloud::CloudProvider>)
    })
    .unwrap();
    let path = std::env::temp_dir().join(format!("stratus-ccm-{}.kubeconfig", std::process::id()));
    cluster.server().write_kubeconfig(&path).unwrap();
    let (stop, stopped) = watch::channel(false);
    let args = vec![
        "cloud-controller-manager".to_string(),
        "--cloud-provider=fake-cli".into(),
        format!("--kubeconfig={}", path.display()),
        "--secure-port=0".into(),
        "--leader-elect=false".into(),
        "--controllers=cloud-node".into(),
    ];
    let task = tokio::spawn(run_with_args(args, stopped));
    let nodes: Api<Node> = Api::all(cluster.client());
    stratus_testing::eventually(
        "initialized through the command line",
        Duration::from_secs(15),
        || async {
            nodes
                .get("cli-node")
                .await
                .unwrap()
                .spec
                .unwrap_or_default()
                .provider_id
                .as_deref()
                == Some("fake://cli-node")
        },
    )
    .await;
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = std::fs::remove_file(&path);

    // --help is grouped like Go's, in Go's order, and names Go's flags.
    let (_s, never) = watch::channel(false);
    let err = run_with_args(["cloud-controller-manager", "--help"], never)
        .await
        .unwrap_err();
    assert!(matches!(err, CommandError::Args(_)));
    let help = err.to_string();
    let groups: Vec<&str> = help
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':') && !l.starts_with("Usage"))
        .collect();
    assert_eq!(
        groups,
        [
            "debugging:",
            "leader-migration:",
            "generic:",
            "cloud-node-controller:",
            "service-lb-controller:",
            "webhook:",
            "webhook serving:",
            "secure serving:",
            "authentication:",
            "authorization:",
            "misc:",
            "global:",
            "nodeipam controller:",
            "metrics:",
        ],
        "{help}"
    );
    // A flag's group: the text between its group's heading and the next.
    let group_of = |flag: &str| {
        let name = format!("--{flag}");
        let at = help
            .match_indices(&name)
            .map(|(i, _)| i)
            .find(|i| help[i + name.len()..].starts_with([' ', '\n']))
            .unwrap_or_else(|| panic!("{name} in {help}"));
        groups
            .iter()
            .rev()
            .find(|g| help.find(&format!("\n{g}\n")).is_some_and(|i| i < at))
            .copied()
    };
    for (flag, group) in [
        ("profiling", "debugging:"),
        ("leader-elect-lease-duration", "generic:"),
        ("route-reconciliation-period", "generic:"),
        ("kube-api-qps", "generic:"),
        ("feature-gates", "generic:"),
        ("concurrent-node-syncs", "cloud-node-controller:"),
        ("concurrent-service-syncs", "service-lb-controller:"),
        ("secure-port", "secure serving:"),
        ("node-status-update-frequency", "misc:"),
        ("kubeconfig", "misc:"),
        ("vmodule", "global:"),
        ("help", "global:"),
        ("node-cidr-mask-size", "nodeipam controller:"),
    ] {
        assert_eq!(group_of(flag), Some(group), "--{flag}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lease_stops_the_manager_with_an_error() {
    let cluster = TestCluster::start().await.unwrap();
    let flags = options(&[
        "--cloud-provider=fake",
        "--controllers=cloud-node",
        "--secure-port=0",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=1s",
        "--leader-elect-retry-period=200ms",
    ]);
    let (_stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(flags)
        .with_client(cluster.client())
        .with_provider(Arc::new(FakeCloud::new()))
        .start(stopped)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The API server stops answering: renewals fail past the deadline.
    cluster.server().pause(Duration::from_secs(6));
    let outcome = tokio::time::timeout(Duration::from_secs(5), manager.wait())
        .await
        .expect("stopped within the renew deadline and the controllers' stop");
    assert!(
        matches!(outcome, Err(ManagerError::LostLeadership)),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_provider_without_a_cluster_id_needs_allow_untagged_cloud() {
    use stratus_cloud::mock::MockCloudProvider;
    let cluster = TestCluster::start().await.unwrap();
    let untagged = || Arc::new(MockCloudProvider::new("untagged").with_cluster_id(false));
    let (_stop, stopped) = watch::channel(false);
    let err =
        CloudControllerManager::new(options(&["--cloud-provider=untagged", "--secure-port=0"]))
            .with_client(cluster.client())
            .with_provider(untagged())
            .run(stopped.clone())
            .await
            .unwrap_err();
    assert!(err.to_string().contains("no ClusterID found"), "{err}");
    let running = CloudControllerManager::new(options(&[
        "--cloud-provider=untagged",
        "--secure-port=0",
        "--leader-elect=false",
        "--allow-untagged-cloud",
    ]))
    .with_client(cluster.client())
    .with_provider(untagged())
    .start(stopped)
    .await;
    assert!(running.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_authenticates_and_authorizes_through_the_api_server() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use stratus_runtime::tls::CertificateAuthority;
    let cluster = TestCluster::start().await.unwrap();
    // The cluster's client CA, where kube-apiserver publishes it (this
    // test's CA in place of the harness's).
    let client_ca = CertificateAuthority::new("cluster-client-ca").unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client(), "kube-system");
    maps.patch(
        "extension-apiserver-authentication",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({
            "data": {"client-ca-file": client_ca.ca_pem()},
        })),
    )
    .await
    .unwrap();
    cluster.server().set_access_policy(|r| {
        (
            r.user == "metrics-reader" && r.path == "/metrics",
            String::new(),
        )
    });
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(options(&[
        "--cloud-provider=fake",
        "--controllers=cloud-node",
        "--leader-elect=false",
    ]))
    .with_client(cluster.client())
    .with_provider(Arc::new(FakeCloud::new()))
    .with_admin_addr("127.0.0.1:0".parse().unwrap())
    .start(stopped)
    .await
    .unwrap();
    let client = |identity: Option<(String, String)>| {
        let admin = manager.admin_addr().unwrap();
        let mut config = kube::Config::new(format!("https://{admin}").parse().unwrap());
        config.accept_invalid_certs = true;
        if let Some((cert, key)) = identity {
            use base64::Engine;
            let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
            config.auth_info.client_certificate_data = Some(b64(cert));
            config.auth_info.client_key_data = Some(b64(key).into());
        }
        kube::Client::try_from(config).unwrap()
    };
    let anonymous = client(None);
    assert_eq!(get(&anonymous, "/healthz").await.0, 200, "health is open");
    let (code, body) = get(&anonymous, "/metrics").await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("system:anonymous"), "{body}");
    let reader = client(Some(client_ca.issue_client("metrics-reader", &[]).unwrap()));
    let (code, body) = get(&reader, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("running_managed_controllers"), "{body}");
    assert_eq!(get(&reader, "/configz").await.0, 403);
    stop.send(true).unwrap();
    manager.wait().await.unwrap();
}

/// Go's `startRouteController`: routes to configure (the default
/// `--configure-cloud-routes`, a provider with routes) and an empty
/// `--cluster-cidr` stop the manager with an error; without routes in the
/// provider, or with `--configure-cloud-routes=false`, it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_without_a_cluster_cidr_stop_the_manager_as_in_go() {
    use stratus_testing::fake_cloud::Capability;
    let cluster = TestCluster::start().await.unwrap();
    let run = |args: &'static [&'static str], cloud: FakeCloud| {
        let client = cluster.client();
        async move {
            let (stop, stopped) = watch::channel(false);
            let mut all = vec![
                "--cloud-provider=fake",
                "--secure-port=0",
                "--leader-elect=false",
            ];
            all.extend_from_slice(args);
            let manager = CloudControllerManager::new(options(&all))
                .with_client(client)
                .with_provider(Arc::new(cloud))
                .start(stopped)
                .await
                .unwrap();
            let outcome = tokio::time::timeout(Duration::from_secs(2), manager.wait()).await;
            drop(stop);
            outcome
        }
    };
    let outcome = run(&[], FakeCloud::new()).await;
    let Ok(Err(err @ ManagerError::ControllerStart { name, .. })) = &outcome else {
        panic!("expected a start error, got {outcome:?}");
    };
    assert_eq!(*name, "node-route-controller");
    assert!(err.to_string().contains("--cluster-cidr is empty"), "{err}");
    // Still running after two seconds: no error.
    assert!(
        run(&["--configure-cloud-routes=false"], FakeCloud::new())
            .await
            .is_err()
    );
    assert!(
        run(&[], FakeCloud::new().without(Capability::Routes))
            .await
            .is_err()
    );
}
