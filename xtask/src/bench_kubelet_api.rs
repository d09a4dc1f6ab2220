//! `cargo xtask bench kubelet-api`: the kubelet API's streaming cost.
//!
//! - Exec round trip: 64 bytes written to `cat` on stdin and read back from
//!   stdout, one at a time, directly to the kubelet API (TLS, WebSocket
//!   `v5.channel.k8s.io`) and through the harness API server (as kubectl
//!   goes); the floor is the same echo over a raw loopback TCP socket.
//! - Log streaming: 256 MiB of container log read in one `/containerLogs`
//!   request, directly and through the API server; the floor is the same
//!   bytes copied over a raw loopback TCP socket.
//!
//! Ratios are measured / floor (1.0 = as fast as a bare socket).
//!
//! The Go peer: the Go virtual-kubelet (`tools/go-peers/virtual-kubelet`,
//! nodeutil's kubelet API behind its webhook authentication and
//! authorization, a provider whose exec is `cat` and whose log is the same
//! 256 MiB of text) as its own process, reached through the same API
//! server: `<metric>_go` and `<metric>_ratio_stratus_over_go` (below 1 =
//! Stratus better).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bench_ccm::percentile;
use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, AttachParams, LogParams, PostParams};
use serde_json::json;
use stratus_kubelet::node::NodeConfig;
use stratus_pod::{
    ByteStream, ContainerExec, ContainerLogOptions, ContainerLogs, ContainerRef,
    PodLifecycleHandler, Result as PodResult,
};
use stratus_testing::{ApiServer, MockPodProvider};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const NODE: &str = "vk-bench-api";
const ROUND_TRIPS: usize = 2000;
const MESSAGE: usize = 64;
const LOG_BYTES: usize = 256 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// MockPodProvider with a log that is `LOG_BYTES` of text, produced as
/// fast as it is read.
struct Firehose(MockPodProvider);

#[async_trait]
impl PodLifecycleHandler for Firehose {
    async fn create_pod(&self, pod: &Pod) -> PodResult<()> {
        self.0.create_pod(pod).await
    }
    async fn update_pod(&self, pod: &Pod) -> PodResult<()> {
        self.0.update_pod(pod).await
    }
    async fn delete_pod(&self, pod: &Pod) -> PodResult<()> {
        self.0.delete_pod(pod).await
    }
    async fn get_pod(&self, ns: &str, name: &str) -> PodResult<Option<Pod>> {
        self.0.get_pod(ns, name).await
    }
    async fn get_pod_status(&self, ns: &str, name: &str) -> PodResult<Option<PodStatus>> {
        self.0.get_pod_status(ns, name).await
    }
    async fn get_pods(&self) -> PodResult<Vec<Pod>> {
        self.0.get_pods().await
    }
    fn notifier(&self) -> Option<&dyn stratus_pod::PodNotifier> {
        self.0.notifier()
    }
    fn exec(&self) -> Option<&dyn ContainerExec> {
        Some(&self.0)
    }
    fn container_logs(&self) -> Option<&dyn ContainerLogs> {
        Some(self)
    }
}

fn log_chunk() -> Vec<u8> {
    let line = b"2026-11-22T10:00:00.000000000Z the quick brown fox jumps over the lazy dog\n";
    line.iter().copied().cycle().take(CHUNK).collect()
}

#[async_trait]
impl ContainerLogs for Firehose {
    async fn container_logs(
        &self,
        _container: &ContainerRef,
        _options: &ContainerLogOptions,
    ) -> PodResult<ByteStream> {
        let chunk = log_chunk();
        Ok(Box::pin(futures_util::stream::iter(
            (0..LOG_BYTES / CHUNK).map(move |_| Ok(chunk.clone())),
        )))
    }
}

/// Round-trip times of `ROUND_TRIPS` runs of `$body` (after 50 warm-up
/// runs), sorted, in microseconds.
macro_rules! round_trips {
    ($body:block) => {{
        for _ in 0..50 {
            $body
        }
        let mut times = Vec::with_capacity(ROUND_TRIPS);
        for _ in 0..ROUND_TRIPS {
            let started = Instant::now();
            $body
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        times.sort_by(f64::total_cmp);
        times
    }};
}

async fn tcp_floor() -> Result<(Vec<f64>, f64), BoxError> {
    // Echo.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Ok((mut s, _)) = listener.accept().await {
            let _ = s.set_nodelay(true);
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    });
    let mut client = tokio::net::TcpStream::connect(addr).await?;
    client.set_nodelay(true)?;
    let message = [7u8; MESSAGE];
    let mut back = [0u8; MESSAGE];
    let echo = round_trips!({
        client.write_all(&message).await?;
        client.read_exact(&mut back).await?;
    });
    // Copy.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Ok((mut s, _)) = listener.accept().await {
            let chunk = log_chunk();
            for _ in 0..LOG_BYTES / CHUNK {
                if s.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        }
    });
    let started = Instant::now();
    let mut reader = tokio::net::TcpStream::connect(addr).await?;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0;
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n;
    }
    if total != LOG_BYTES {
        return Err(format!("the floor copied {total} bytes").into());
    }
    Ok((echo, started.elapsed().as_secs_f64()))
}

