//! `cargo xtask bench local-cloud [--mb N] [--connections N] [--services N]`:
//! the local cloud's load balancers against a direct connection to the same
//! backend, in the same run.
//!
//! - **One long stream**: `--mb` MB (default 512) written to a backend that
//!   discards them, through a load balancer and directly, five times each
//!   alternately, each way first in turn (the median counts):
//!   `throughput_ratio_measured_over_floor` (goal ≥ 0.8).
//! - **Many short connections**: `--connections` (default 2,000) times
//!   connect, one byte there and back, close, through the load balancer and
//!   directly, one after the other: the added latency at p50 and p99
//!   (`added_latency_p99_ms`, goal ≤ 1 ms) and
//!   `short_connections_ratio_measured_over_floor` (connections a second).
//! - **Programming**: `--services` (default 1,000) LoadBalancer Services
//!   ensured one after the other through the `local` provider (each a cloud
//!   call that binds a new address), then deleted.
//! - **Backend change**: the time from a `PUT` of new backends to the first
//!   connection the new backend answers; and, with `backends: endpoints`, from
//!   an EndpointSlice written to the harness API server to that connection
//!   (the provider's watch, then its call to the cloud).
//!
//! Everything is measured twice, each time on a cloud of its own: with kernel
//! forwarding (`Forwarding::Kernel`, nftables DNAT rules; the demo's; the
//! unprefixed metrics) and with the proxy (`Forwarding::Proxy`, this process
//! relays; the `proxy_` metrics). Kernel forwarding needs `CAP_NET_ADMIN`
//! and `nft`; without them its figures are skipped, and said so
//! (`kernel_forwarding_measured` 0), and the proxy's are measured.
//!
//! The client, the load balancer and the backend share this process and the
//! machine's cores, as they share a node; both paths pay that alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use stratus_cloud::{CloudProvider, InitContext, LoadBalancer, ShutdownSignal};
use stratus_local_cloud::api::{self, Backend, Listener, LoadBalancerSpec, Protocol};
use stratus_local_cloud::{Config, Forwarding, LocalCloud, StartError};
use stratus_provider_local::{Backends, Client, LocalProvider, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use stratus_cluster::BoxError;

/// The ranges of this benchmark's load balancers, with kernel forwarding
/// and with the proxy (the tests use 127.77.0.0/16, the demo
/// 127.78.0.0/16).
const KERNEL_RANGE: &str = "127.79.128.0/17";
const PROXY_RANGE: &str = "127.79.0.0/17";

/// Run the benchmark with its `--flag N` options.
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let mut mb = 512u64;
    let mut connections = 2_000u64;
    let mut services = 1_000u64;
    for (flag, value) in crate::measure::number_flags(args)? {
        match flag {
            "--mb" => mb = value.max(1),
            "--connections" => connections = value.max(10),
            "--services" => services = value.max(1),
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    // The demo's forwarding (the kernel's) first, then the proxy's, each on
    // a cloud of its own against the same direct floor.
    let mut metrics: Vec<(String, f64)> = vec![
        ("stream_megabytes".into(), mb as f64),
        ("short_connections".into(), connections as f64),
        ("load_balancers_programmed".into(), services as f64),
    ];
    for (forwarding, range, prefix) in [
        (Forwarding::Kernel, KERNEL_RANGE, ""),
        (Forwarding::Proxy, PROXY_RANGE, "proxy_"),
    ] {
        println!("forwarding: {forwarding:?}");
        let cloud = match LocalCloud::start(Config {
            address_range: range.parse()?,
            forwarding,
            ..Config::default()
        })
        .await
        {
            // Without `nft` or CAP_NET_ADMIN the kernel's figures are
            // skipped, and said so; the proxy's are still measured.
            Err(StartError::Forwarding(e)) if forwarding == Forwarding::Kernel => {
                println!("kernel forwarding skipped: {e}");
                metrics.push(("kernel_forwarding_measured".into(), 0.0));
                continue;
            }
            started => started?,
        };
        if forwarding == Forwarding::Kernel {
            metrics.push(("kernel_forwarding_measured".into(), 1.0));
        }
        for (name, value) in measure(cloud, mb, connections, services).await? {
            metrics.push((format!("{prefix}{name}"), value));
        }
    }
    let named: Vec<(&str, f64)> = metrics.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    crate::measure::write_results(
        "local-cloud",
        &named,
        "floor = a direct connection to the same backend in the same run; \
         the throughput and connection ratios are load balancer over direct (1 = as fast); \
         unprefixed: kernel forwarding (nftables DNAT, the demo's); proxy_: this process relays",
    )
}

/// One started cloud's figures.
async fn measure(
    cloud: LocalCloud,
    mb: u64,
    connections: u64,
    services: u64,
) -> Result<Vec<(String, f64)>, BoxError> {
    let client = Client::new(&format!("http://{}", cloud.addr()), RetryPolicy::default())?;

    let sink = serve(Behaviour::Sink).await?;
    let echo = serve(Behaviour::Echo).await?;
    let lb = put(&client, "bench-stream", &[(sink, 9000), (echo, 9001)]).await?;
    let stream_lb = (lb.as_str(), 9000);
    let echo_lb = (lb.as_str(), 9001);

    println!("one long stream of {mb} MB, five times each way");
    let bytes = mb * 1024 * 1024;
    let mut direct = Vec::new();
    let mut through = Vec::new();
    // Alternately, each way first in turn: the machine's drift falls on
    // both alike.
    for round in 0..5 {
        if round % 2 == 0 {
            direct.push(stream(("127.0.0.1", sink), bytes).await?);
            through.push(stream(stream_lb, bytes).await?);
        } else {
            through.push(stream(stream_lb, bytes).await?);
            direct.push(stream(("127.0.0.1", sink), bytes).await?);
        }
    }
    let direct_mbps = median(&mut direct);
    let through_mbps = median(&mut through);

    println!("{connections} short connections each way");
    let mut direct_ms = Vec::new();
    let mut through_ms = Vec::new();
    let mut direct_total = Duration::ZERO;
    let mut through_total = Duration::ZERO;
    for _ in 0..connections {
        let d = round_trip(("127.0.0.1", echo)).await?;
        let t = round_trip(echo_lb).await?;
        direct_total += d;
        through_total += t;
        direct_ms.push(d.as_secs_f64() * 1000.0);
        through_ms.push(t.as_secs_f64() * 1000.0);
    }
    direct_ms.sort_by(f64::total_cmp);
    through_ms.sort_by(f64::total_cmp);
    let pct = |v: &[f64], p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];

    println!("{services} load balancers programmed through the provider");
    let provider = LocalProvider::new(client.clone());
    let node = node_at("127.0.0.1");
    let started = Instant::now();
    for i in 0..services {
        provider
            .ensure_load_balancer("kubernetes", &service(i, echo), std::slice::from_ref(&node))
            .await?;
    }
    let programmed = started.elapsed();
    let started = Instant::now();
    for i in 0..services {
        provider
            .ensure_load_balancer_deleted("kubernetes", &service(i, echo))
            .await?;
    }
    let deleted = started.elapsed();

    println!("backend changes");
    let other = serve(Behaviour::Name("other")).await?;
    let first = serve(Behaviour::Name("first")).await?;
    let change_lb = put(&client, "bench-change", &[(first, 9002)]).await?;
    let mut put_to_first_answer = Vec::new();
    for round in 0..20 {
        let (to, expected) = if round % 2 == 0 {
            (other, "other")
        } else {
            (first, "first")
        };
        let started = Instant::now();
        put(&client, "bench-change", &[(to, 9002)]).await?;
        wait_for_answer((change_lb.as_str(), 9002), expected).await?;
        put_to_first_answer.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let put_ms = median(&mut put_to_first_answer);
    let slice_ms = endpoint_change(&client, first, other).await?;
    cloud.stop().await;

    Ok(vec![
        ("throughput_direct_mb_per_s".into(), direct_mbps),
        ("throughput_load_balancer_mb_per_s".into(), through_mbps),
        (
            "throughput_ratio_measured_over_floor".into(),
            through_mbps / direct_mbps,
        ),
        ("latency_p50_direct_ms".into(), pct(&direct_ms, 0.5)),
        ("latency_p50_load_balancer_ms".into(), pct(&through_ms, 0.5)),
        ("latency_p99_direct_ms".into(), pct(&direct_ms, 0.99)),
        (
            "latency_p99_load_balancer_ms".into(),
            pct(&through_ms, 0.99),
        ),
        (
            "added_latency_p50_ms".into(),
            pct(&through_ms, 0.5) - pct(&direct_ms, 0.5),
        ),
        (
            "added_latency_p99_ms".into(),
            pct(&through_ms, 0.99) - pct(&direct_ms, 0.99),
        ),
        (
            "short_connections_ratio_measured_over_floor".into(),
            direct_total.as_secs_f64() / through_total.as_secs_f64(),
        ),
        ("programming_seconds".into(), programmed.as_secs_f64()),
        (
            "programming_per_load_balancer_ms".into(),
            programmed.as_secs_f64() * 1000.0 / services as f64,
        ),
        ("deleting_seconds".into(), deleted.as_secs_f64()),
        ("backend_put_to_new_backend_ms".into(), put_ms),
        ("endpoint_slice_to_new_backend_ms".into(), slice_ms),
    ])
}

/// What a backend does with a connection.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Read until EOF, answer the byte count (8 bytes).
    Sink,
    /// Answer each byte with itself.
    Echo,
    /// Write the name and close.
    Name(&'static str),
}

/// A backend on 127.0.0.1: its port.
async fn serve(behaviour: Behaviour) -> Result<u16, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                match behaviour {
                    Behaviour::Sink => {
                        let mut buf = vec![0u8; 256 * 1024];
                        let mut total = 0u64;
                        while let Ok(n) = s.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            total += n as u64;
                        }
                        let _ = s.write_all(&total.to_be_bytes()).await;
                    }
                    Behaviour::Echo => {
                        let mut buf = [0u8; 1];
                        while let Ok(1) = s.read(&mut buf).await {
                            if s.write_all(&buf).await.is_err() {
                                break;
                            }
                        }
                    }
                    Behaviour::Name(name) => {
                        let _ = s.write_all(name.as_bytes()).await;
                    }
                }
            });
        }
    });
    Ok(port)
}

