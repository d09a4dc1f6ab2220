//! The template of a vendor's virtual kubelet: build the provider, describe
//! the node, run a `VirtualNode` until SIGTERM.
//!
//! This sample runs `MockPodProvider`, the harness's in-memory provider
//! (pods start Running with fake IPs); a vendor builds its own
//! `PodLifecycleHandler` instead:
//!
//! ```text
//! sample-virtual-kubelet --kubeconfig target/stratus-demo.kubeconfig --nodename vk-mock
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use stratus::kubelet::VirtualNode;
use stratus::kubelet::node::NodeConfig;
use stratus::kubelet::pods::PodControllerConfig;
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
    let provider = Arc::new(MockPodProvider::new());
    let mut node = NodeConfig::new(&args.nodename, "mock");
    node.taint = !args.disable_taint;
    node.internal_ip = Some("127.0.0.1".into());
    let pods = PodControllerConfig {
        sync_workers: args.pod_sync_workers,
        ..Default::default()
    };
    let virtual_node = match VirtualNode::builder(client, node)
        .provider(provider)
        .pods(pods)
        .build()
    {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
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
