//! `cargo xtask bench kubelet-api [--control-plane embedded|real]`: the
//! kubelet API's streaming cost, Stratus's node against the Go
//! virtual-kubelet.
//!
//! - Exec round trip: 64 bytes written to `cat` on stdin and read back from
//!   stdout, one at a time, directly to the kubelet API (TLS, WebSocket
//!   `v5.channel.k8s.io`) and through the API server (as kubectl goes);
//!   the floor is the same echo over a raw loopback TCP socket.
//! - Log streaming: 256 MiB of container log read in one `/containerLogs`
//!   request, directly and through the API server; the floor is the same
//!   bytes copied over a raw loopback TCP socket.
//!
//! Ratios are measured / floor (1.0 = as fast as a bare socket).
//!
//! Both nodes run as processes of their own, one after the other, on the
//! same API server: the harness API server (`embedded`, the default;
//! `target/bench/kubelet-api.json`) or a real control plane (`real`:
//! `cargo xtask cluster up` with its node address, which kube-apiserver
//! reaches the kubelet APIs on, taken down after;
//! `target/bench/kubelet-api-real.json`).
//!
//! - Stratus: the virtual-kubelet command ([`STRATUS_NODE_CHILD`]) with a
//!   provider whose exec is `cat` and whose log is 256 MiB of text
//!   ([`Firehose`]).
//! - Go: the Go virtual-kubelet (`tools/go-peers/virtual-kubelet`,
//!   nodeutil's kubelet API behind its webhook authentication and
//!   authorization, the same exec and log): `<metric>_go` and
//!   `<metric>_ratio_stratus_over_go` (below 1 = Stratus better).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ccm::percentile;
use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, AttachParams, LogParams, PostParams};
use serde_json::json;
use stratus_pod::{
    ByteStream, ContainerExec, ContainerLogOptions, ContainerLogs, ContainerRef,
    PodLifecycleHandler, Result as PodResult,
};
use stratus_testing::kubelet_api::KubeletApiSite;
use stratus_testing::{ApiServer, MockPodProvider};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use stratus_cluster::ControlPlane;

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

/// The API server both nodes register with and kubectl's requests go
/// through.
enum Server {
    /// The harness API server, in this process.
    Harness(ApiServer),
    /// A real control plane (`cargo xtask cluster up` with its node
    /// address), taken down by [`Server::stop`].
    Real(stratus_cluster::State),
}

impl Server {
    /// A fresh one of `kind`. A real one needs the node address on the
    /// loopback device (kube-apiserver does not proxy to 127.0.0.1) and no
    /// control plane of `cargo xtask cluster` up before it.
    async fn start(kind: ControlPlane) -> Result<Self, BoxError> {
        match kind {
            ControlPlane::Embedded => Ok(Self::Harness(ApiServer::start().await?)),
            ControlPlane::Real => {
                let state =
                    stratus_cluster::up_fresh(Some(stratus_cluster::DEFAULT_NODE_ADDRESS), &[])
                        .await?;
                if state.node_address.is_none() {
                    stratus_cluster::down_after_benchmark().await;
                    return Err("the node address could not be added to the loopback device (it takes root), so kube-apiserver cannot reach the kubelet APIs".into());
                }
                Ok(Self::Real(state))
            }
        }
    }

    /// Where the nodes serve their kubelet APIs.
    async fn site(&self) -> Result<KubeletApiSite, BoxError> {
        match self {
            Self::Harness(server) => Ok(KubeletApiSite::harness(server)),
            Self::Real(state) => state.kubelet_api_site().await,
        }
    }

    /// A kubeconfig for the Go node: written into `dir` for the harness,
    /// the administrator's for the real control plane.
    fn kubeconfig(&self, dir: &std::path::Path) -> Result<std::path::PathBuf, BoxError> {
        match self {
            Self::Harness(server) => {
                let path = dir.join("kubeconfig");
                server.write_kubeconfig(&path)?;
                Ok(path)
            }
            Self::Real(state) => Ok(state.kubeconfig.clone()),
        }
    }

