//! The template of a vendor's virtual kubelet: build the provider, describe
//! the node, serve its kubelet API (logs, exec, attach, port-forward, stats)
//! with Kubernetes authentication, run a `VirtualNode` until SIGTERM.
//!
//! This sample runs `MockPodProvider`, the harness's in-memory provider
//! (pods start Running with fake IPs); a vendor builds its own
//! `PodLifecycleHandler` instead:
//!
//! ```text
//! sample-virtual-kubelet --kubeconfig target/stratus-demo.kubeconfig --nodename vk-mock \
//!     --client-ca-file ca.crt --tls-cert-file tls.crt --tls-private-key-file tls.key
//! ```
//!
//! The kubelet API listens on `--listen-address:--kubelet-port` (10250);
//! its serving certificate comes from files (reloaded when they change),
//! from a `kubernetes.io/kubelet-serving` CSR
//! (`--rotate-server-certificates`), or is self-signed. Clients are
//! authenticated by certificate (`--client-ca-file`) or bearer token
//! (TokenReview) and authorized by SubjectAccessReview on
//! `nodes/<subresource>`, unless `--authorization-mode=AlwaysAllow`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use stratus::kubelet::VirtualNode;
use stratus::kubelet::api::serving_certificate::{CsrConfig, ServingCertificateRotation};
use stratus::kubelet::api::{ApiAuth, KubeletApi, KubeletServer};
use stratus::kubelet::node::NodeConfig;
use stratus::kubelet::pods::PodControllerConfig;
use stratus::runtime::auth::{DelegatedAuth, DelegatedAuthConfig};
use stratus::runtime::tls::reloading_pem_files;
use stratus::testing::MockPodProvider;

/// A virtual node backed by the mock provider.
#[derive(Debug, Parser)]
#[command(name = "sample-virtual-kubelet", version)]
struct Args {
    /// The kubeconfig; in-cluster configuration if empty.
    #[arg(long, default_value = "")]
    kubeconfig: String,
    /// The Node name.
    #[arg(long, default_value = "vk-mock")]
    nodename: String,
    /// Pods synced with the provider at once.
    #[arg(long, default_value_t = 10)]
    pod_sync_workers: usize,
    /// Do not add the `virtual-kubelet.io/provider` taint.
    #[arg(long)]
    disable_taint: bool,
    /// The node's InternalIP: where the API server reaches the kubelet API.
    #[arg(long, env = "VKUBELET_POD_IP", default_value = "127.0.0.1")]
    node_ip: std::net::IpAddr,
    /// The address the kubelet API listens on.
    #[arg(long, default_value = "0.0.0.0")]
    listen_address: std::net::IpAddr,
    /// The kubelet API port (0 picks a free one).
    #[arg(long, env = "KUBELET_PORT", default_value_t = 10250)]
    kubelet_port: u16,
    /// The serving certificate (PEM), reloaded when it changes.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<std::path::PathBuf>,
    /// The serving certificate's key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<std::path::PathBuf>,
    /// Get the serving certificate from the cluster (a
    /// kubernetes.io/kubelet-serving CSR) and renew it before it expires.
    #[arg(long, conflicts_with = "tls_cert_file")]
    rotate_server_certificates: bool,
    /// Accept client certificates signed by this CA (PEM).
    #[arg(long)]
    client_ca_file: Option<std::path::PathBuf>,
    /// `Webhook` (TokenReview and SubjectAccessReview) or `AlwaysAllow`.
    #[arg(long, default_value = "Webhook", value_parser = ["Webhook", "AlwaysAllow"])]
    authorization_mode: String,
    /// Close exec, attach and port-forward streams idle this many seconds.
    #[arg(long, default_value_t = 30)]
    stream_idle_timeout: u64,
    /// Give SPDY clients this many seconds to open their streams.
    #[arg(long, default_value_t = 30)]
    stream_creation_timeout: u64,
}

/// The kubelet API server for `args`, and the certificate rotation to run
/// next to it.
async fn kubelet_server(
    args: &Args,
    client: &kube::Client,
    provider: Arc<MockPodProvider>,
) -> Result<(KubeletServer, Option<ServingCertificateRotation>), String> {
    let auth = if args.authorization_mode == "AlwaysAllow" {
        ApiAuth::AllowAll
    } else {
        ApiAuth::delegated(DelegatedAuth::new(
            client.clone(),
            DelegatedAuthConfig::kubelet(),
        ))
    };
    let api = KubeletApi::new(&args.nodename, provider, client.clone(), auth)
        .with_stream_idle_timeout(Duration::from_secs(args.stream_idle_timeout))
        .with_stream_creation_timeout(Duration::from_secs(args.stream_creation_timeout));
    let mut builder =
        KubeletServer::builder(api).bind((args.listen_address, args.kubelet_port).into());
    let mut rotation = None;
    if let (Some(cert), Some(key)) = (&args.tls_cert_file, &args.tls_private_key_file) {
        builder = builder.certificate(reloading_pem_files(cert, key).map_err(|e| e.to_string())?);
    } else if args.rotate_server_certificates {
        let mut csr = CsrConfig::new(&args.nodename);
        csr.ip_addresses.push(args.node_ip);
        csr.dns_names.push(args.nodename.clone());
        let (certificate, rotating) = ServingCertificateRotation::bootstrap(client.clone(), csr)
            .await
            .map_err(|e| e.to_string())?;
        builder = builder.certificate(certificate);
        rotation = Some(rotating);
    }
    if let Some(path) = &args.client_ca_file {
        let pem = std::fs::read_to_string(path)
            .map_err(|e| format!("--client-ca-file {}: {e}", path.display()))?;
        builder = builder.client_ca(pem);
    }
    let server = builder.start().await.map_err(|e| e.to_string())?;
    Ok((server, rotation))
}

async fn client(kubeconfig: &str) -> Result<kube::Client, String> {
    let config = if kubeconfig.is_empty() {
        kube::Config::infer().await.map_err(|e| e.to_string())?
    } else {
        let file = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
        kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .map_err(|e| e.to_string())?
    };
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let client = match client(&args.kubeconfig).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot build the API client: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The vendor's provider goes here.
    let provider = Arc::new(MockPodProvider::new().with_node_name(&args.nodename));
    let (server, rotation) = match kubelet_server(&args, &client, provider.clone()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: the kubelet API: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut node = NodeConfig::new(&args.nodename, "mock");
    node.taint = !args.disable_taint;
    node.internal_ip = Some(args.node_ip.to_string());
    let pods = PodControllerConfig {
        sync_workers: args.pod_sync_workers,
        ..Default::default()
    };
    let virtual_node = match VirtualNode::builder(client, node)
        .provider(provider)
        .pods(pods)
        .kubelet_server(server)
        .build()
    {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    if let Some(rotation) = rotation {
        tokio::spawn(rotation.run(stopped.clone()));
    }
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => return,
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        let _ = stop.send(true);
    });
    match virtual_node.run(stopped).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