/// Create or replace load balancer `name` with one TCP listener per
/// `(backend port on 127.0.0.1, listener port)`: its address.
async fn put(client: &Client, name: &str, listeners: &[(u16, u16)]) -> Result<String, BoxError> {
    let spec = LoadBalancerSpec {
        listeners: listeners
            .iter()
            .map(|(backend, port)| Listener {
                protocol: Protocol::Tcp,
                port: *port,
                backends: vec![Backend {
                    address: "127.0.0.1".into(),
                    port: *backend,
                }],
            })
            .collect(),
        tags: Default::default(),
        health_check: None,
    };
    let lb: api::LoadBalancer = client
        .call(
            Method::PUT,
            &format!("/v1/load-balancers/{name}"),
            Some(&spec),
        )
        .await?;
    Ok(lb.address)
}

/// Write `bytes` to a sink and read its count back: MB/s.
async fn stream(addr: (&str, u16), bytes: u64) -> Result<f64, BoxError> {
    let chunk = vec![7u8; 64 * 1024];
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).await?;
    let _ = s.set_nodelay(true);
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        s.write_all(&chunk[..n]).await?;
        left -= n as u64;
    }
    s.shutdown().await?;
    let mut count = [0u8; 8];
    s.read_exact(&mut count).await?;
    let took = started.elapsed().as_secs_f64();
    if u64::from_be_bytes(count) != bytes {
        return Err(format!(
            "the sink got {} bytes of {bytes}",
            u64::from_be_bytes(count)
        )
        .into());
    }
    Ok(bytes as f64 / (1024.0 * 1024.0) / took)
}