async fn read_all(reader: impl futures_util::AsyncBufRead) -> Result<usize, BoxError> {
    let mut reader = Box::pin(reader);
    let mut total = 0;
    loop {
        let buf = futures_util::AsyncBufReadExt::fill_buf(&mut reader).await?;
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        total += n;
        futures_util::AsyncBufReadExt::consume_unpin(&mut reader, n);
    }
    Ok(total)
}

pub(crate) async fn run() -> Result<(), BoxError> {
    let server = ApiServer::start().await?;
    let provider = Arc::new(Firehose(MockPodProvider::new().with_node_name(NODE)));
    let node = stratus_testing::kubelet_api::virtual_node_with_api(
        &server,
        NodeConfig::new(NODE, "mock"),
        provider,
    )
    .await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut ready = node.ready();
    let node_task = tokio::spawn(node.run(stopped));
    tokio::time::timeout(Duration::from_secs(20), ready.wait_for(|r| *r)).await??;
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "bench"}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let started = Instant::now();
    loop {
        let phase = pods.get("bench").await?.status.and_then(|s| s.phase);
        if phase.as_deref() == Some("Running") {
            break;
        }
        if started.elapsed() > Duration::from_secs(20) {
            return Err("the bench pod did not start".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let kubelet_port = nodes
        .get(NODE)
        .await?
        .status
        .and_then(|s| s.daemon_endpoints)
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port)
        .ok_or("the node has no kubelet endpoint")?;
    let direct = kubelet_client(&server, u16::try_from(kubelet_port)?)?;

    let (floor_echo, floor_copy) = tcp_floor().await?;

    // Exec, directly.
    let direct_echo = direct_exec(&direct, "bench").await?;

    // Exec through the API server, as kubectl.
    let proxied_echo = proxied_exec(&pods, "bench").await?;

    // Logs, directly and through the API server.
    let (direct_bytes, direct_copy) = direct_logs(&direct, "bench").await?;
    let (proxied_bytes, proxied_copy) = proxied_logs(&pods, "bench").await?;
    if direct_bytes != LOG_BYTES || proxied_bytes != LOG_BYTES {
        return Err(
            format!("logs: read {direct_bytes} and {proxied_bytes} bytes of {LOG_BYTES}").into(),
        );
    }

    let mib = LOG_BYTES as f64 / (1024.0 * 1024.0);
    let mut metrics: Vec<(&str, f64)> = vec![
        ("exec_rtt_floor_p50_us", percentile(&floor_echo, 0.5)),
        ("exec_rtt_floor_p99_us", percentile(&floor_echo, 0.99)),
        ("exec_rtt_direct_p50_us", percentile(&direct_echo, 0.5)),
        ("exec_rtt_direct_p99_us", percentile(&direct_echo, 0.99)),
        ("exec_rtt_apiserver_p50_us", percentile(&proxied_echo, 0.5)),
        ("exec_rtt_apiserver_p99_us", percentile(&proxied_echo, 0.99)),
        (
            "exec_rtt_direct_p50_ratio_measured_over_floor",
            percentile(&direct_echo, 0.5) / percentile(&floor_echo, 0.5),
        ),
        (
            "exec_rtt_apiserver_p50_ratio_measured_over_floor",
            percentile(&proxied_echo, 0.5) / percentile(&floor_echo, 0.5),
        ),
        ("logs_floor_mib_per_second", mib / floor_copy),
        ("logs_direct_mib_per_second", mib / direct_copy),
        ("logs_apiserver_mib_per_second", mib / proxied_copy),
        (
            "logs_direct_time_ratio_measured_over_floor",
            direct_copy / floor_copy,
        ),
        (
            "logs_apiserver_time_ratio_measured_over_floor",
            proxied_copy / floor_copy,
        ),
    ];
    // The Go peer, through the same API server.
    let go = go_side(&server, &pods).await?;
    let go_echo_p50 = percentile(&go.echo, 0.5);
    metrics.extend([
        (
            "exec_rtt_apiserver_p50_us_stratus",
            percentile(&proxied_echo, 0.5),
        ),
        ("exec_rtt_apiserver_p50_us_go", go_echo_p50),
        (
            "exec_rtt_apiserver_p50_ratio_stratus_over_go",
            percentile(&proxied_echo, 0.5) / go_echo_p50,
        ),
        (
            "exec_rtt_apiserver_p99_us_stratus",
            percentile(&proxied_echo, 0.99),
        ),
        ("exec_rtt_apiserver_p99_us_go", percentile(&go.echo, 0.99)),
        (
            "exec_rtt_apiserver_p99_ratio_stratus_over_go",
            percentile(&proxied_echo, 0.99) / percentile(&go.echo, 0.99),
        ),
        (
            "exec_rtt_direct_p50_us_stratus",
            percentile(&direct_echo, 0.5),
        ),
        (
            "exec_rtt_direct_p50_us_go",
            percentile(&go.direct_echo, 0.5),
        ),
        (
            "exec_rtt_direct_p50_ratio_stratus_over_go",
            percentile(&direct_echo, 0.5) / percentile(&go.direct_echo, 0.5),
        ),
        ("logs_direct_mib_per_second_stratus", mib / direct_copy),
        ("logs_direct_mib_per_second_go", mib / go.direct_copy_s),
        (
            "logs_direct_time_ratio_stratus_over_go",
            direct_copy / go.direct_copy_s,
        ),
        (
            "exec_round_trips_per_second_stratus",
            1e6 / percentile(&proxied_echo, 0.5),
        ),
        ("exec_round_trips_per_second_go", 1e6 / go_echo_p50),
        ("logs_apiserver_mib_per_second_stratus", mib / proxied_copy),
        ("logs_apiserver_mib_per_second_go", mib / go.copy_s),
        (
            "logs_apiserver_time_ratio_stratus_over_go",
            proxied_copy / go.copy_s,
        ),
    ]);
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), node_task).await;

    crate::bench::write_results(
        "kubelet-api",
        &metrics,
        "ratios are measured / floor (1.0 = as fast as a raw loopback socket) and Stratus / Go (below 1 = Stratus better)",
    )?;
    server.shutdown().await;
    Ok(())
}

