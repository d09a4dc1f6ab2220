//! The `local` provider against a running local cloud: the conformance
//! suite, traffic through its load balancers, bad input, faults and a
//! restart of the cloud.
//!
//! Each test uses addresses of its own in 127.0.0.0/8 (this machine's
//! loopback), so that the tests can run at once.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use common::{fetch, named_server};
use k8s_openapi::api::core::v1::{Node, Service};
use stratus_cloud::{CloudErrorKind, CloudProvider, InstanceState};
use stratus_local_cloud::{Config, LocalCloud};
use stratus_provider_local::LocalProvider;
use stratus_testing::conformance::{CloudFixtures, run_cloud_conformance};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

async fn cloud(range: &str, state_file: Option<std::path::PathBuf>) -> LocalCloud {
    LocalCloud::start(Config {
        address_range: range.parse().unwrap(),
        state_file,
        health_interval: Duration::from_millis(100),
        connect_timeout: Duration::from_millis(300),
        ..Config::default()
    })
    .await
    .unwrap()
}

fn provider(cloud: &LocalCloud) -> LocalProvider {
    let config = format!("endpoint: http://{}\nmaxWaitMs: 200\n", cloud.addr());
    LocalProvider::from_config(Some(config.as_bytes())).unwrap()
}

/// A call to the cloud's API, as `curl` would make it.
async fn api(cloud: &LocalCloud, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(cloud.addr()).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: cloud\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

fn node(name: &str, ip: Option<&str>) -> Node {
    let mut n: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    if let Some(ip) = ip {
        n.status = Some(
            serde_json::from_value(
                serde_json::json!({"addresses": [{"type": "InternalIP", "address": ip}]}),
            )
            .unwrap(),
        );
    }
    n
}

fn service(name: &str, ports: serde_json::Value) -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("0000-{name}")},
        "spec": {"type": "LoadBalancer", "ports": ports}
    }))
    .unwrap()
}

fn ingress(status: &k8s_openapi::api::core::v1::LoadBalancerStatus) -> String {
    status.ingress.as_ref().unwrap()[0].ip.clone().unwrap()
}