    /// A client of the kubelet API at `address`:`port` with a client
    /// certificate the API server's CA signed for an administrator (the
    /// kubelet API asks the API server whether it may).
    async fn kubelet_client(
        &self,
        address: std::net::IpAddr,
        port: u16,
    ) -> Result<kube::Client, BoxError> {
        let url = format!("https://{}", std::net::SocketAddr::from((address, port))).parse()?;
        let mut config = match self {
            Self::Harness(server) => {
                use base64::Engine;
                let (cert, key) = server.issue_client_certificate("bench", &["system:masters"])?;
                let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
                let mut config = kube::Config::new(url);
                config.auth_info.client_certificate_data = Some(b64(cert));
                config.auth_info.client_key_data = Some(b64(key).into());
                config
            }
            Self::Real(state) => {
                let mut config = stratus_cluster::config_from(&state.kubeconfig).await?;
                config.cluster_url = url;
                config.root_cert = None;
                config
            }
        };
        // The kubelet's serving certificate is its own, as kube-apiserver
        // (without `--kubelet-certificate-authority`) accepts it.
        config.accept_invalid_certs = true;
        Ok(kube::Client::try_from(config)?)
    }

    /// Shut the server down (a real control plane: `cluster down`).
    async fn stop(self) {
        match self {
            Self::Harness(server) => server.shutdown().await,
            Self::Real(_) => stratus_cluster::down_after_benchmark().await,
        }
    }
}

/// `[--control-plane embedded|real]` from the arguments after the suite's
/// name.
fn options(args: &[String]) -> Result<ControlPlane, BoxError> {
    match args {
        [] => Ok(ControlPlane::Embedded),
        [flag, value] if flag == "--control-plane" => crate::kubelet_go::control_plane(value),
        _ => Err(format!(
            "unknown options {}; usage: cargo xtask bench kubelet-api [--control-plane embedded|real]",
            args.join(" ")
        )
        .into()),
    }
}

pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let kind = options(args)?;
    // The Go peer is built before any server starts.
    let go_binary = stratus_cluster::go_peers::virtual_kubelet()?;
    let server = Server::start(kind).await?;
    let measured = measure(&server, &go_binary).await;
    server.stop().await;
    let metrics = measured?;
    let (suite, ratios) = match kind {
        ControlPlane::Embedded => (
            "kubelet-api",
            "ratios are measured / floor (1.0 = as fast as a raw loopback socket) and Stratus / Go (below 1 = Stratus better)",
        ),
        ControlPlane::Real => (
            "kubelet-api-real",
            "through kube-apiserver of a real control plane; ratios are measured / floor (1.0 = as fast as a raw loopback socket) and Stratus / Go (below 1 = Stratus better)",
        ),
    };
    crate::measure::write_results(suite, &metrics, ratios)
}

/// The benchmark's Stratus node as its own process, as the Go peer runs:
/// `bench kubelet-api-stratus-node KUBECONFIG ADDRESS CLIENT_CA_FILE`.
pub(crate) const STRATUS_NODE_CHILD: &str = "kubelet-api-stratus-node";