/// The Go peer's figures: exec round trips (µs, sorted) and the seconds
/// 256 MiB of log took, both through the API server.
struct GoFigures {
    echo: Vec<f64>,
    copy_s: f64,
    direct_echo: Vec<f64>,
    direct_copy_s: f64,
}

/// A client of a kubelet API at 127.0.0.1:`port` with a client
/// certificate of `server`'s (user `bench`, group `system:masters`).
fn kubelet_client(server: &ApiServer, port: u16) -> Result<kube::Client, BoxError> {
    use base64::Engine;
    let (cert, key) = server.issue_client_certificate("bench", &["system:masters"])?;
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse()?);
    config.accept_invalid_certs = true;
    config.auth_info.client_certificate_data = Some(b64(cert));
    config.auth_info.client_key_data = Some(b64(key).into());
    Ok(kube::Client::try_from(config)?)
}

/// Exec round trips of `cat` in `pod`, straight to a kubelet API with the
/// parameters kube-apiserver sends kubelets (`input`, `output`): the
/// channel protocol by hand over kube's WebSocket.
async fn direct_exec(direct: &kube::Client, pod: &str) -> Result<Vec<f64>, BoxError> {
    let request = http::Request::get(format!(
        "/exec/default/{pod}/app?command=cat&input=1&output=1"
    ))
    .body(Vec::new())?;
    let mut socket = direct.connect(request).await?.into_stream();
    let message: Vec<u8> = std::iter::once(0u8).chain([7u8; MESSAGE]).collect();
    let echo = round_trips!({
        socket.send(Message::Binary(message.clone().into())).await?;
        let mut got = 0;
        while got < MESSAGE {
            match socket.next().await {
                Some(Ok(Message::Binary(b))) if b.first() == Some(&1) => got += b.len() - 1,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => return Err("the exec stream ended".into()),
            }
        }
    });
    let _ = socket.close(None).await;
    Ok(echo)
}