/// Connect, one byte there and back, close: how long it took.
async fn round_trip(addr: (&str, u16)) -> Result<Duration, BoxError> {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).await?;
    let _ = s.set_nodelay(true);
    s.write_all(b"x").await?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await?;
    drop(s);
    Ok(started.elapsed())
}

/// Connect until `expected` answers (at most 10 s).
async fn wait_for_answer(addr: (&str, u16), expected: &str) -> Result<(), BoxError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut s) = TcpStream::connect(addr).await {
            let mut answer = String::new();
            if s.read_to_string(&mut answer).await.is_ok() && answer == expected {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("{expected} never answered through {addr:?}").into());
        }
        tokio::task::yield_now().await;
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn node_at(ip: &str) -> Node {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bench-node"},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
    }))
    .unwrap_or_default()
}

fn service(i: u64, node_port: u16) -> Service {
    serde_json::from_value(serde_json::json!({
        // The load balancer's name is the UID's first 31 hex digits (Go's
        // `GetLoadBalancerName`): the number leads, so each is its own.
        "metadata": {"name": format!("svc-{i}"), "namespace": "bench", "uid": format!("{i:08x}-0000-0000-0000-000000000000")},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "tcp", "port": 80, "nodePort": node_port}]}
    }))
    .unwrap_or_default()
}