/// [`STRATUS_NODE_CHILD`]: the virtual-kubelet command (as a vendor's
/// binary runs it) with the [`Firehose`] provider as node [`NODE`], its
/// kubelet API on a free port of ADDRESS trusting CLIENT_CA_FILE, on the
/// API server of KUBECONFIG, until SIGTERM.
pub(crate) async fn stratus_node(args: &[String]) -> Result<(), BoxError> {
    let [kubeconfig, address, client_ca] = args else {
        return Err(format!(
            "usage: stratus-bench {STRATUS_NODE_CHILD} KUBECONFIG ADDRESS CLIENT_CA_FILE"
        )
        .into());
    };
    let command = stratus_kubelet::app::Command::new().provider("firehose", |init, _| {
        let provider = Firehose(MockPodProvider::new().with_node_name(&init.node_name));
        async move { Ok(stratus_kubelet::app::Providers::pods(Arc::new(provider))) }
    });
    let args = vec![
        "virtual-kubelet".to_owned(),
        "--provider=firehose".into(),
        format!("--nodename={NODE}"),
        format!("--kubeconfig={kubeconfig}"),
        format!("--node-ip={address}"),
        format!("--listen-address={address}"),
        "--kubelet-port=0".into(),
        format!("--client-ca-file={client_ca}"),
        "--disable-taint".into(),
        "--metrics-addr=".into(),
    ];
    stratus_cluster::run_until_signal(command, args).await
}

/// Both nodes on `server`, each its own process, one after the other:
/// every figure.
async fn measure(
    server: &Server,
    go_binary: &std::path::Path,
) -> Result<Vec<(&'static str, f64)>, BoxError> {
    let site = server.site().await?;
    let dir = std::env::temp_dir().join(format!(
        "stratus-bench-kubelet-api-{}-stratus",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    let client_ca = dir.join("kubelet-client-ca.crt");
    std::fs::write(&client_ca, &site.kubelet_client_ca_pem)?;
    let kubeconfig = server.kubeconfig(&dir)?;
    let child = std::process::Command::new(std::env::current_exe()?)
        .arg(STRATUS_NODE_CHILD)
        .arg(&kubeconfig)
        .arg(site.address.to_string())
        .arg(&client_ca)
        .spawn()?;
    let measured = stratus_side(server, &site, go_binary).await;
    let _ = tokio::task::spawn_blocking(move || crate::measure::stop_child(child)).await;
    let _ = std::fs::remove_dir_all(&dir);
    measured
}

/// Stratus's node is starting on `site`: its figures once its pod runs,
/// the floors, then the Go node's.
async fn stratus_side(
    server: &Server,
    site: &KubeletApiSite,
    go_binary: &std::path::Path,
) -> Result<Vec<(&'static str, f64)>, BoxError> {
    let client = site.client.clone();
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
        if started.elapsed() > Duration::from_secs(60) {
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
    let direct = server
        .kubelet_client(site.address, u16::try_from(kubelet_port)?)
        .await?;

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
    let mut metrics: Vec<(&'static str, f64)> = vec![
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
    let go = go_side(server, site, go_binary, &pods).await?;
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
    Ok(metrics)
}

/// The Go peer's figures: exec round trips (µs, sorted) and the seconds
/// 256 MiB of log took, both through the API server.
struct GoFigures {
    echo: Vec<f64>,
    copy_s: f64,
    direct_echo: Vec<f64>,
    direct_copy_s: f64,
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

/// Run the Go virtual-kubelet `binary` with its kubelet API (a serving key
/// pair of a CA made here, the API server's kubelet client CA) on a free
/// port of the site's address, bind a pod to it and measure exec and logs
/// as kubectl does and straight to its kubelet API.
async fn go_side(
    server: &Server,
    site: &KubeletApiSite,
    binary: &std::path::Path,
    pods: &Api<Pod>,
) -> Result<GoFigures, BoxError> {
    use stratus_cluster::pki::{Authority, Usage};
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
            ips: &[site.address],
        },
    )?;
    let client_ca = dir.join("kubelet-client-ca.crt");
    std::fs::write(&client_ca, &site.kubelet_client_ca_pem)?;
    let kubeconfig = server.kubeconfig(&dir)?;
    let listen = std::net::TcpListener::bind((site.address, 0))?.local_addr()?;
    let mut child = tokio::process::Command::new(binary)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--nodename={GO_NODE}"))
        .arg("--qps=-1")
        .arg(format!("--listen={listen}"))
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
        let direct = server.kubelet_client(site.address, listen.port()).await?;
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