/// Exec round trips of `cat` in `pod` through the API server, as kubectl
/// makes them.
async fn proxied_exec(pods: &Api<Pod>, pod: &str) -> Result<Vec<f64>, BoxError> {
    let mut attached = pods
        .exec(
            pod,
            ["cat"],
            &AttachParams::default().stdin(true).stderr(false),
        )
        .await?;
    let mut stdin = attached.stdin().ok_or("no stdin")?;
    let mut stdout = attached.stdout().ok_or("no stdout")?;
    let payload = [7u8; MESSAGE];
    let mut back = [0u8; MESSAGE];
    let echo = round_trips!({
        stdin.write_all(&payload).await?;
        stdout.read_exact(&mut back).await?;
    });
    let _ = stdin.shutdown().await;
    Ok(echo)
}

/// `pod`'s log read in one request through the API server: the bytes and
/// the seconds.
async fn proxied_logs(pods: &Api<Pod>, pod: &str) -> Result<(usize, f64), BoxError> {
    let started = Instant::now();
    let bytes = read_all(pods.log_stream(pod, &LogParams::default()).await?).await?;
    Ok((bytes, started.elapsed().as_secs_f64()))
}

/// `pod`'s log read in one request straight to a kubelet API: the bytes
/// and the seconds.
async fn direct_logs(direct: &kube::Client, pod: &str) -> Result<(usize, f64), BoxError> {
    let started = Instant::now();
    let request =
        http::Request::get(format!("/containerLogs/default/{pod}/app")).body(Vec::new())?;
    let bytes = read_all(direct.request_stream(request).await?).await?;
    Ok((bytes, started.elapsed().as_secs_f64()))
}

/// The Go peer's node, its pod and its process.
const GO_NODE: &str = "vk-go-api";

/// Run the Go virtual-kubelet with its kubelet API (a serving key pair of
/// a CA made here, the API server's kubelet client CA) on a free port of
/// 127.0.0.1, bind a pod to it and measure exec and logs as kubectl does.
async fn go_side(server: &ApiServer, pods: &Api<Pod>) -> Result<GoFigures, BoxError> {
    use crate::cluster_pki::{Authority, Usage};
    let binary = crate::go_peers::virtual_kubelet()?;
    let dir =
        std::env::temp_dir().join(format!("stratus-bench-kubelet-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ca = Authority::create(&dir, "serving-ca", "bench-go-kubelet-ca")?;
    let serving = ca.issue(
        &dir,
        "kubelet",
        GO_NODE,
        Usage::Serving {
            dns: &["localhost"],
            ips: &[std::net::IpAddr::from([127, 0, 0, 1])],
        },
    )?;
    let client_ca = dir.join("kubelet-client-ca.crt");
    std::fs::write(&client_ca, server.kubelet_client_ca_pem())?;
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = tokio::process::Command::new(&binary)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--nodename={GO_NODE}"))
        .arg("--qps=-1")
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--tls-cert={}", serving.cert.display()))
        .arg(format!("--tls-key={}", serving.key.display()))
        .arg(format!("--client-ca={}", client_ca.display()))
        .arg(format!("--log-bytes={LOG_BYTES}"))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let measured = async {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "bench-go", "namespace": "default"},
            "spec": {"nodeName": GO_NODE, "containers": [{"name": "app", "image": "bench"}]},
        }))?;
        let started = Instant::now();
        // The pod is created once the node exists (its informer lists
        // pods bound to it).
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(pods.clone().into_client());
        while nodes.get_opt(GO_NODE).await?.is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err::<GoFigures, BoxError>("the Go node did not register".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        pods.create(&PostParams::default(), &pod).await?;
        loop {
            let phase = pods.get("bench-go").await?.status.and_then(|s| s.phase);
            if phase.as_deref() == Some("Running") {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err("the Go node's pod did not start".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let echo = proxied_exec(pods, "bench-go").await?;
        let (bytes, copy_s) = proxied_logs(pods, "bench-go").await?;
        if bytes != LOG_BYTES {
            return Err(format!("the Go node's log: read {bytes} bytes of {LOG_BYTES}").into());
        }
        let direct = kubelet_client(server, port)?;
        let direct_echo = direct_exec(&direct, "bench-go").await?;
        let (bytes, direct_copy_s) = direct_logs(&direct, "bench-go").await?;
        if bytes != LOG_BYTES {
            return Err(
                format!("the Go node's log, directly: read {bytes} bytes of {LOG_BYTES}").into(),
            );
        }
        Ok(GoFigures {
            echo,
            copy_s,
            direct_echo,
            direct_copy_s,
        })
    }
    .await;
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    measured
}