/// With `backends: endpoints` on the harness API server: the median time
/// from an EndpointSlice write (its one endpoint's port swapped between the
/// two backends) to the first connection the new backend answers.
async fn endpoint_change(client: &Client, first: u16, other: u16) -> Result<f64, BoxError> {
    let cluster = stratus_testing::TestCluster::start().await?;
    let kube = cluster.client();
    let provider = LocalProvider::new(client.clone()).with_backends(Backends::Endpoints);
    let (trigger, shutdown) = ShutdownSignal::new();
    let ctx = InitContext::new(
        "kubernetes",
        shutdown,
        Arc::new(stratus_ccm::app::TokioSpawner),
    )
    .with_extension(kube.clone());
    provider.initialize(&ctx).await?;
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "00000000-0000-0000-0000-00000000beef"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 9003}]}
    }))?;
    let slice = |port: u16| -> Result<EndpointSlice, serde_json::Error> {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-bench", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        }))
    };
    let slices: Api<EndpointSlice> = Api::namespaced(kube, "default");
    slices
        .create(&PostParams::default(), &slice(first)?)
        .await?;
    // The cache has the slice once the ensure sees it.
    let mut address = String::new();
    for _ in 0..100 {
        let status = provider
            .ensure_load_balancer("kubernetes", &svc, &[])
            .await?;
        address = status
            .ingress
            .and_then(|i| i.first()?.ip.clone())
            .unwrap_or_default();
        if TcpStream::connect((address.as_str(), 9003)).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for_answer((address.as_str(), 9003), "first").await?;
    let mut times = Vec::new();
    for round in 0..20 {
        let (port, expected) = if round % 2 == 0 {
            (other, "other")
        } else {
            (first, "first")
        };
        let mut current = slices.get("web-bench").await?;
        current.ports = slice(port)?.ports;
        let started = Instant::now();
        slices
            .replace("web-bench", &PostParams::default(), &current)
            .await?;
        wait_for_answer((address.as_str(), 9003), expected).await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    provider
        .ensure_load_balancer_deleted("kubernetes", &svc)
        .await?;
    trigger.trigger();
    Ok(median(&mut times))
}