/// A port free on every one of `ips` (tried from a kernel-picked one).
async fn common_port(ips: &[&str]) -> u16 {
    'next: loop {
        let probe = TcpListener::bind((ips[0], 0)).await.unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        for ip in ips {
            if TcpListener::bind((*ip, port)).await.is_err() {
                continue 'next;
            }
        }
        return port;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_passes_the_cloud_provider_conformance_suite() {
    let cloud = cloud("127.77.10.0/24", None).await;
    let (status, body) = api(
        &cloud,
        "PUT",
        "/v1/instances/i-live",
        r#"{"nodeName":"live-node","zone":"local-a","region":"local","instanceType":"process",
            "addresses":[{"type":"InternalIP","address":"127.0.10.1"},{"type":"Hostname","address":"live-node"}]}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let provider = provider(&cloud);
    let fixtures = CloudFixtures::new("live-node", "gone-node").with_provider_id("local://i-live");
    let report = run_cloud_conformance(&provider, &fixtures).await;
    println!("{report}");
    report.assert_complete();
    // Without a provider ID the node is found by name, in one batch too.
    let by_name = node("live-node", None);
    let meta = stratus_cloud::InstancesV2::instance_metadata(&provider, &by_name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(meta.provider_id, "local://i-live");
    assert_eq!(
        (meta.zone.as_str(), meta.instance_type.as_str()),
        ("local-a", "process")
    );
    let batch = provider.instances_v2().unwrap().batch().unwrap();
    let states = batch
        .instance_state_batch(&[by_name, node("gone-node", None)])
        .await
        .unwrap();
    assert!(matches!(
        states[..],
        [Ok(InstanceState::Running), Ok(InstanceState::Gone)]
    ));
    // A stopped instance is shut down, not gone.
    api(
        &cloud,
        "PUT",
        "/v1/instances/i-live",
        r#"{"nodeName":"live-node","state":"stopped"}"#,
    )
    .await;
    assert_eq!(
        provider
            .instances_v2()
            .unwrap()
            .instance_state(&fixtures.existing)
            .await
            .unwrap(),
        InstanceState::ShutDown
    );
    // Another provider's ID is refused as invalid input.
    let mut foreign = node("x", None);
    foreign.spec =
        Some(serde_json::from_value(serde_json::json!({"providerID": "aws://i-1"})).unwrap());
    let err = provider
        .instances_v2()
        .unwrap()
        .instance_exists(&foreign)
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    cloud.stop().await;
}

/// Nodes a, b and c at `ips`, and the Service `web` (port 80 to their
/// NodePort `port`) ensured through `lb`: the nodes, the Service and the
/// load balancer's address.
async fn web_on_three_nodes(
    lb: &dyn stratus_cloud::LoadBalancer,
    ips: [&str; 3],
    port: u16,
) -> (Vec<Node>, Service, SocketAddr) {
    let nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .zip(ips)
        .map(|(n, ip)| node(n, Some(ip)))
        .collect();
    let svc = service("web", serde_json::json!([{"port": 80, "nodePort": port}]));
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let address: SocketAddr = format!("{}:80", ingress(&status)).parse().unwrap();
    (nodes, svc, address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_spread_connections_follow_backend_changes_and_skip_dead_backends() {
    let cloud = cloud("127.77.11.0/24", None).await;
    let provider = provider(&cloud);
    let ips = ["127.0.11.1", "127.0.11.2", "127.0.11.3"];
    let port = common_port(&ips).await;
    let mut servers = vec![
        named_server(ips[0], port, "a").await,
        named_server(ips[1], port, "b").await,
        named_server(ips[2], port, "c").await,
    ];
    let lb = provider.load_balancer().unwrap();
    let (nodes, svc, address) = web_on_three_nodes(lb, ips, port).await;
    assert!(
        address.ip().to_string().starts_with("127.77.11."),
        "{address}"
    );

    let mut seen = BTreeMap::new();
    for _ in 0..30 {
        *seen.entry(fetch(address).await.unwrap()).or_insert(0) += 1;
    }
    assert_eq!(
        seen,
        BTreeMap::from([("a".into(), 10), ("b".into(), 10), ("c".into(), 10)])
    );

    // Node c leaves: no new connection goes to it.
    lb.update_load_balancer("kubernetes", &svc, &nodes[..2])
        .await
        .unwrap();
    for _ in 0..10 {
        assert_ne!(fetch(address).await.unwrap(), "c");
    }
    assert!(
        lb.load_balancer_up_to_date("kubernetes", &svc, &nodes[..2])
            .await
            .unwrap()
    );
    assert!(
        !lb.load_balancer_up_to_date("kubernetes", &svc, &nodes)
            .await
            .unwrap()
    );

    // Node b's server dies: every connection still gets an answer (from a).
    servers.remove(1).abort();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for _ in 0..20 {
        assert_eq!(fetch(address).await.unwrap(), "a");
    }
    // It comes back: the health check takes it back.
    servers.push(named_server(ips[1], port, "b").await);
    let mut back = false;
    for _ in 0..50 {
        if fetch(address).await.unwrap() == "b" {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back, "a healthy again backend gets connections");

    // Deleted: the address is released and nothing listens on it.
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert!(TcpStream::connect(address).await.is_err());
    assert_eq!(
        lb.get_load_balancer("kubernetes", &svc).await.unwrap(),
        None
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_outside_the_allowed_ranges_are_kept_but_never_connected_to() {
    let cloud = LocalCloud::start(Config {
        address_range: "127.77.17.0/24".parse().unwrap(),
        allowed_backends: vec!["127.0.17.0/24".parse().unwrap()],
        ..Config::default()
    })
    .await
    .unwrap();
    let provider = provider(&cloud);
    // Both servers are this machine's; only the first is in the allowed range.
    let port = common_port(&["127.0.17.1", "127.0.18.1"]).await;
    let _inside = named_server("127.0.17.1", port, "inside").await;
    let _outside = named_server("127.0.18.1", port, "outside").await;
    let nodes = [node("a", Some("127.0.17.1")), node("b", Some("127.0.18.1"))];
    let svc = service("web", serde_json::json!([{"port": 80, "nodePort": port}]));
    let lb = provider.load_balancer().unwrap();
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let address: SocketAddr = format!("{}:80", ingress(&status)).parse().unwrap();
    for _ in 0..10 {
        assert_eq!(fetch(address).await.unwrap(), "inside");
    }
    // The load balancer keeps what it was asked.
    assert!(
        lb.load_balancer_up_to_date("kubernetes", &svc, &nodes)
            .await
            .unwrap()
    );
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_datagrams_reach_the_backend_and_its_answers_come_back() {
    let cloud = cloud("127.77.12.0/24", None).await;
    let provider = provider(&cloud);
    let backend = UdpSocket::bind("127.0.12.1:0").await.unwrap();
    let node_port = backend.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((len, from)) = backend.recv_from(&mut buf).await {
            let mut answer = b"echo:".to_vec();
            answer.extend_from_slice(&buf[..len]);
            let _ = backend.send_to(&answer, from).await;
        }
    });
    let svc = service(
        "dns",
        serde_json::json!([{"port": 53, "protocol": "UDP", "nodePort": node_port}]),
    );
    let status = provider
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &svc, &[node("a", Some("127.0.12.1"))])
        .await
        .unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client
        .connect((ingress(&status).as_str(), 53))
        .await
        .unwrap();
    for i in 0..3 {
        client.send(format!("q{i}").as_bytes()).await.unwrap();
        let mut buf = [0u8; 64];
        let len = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf))
            .await
            .expect("an answer through the load balancer")
            .unwrap();
        assert_eq!(&buf[..len], format!("echo:q{i}").as_bytes());
    }
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taken_ports_exhausted_ranges_and_bad_services_get_typed_errors() {
    // Something else on the machine has the range's first address's port 80:
    // the load balancer gets the next address.
    let squatter = TcpListener::bind("127.77.13.1:80").await;
    if squatter.is_err() {
        eprintln!("cannot bind port 80 here (not root): skipping the taken-port half");
    }
    let cloud = cloud("127.77.13.0/30", None).await;
    let provider = provider(&cloud);
    let lb = provider.load_balancer().unwrap();
    let nodes = [node("a", Some("127.0.13.1"))];
    let web = service("web", serde_json::json!([{"port": 80, "nodePort": 30080}]));
    if squatter.is_ok() {
        let status = lb
            .ensure_load_balancer("kubernetes", &web, &nodes)
            .await
            .unwrap();
        assert_eq!(ingress(&status), "127.77.13.2");
        // The range (two addresses) is now exhausted for a second one.
        let other = service(
            "other",
            serde_json::json!([{"port": 80, "nodePort": 30081}]),
        );
        let err = lb
            .ensure_load_balancer("kubernetes", &other, &nodes)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CloudErrorKind::Other);
        assert!(err.to_string().contains("AddressesExhausted"), "{err}");
    } else {
        let status = lb
            .ensure_load_balancer("kubernetes", &web, &nodes)
            .await
            .unwrap();
        assert_eq!(ingress(&status), "127.77.13.1");
    }
    // Adding a port something else holds on the load balancer's address.
    let address = ingress(
        &lb.get_load_balancer("kubernetes", &web)
            .await
            .unwrap()
            .unwrap(),
    );
    let held = TcpListener::bind((address.as_str(), 0)).await.unwrap();
    let held_port = held.local_addr().unwrap().port();
    let grown = service(
        "web",
        serde_json::json!([{"port": 80, "nodePort": 30080}, {"port": held_port, "nodePort": 30082}]),
    );
    let err = lb
        .ensure_load_balancer("kubernetes", &grown, &nodes)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("PortInUse"), "{err}");
    // The load balancer is as it was.
    assert!(
        lb.load_balancer_up_to_date("kubernetes", &web, &nodes)
            .await
            .unwrap()
    );

    for (ports, why) in [
        (
            serde_json::json!([{"port": 80, "protocol": "SCTP", "nodePort": 30083}]),
            "SCTP",
        ),
        (serde_json::json!([{"port": 80}]), "nodePort"),
        (serde_json::json!([]), "no ports"),
    ] {
        let err = lb
            .ensure_load_balancer("kubernetes", &service("bad", ports), &nodes)
            .await
            .unwrap_err();
        assert!(err.is_invalid_input(), "{err}");
        assert!(err.to_string().contains(why), "{err}");
    }
    // Garbage the API itself refuses, answered with a code and a reason.
    let (status, body) = api(&cloud, "PUT", "/v1/load-balancers/x", "{not json").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("\"code\":\"Invalid\""), "{body}");
    let (status, body) = api(
        &cloud,
        "PUT",
        "/v1/routes/r",
        r#"{"destinationCidr":"nope","targetNode":"a"}"#,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = api(&cloud, "GET", "/v1/nothing", "").await;
    assert_eq!(status, 404);
    // A body beyond the API's 4 MiB is refused, not read into memory.
    let huge = format!(r#"{{"nodeName":"{}"}}"#, "x".repeat(5 * 1024 * 1024));
    let mut s = TcpStream::connect(cloud.addr()).await.unwrap();
    let head = format!(
        "PUT /v1/instances/big HTTP/1.1\r\nHost: cloud\r\nContent-Length: {}\r\n\r\n",
        huge.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // The server may answer and close before it has all of it.
    let _ = s.write_all(huge.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("at most"), "{answer}");
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_calls_are_retried_after_the_cloud_s_delay_then_reported_typed() {
    let cloud = cloud("127.77.14.0/24", None).await;
    let provider = provider(&cloud);
    let (status, _) = api(
        &cloud,
        "PUT",
        "/v1/faults",
        r#"{"callsPerSecond":5,"burst":1}"#,
    )
    .await;
    assert_eq!(status, 200);
    let routes = provider.routes().unwrap();
    for i in 0..6 {
        let route = stratus_cloud::Route {
            target_node: format!("n{i}"),
            destination_cidr: format!("10.244.{i}.0/24"),
            ..Default::default()
        };
        routes
            .create_route("kubernetes", &format!("uid-{i}"), &route)
            .await
            .unwrap();
    }
    let listed = routes.list_routes("kubernetes").await.unwrap();
    assert_eq!(listed.len(), 6);
    // The cloud counted the throttled attempts too.
    let (_, calls) = api(&cloud, "GET", "/v1/calls", "").await;
    let calls: BTreeMap<String, u64> = serde_json::from_str(&calls).unwrap();
    assert!(calls["PUT /v1/routes/{name}"] > 6, "{calls:?}");
    assert!(
        routes
            .list_routes("other-cluster")
            .await
            .unwrap()
            .is_empty()
    );

    // One attempt only: the throttle reaches the controllers as Throttled
    // with the cloud's delay.
    let impatient = LocalProvider::from_config(Some(
        format!("endpoint: http://{}\nattempts: 1\n", cloud.addr()).as_bytes(),
    ))
    .unwrap();
    api(
        &cloud,
        "PUT",
        "/v1/faults",
        r#"{"callsPerSecond":1,"burst":1}"#,
    )
    .await;
    let first = impatient.routes().unwrap().list_routes("kubernetes").await;
    let second = impatient.routes().unwrap().list_routes("kubernetes").await;
    let err = first.and(second).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            CloudErrorKind::Throttled {
                retry_after: Some(_)
            }
        ),
        "{err:?}"
    );

    // A failing cloud is retried too.
    api(&cloud, "PUT", "/v1/faults", r#"{"failNext":2}"#).await;
    assert_eq!(routes.list_routes("kubernetes").await.unwrap().len(), 6);
    // Many pages are read in full.
    api(&cloud, "PUT", "/v1/faults", "{}").await;
    for i in 0..620 {
        let body = format!(r#"{{"nodeName":"n{i}"}}"#);
        api(&cloud, "PUT", &format!("/v1/instances/i-{i:04}"), &body).await;
    }
    let batch = provider.instances_v2().unwrap().batch().unwrap();
    let states = batch
        .instance_state_batch(&[node("n0", None), node("n619", None)])
        .await
        .unwrap();
    assert!(
        states
            .iter()
            .all(|s| matches!(s, Ok(InstanceState::Running))),
        "{states:?}"
    );
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_cloud_listens_again_from_its_state_file() {
    let dir = std::env::temp_dir().join(format!("stratus-local-cloud-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.json");
    let _ = std::fs::remove_file(&state);
    let port = common_port(&["127.0.15.1"]).await;
    let _server = named_server("127.0.15.1", port, "kept").await;
    let nodes = [node("a", Some("127.0.15.1"))];
    let svc = service("web", serde_json::json!([{"port": 8080, "nodePort": port}]));

    let first = cloud("127.77.15.0/24", Some(state.clone())).await;
    let status = provider(&first)
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let address: SocketAddr = format!("{}:8080", ingress(&status)).parse().unwrap();
    assert_eq!(fetch(address).await.unwrap(), "kept");
    first.stop().await;
    assert!(
        TcpStream::connect(address).await.is_err(),
        "a stopped cloud listens nowhere"
    );

    let second = cloud("127.77.15.0/24", Some(state.clone())).await;
    assert_eq!(fetch(address).await.unwrap(), "kept");
    let provider = provider(&second);
    let lb = provider.load_balancer().unwrap();
    assert_eq!(
        lb.get_load_balancer("kubernetes", &svc).await.unwrap(),
        Some(status)
    );
    assert!(
        lb.load_balancer_up_to_date("kubernetes", &svc, &nodes)
            .await
            .unwrap()
    );
    second.stop().await;

    std::fs::write(&state, "{garbage").unwrap();
    let err = LocalCloud::start(Config {
        state_file: Some(state.clone()),
        ..Config::default()
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("state.json"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether a socket can be bound to `ip` (port 0): whether the address is
/// this machine's.
fn bindable(ip: &str) -> bool {
    std::net::TcpListener::bind((ip, 0)).is_ok()
}

/// The kernel's local routes in 198.19.240.0/20 (this test's pod network).
fn kernel_routes() -> String {
    let out = std::process::Command::new("ip")
        .args(["-4", "route", "show", "table", "local"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" 198.19.24"))
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_in_the_pod_network_make_a_node_s_pod_addresses_this_machine_s_own() {
    let dir = std::env::temp_dir().join(format!("stratus-local-routes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.json");
    let _ = std::fs::remove_file(&state);
    let start = |state: std::path::PathBuf| {
        LocalCloud::start(Config {
            address_range: "127.77.16.0/24".parse().unwrap(),
            pod_network: Some("198.19.240.0/20".parse().unwrap()),
            state_file: Some(state),
            ..Config::default()
        })
    };
    let pod = "198.19.241.5";
    assert!(!bindable(pod), "no route yet: the address is nobody's");
    // The route goes even if an assertion fails before the cloud stops.
    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["-4", "route", "del", "local", "198.19.241.0/24"])
                .args(["dev", "lo", "table", "local"])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    let _cleanup = Cleanup;

    let first = start(state.clone()).await.unwrap();
    let provider = provider(&first);
    let routes = provider.routes().unwrap();
    let route = stratus_cloud::Route {
        target_node: "a".into(),
        destination_cidr: "198.19.241.0/24".into(),
        ..Default::default()
    };
    routes
        .create_route("kubernetes", "a", &route)
        .await
        .unwrap();
    // A pod's server binds its address and is reached at it.
    let port = common_port(&[pod]).await;
    let server = named_server(pod, port, "pod a-5").await;
    assert_eq!(
        fetch(SocketAddr::from(([198, 19, 241, 5], port)))
            .await
            .unwrap(),
        "pod a-5"
    );
    server.abort();
    assert_eq!(kernel_routes(), "local 198.19.241.0/24 dev lo scope host");

    // Outside the pod network: refused, typed, nothing written.
    let outside = stratus_cloud::Route {
        target_node: "b".into(),
        destination_cidr: "198.18.241.0/24".into(),
        ..Default::default()
    };
    let err = routes
        .create_route("kubernetes", "b", &outside)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), CloudErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("outside the pod network"), "{err}");
    assert!(!bindable("198.18.241.5"));

    // A stopped cloud takes its routes out of the kernel; a restarted one
    // puts them back from its state file.
    first.stop().await;
    assert!(!bindable(pod), "the stopped cloud's route is gone");
    assert_eq!(kernel_routes(), "");
    let second = start(state.clone()).await.unwrap();
    assert!(bindable(pod), "the restarted cloud's route is back");
    let provider = self::provider(&second);
    let routes = provider.routes().unwrap();
    let listed = routes.list_routes("kubernetes").await.unwrap();
    assert_eq!(listed.len(), 1);
    routes.delete_route("kubernetes", &listed[0]).await.unwrap();
    assert!(!bindable(pod), "a deleted route's addresses are nobody's");
    second.stop().await;
    assert_eq!(kernel_routes(), "");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TCP server on `ip:port` that writes `<name> <the client's address>` to
/// each connection: whom it sees tells the kernel's forwarding (the
/// client's own address) from the proxy's (the cloud's connection).
async fn peer_server(ip: &str, port: u16, name: &'static str) -> tokio::task::JoinHandle<()> {
    let listener = TcpListener::bind((ip, port)).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, peer)) = listener.accept().await {
            let _ = s.write_all(format!("{name} {peer}").as_bytes()).await;
        }
    })
}

/// Connect to `address`: the answering backend's name, and whether it saw
/// this very connection (kernel forwarding) rather than the proxy's.
async fn fetch_direct(address: SocketAddr) -> (String, bool) {
    let mut s = TcpStream::connect(address).await.unwrap();
    let mine = s.local_addr().unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    let (name, peer) = answer.split_once(' ').unwrap();
    (name.to_owned(), peer == mine.to_string())
}

/// A connection to `address` (an echo load balancer whose server first
/// writes the peer it sees) once the kernel carries it: the server sees
/// the client's own address. Within 5 s.
async fn kernel_carried(address: SocketAddr) -> TcpStream {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = TcpStream::connect(address).await.unwrap();
        let mut peer = [0u8; 64];
        let n = s.read(&mut peer).await.unwrap();
        if String::from_utf8_lossy(&peer[..n]).trim() == s.local_addr().unwrap().to_string() {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "no kernel rule");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Put load balancer `name` with one TCP listener on `port` to `backend`
/// through the cloud's API: the address it serves on.
async fn put_tcp_balancer(
    cloud: &LocalCloud,
    name: &str,
    port: u16,
    backend: SocketAddr,
) -> SocketAddr {
    let body = serde_json::json!({"listeners": [{"protocol": "TCP", "port": port,
        "backends": [{"address": backend.ip().to_string(), "port": backend.port()}]}]});
    let (status, body) = api(
        cloud,
        "PUT",
        &format!("/v1/load-balancers/{name}"),
        &body.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    format!("{}:{port}", answer["address"].as_str().unwrap())
        .parse()
        .unwrap()
}

/// The nftables tables of this test process's clouds.
fn our_nft_tables() -> Vec<String> {
    let out = std::process::Command::new("nft")
        .args(["list", "tables"])
        .output()
        .unwrap();
    let prefix = format!("stratus_local_cloud_{}_", std::process::id());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&prefix))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_kernel_forwarding_connections_go_straight_to_healthy_backends() {
    // A table left by a daemon that is gone (no process 4194303): the next
    // kernel-forwarding cloud deletes it.
    let stale = "stratus_local_cloud_4194303_0";
    let made = std::process::Command::new("nft")
        .args(["add", "table", "ip", stale])
        .status()
        .unwrap();
    assert!(made.success());
    // This test's tables go even if an assertion fails first.
    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for line in our_nft_tables() {
                if let Some(name) = line.strip_prefix("table ip ") {
                    let _ = std::process::Command::new("nft")
                        .args(["delete", "table", "ip", name])
                        .status();
                }
            }
        }
    }
    let _cleanup = Cleanup;
    let cloud = LocalCloud::start(Config {
        address_range: "127.77.18.0/24".parse().unwrap(),
        health_interval: Duration::from_millis(100),
        connect_timeout: Duration::from_millis(300),
        drain_timeout: Duration::from_millis(600),
        forwarding: stratus_local_cloud::Forwarding::Kernel,
        ..Config::default()
    })
    .await
    .unwrap();
    assert_eq!(our_nft_tables().len(), 1, "the cloud's own table");
    let tables = std::process::Command::new("nft")
        .args(["list", "tables"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&tables.stdout).contains(stale),
        "the gone daemon's table was deleted"
    );
    let provider = provider(&cloud);
    let ips = ["127.0.18.1", "127.0.18.2", "127.0.18.3"];
    let port = common_port(&ips).await;
    let mut servers = vec![
        peer_server(ips[0], port, "a").await,
        peer_server(ips[1], port, "b").await,
        peer_server(ips[2], port, "c").await,
    ];
    let lb = provider.load_balancer().unwrap();
    let (nodes, svc, address) = web_on_three_nodes(lb, ips, port).await;

    // A new load balancer is served by the proxy until its rule is in
    // (a few ms); then spread in turn, each connection the client's own:
    // the kernel moved it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !fetch_direct(address).await.1 {
        assert!(std::time::Instant::now() < deadline, "no kernel rule");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut seen = BTreeMap::new();
    for _ in 0..30 {
        let (name, straight) = fetch_direct(address).await;
        assert!(
            straight,
            "{name} saw the cloud's connection, not the client's"
        );
        *seen.entry(name).or_insert(0) += 1;
    }
    assert_eq!(
        seen,
        BTreeMap::from([("a".into(), 10), ("b".into(), 10), ("c".into(), 10)])
    );

    // Node c leaves: no new connection goes to it.
    lb.update_load_balancer("kubernetes", &svc, &nodes[..2])
        .await
        .unwrap();
    for _ in 0..10 {
        assert_ne!(fetch_direct(address).await.0, "c");
    }
    // Node b's server dies: a health check later, nothing goes to it.
    servers.remove(1).abort();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..20 {
        assert_eq!(fetch_direct(address).await.0, "a");
    }
    // It comes back: the health check takes it back.
    servers.push(peer_server(ips[1], port, "b").await);
    let mut back = false;
    for _ in 0..50 {
        if let Ok(Ok(mut s)) =
            tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(address)).await
        {
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer).await;
            if answer.starts_with("b ") {
                back = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back, "a healthy again backend gets connections");

    // Deleted: nothing listens on the address, no rule sends it anywhere.
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert!(TcpStream::connect(address).await.is_err());

    // A long connection carried by the kernel, its load balancer deleted:
    // it goes on for the drain time (600 ms here), then is cut.
    let echo_ip = "127.0.18.4";
    let echo = TcpListener::bind((echo_ip, 0)).await.unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, peer)) = echo.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(format!("{peer}\n").as_bytes()).await;
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let echo_backend: SocketAddr = (echo_ip.parse::<std::net::IpAddr>().unwrap(), echo_port).into();
    let echo_address = put_tcp_balancer(&cloud, "echo", 7, echo_backend).await;
    let mut long = kernel_carried(echo_address).await;
    async fn round_trip(s: &mut TcpStream) -> bool {
        let exchange = async {
            s.write_all(b"ping").await?;
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await?;
            Ok::<_, std::io::Error>(&buf == b"ping")
        };
        matches!(
            tokio::time::timeout(Duration::from_millis(500), exchange).await,
            Ok(Ok(true))
        )
    }
    assert!(round_trip(&mut long).await);
    let (status, _) = api(&cloud, "DELETE", "/v1/load-balancers/echo", "").await;
    assert_eq!(status, 204);
    let deleted = std::time::Instant::now();
    assert!(round_trip(&mut long).await, "draining: still carried");
    assert!(
        TcpStream::connect(echo_address).await.is_err(),
        "no new connection"
    );
    loop {
        if !round_trip(&mut long).await {
            break;
        }
        assert!(
            deleted.elapsed() < Duration::from_secs(5),
            "still carried 5 s after its load balancer was deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        deleted.elapsed() >= Duration::from_millis(600),
        "cut before the drain time"
    );

    // A load balancer deleted just before the stop: its cut, due after the
    // stop, does not bring the table back.
    let late_address = put_tcp_balancer(&cloud, "late", 7, echo_backend).await;
    kernel_carried(late_address).await;
    let (status, _) = api(&cloud, "DELETE", "/v1/load-balancers/late", "").await;
    assert_eq!(status, 204);

    cloud.stop().await;
    assert!(
        our_nft_tables().is_empty(),
        "the stopped cloud's table is gone"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        our_nft_tables().is_empty(),
        "a cut after the stop brought the table back"
    );
    drop(servers);
}
