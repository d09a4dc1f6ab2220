//! `cargo xtask apiserver`: the harness API server in the foreground.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use stratus_testing::ApiServer;

/// Run the in-memory API server until SIGINT or SIGTERM.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask apiserver")]
pub(crate) struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    addr: SocketAddr,
    /// Where to write a kubeconfig for kubectl.
    #[arg(long, default_value = "target/stratus.kubeconfig")]
    kubeconfig: PathBuf,
    /// Serve HTTPS with a self-signed CA (written into the kubeconfig).
    #[arg(long)]
    tls: bool,
    /// Also run a virtual node of this name (MockPodProvider) with its
    /// kubelet API, so that `kubectl logs`, `exec` and `attach` work on
    /// pods bound to it.
    #[arg(long, value_name = "NAME")]
    virtual_node: Option<String>,
    /// Also run a process node of this name (`stratus-provider-process`):
    /// its pods are real processes on this machine. Images `busybox` (run
    /// through `sh -c`) and `python` (`python3`) are mapped.
    #[arg(long, value_name = "NAME")]
    process_node: Option<String>,
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let mut builder = ApiServer::builder().bind(args.addr);
    if args.tls {
        builder = builder.tls();
    }
    let server = match builder.start().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(parent) = args
        .kubeconfig
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        eprintln!("error: could not create {}: {e}", parent.display());
        return ExitCode::FAILURE;
    }
    if let Err(e) = server.write_kubeconfig(&args.kubeconfig) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    if let Some(name) = &args.virtual_node {
        let provider = stratus_testing::MockPodProvider::new().with_node_name(name);
        let config = stratus_kubelet::node::NodeConfig::new(name.clone(), "mock");
        match stratus_testing::kubelet_api::virtual_node_with_api(
            &server,
            config,
            std::sync::Arc::new(provider),
        )
        .await
        {
            Ok(node) => {
                tokio::spawn(node.run(stopped.clone()));
                println!("virtual node {name} with its kubelet API (MockPodProvider)");
            }
            Err(e) => {
                eprintln!("error: virtual node {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut process_root = None;
    if let Some(name) = &args.process_node {
        let root =
            std::env::temp_dir().join(format!("stratus-apiserver-{name}-{}", std::process::id()));
        let mut config = stratus_provider_process::ProcessConfig::new(&root);
        config
            .images
            .insert("busybox".into(), vec!["sh".into(), "-c".into()]);
        config
            .images
            .insert("python".into(), vec!["python3".into()]);
        let mut node = stratus_kubelet::node::NodeConfig::new(
            name.clone(),
            stratus_provider_process::PROVIDER_NAME,
        );
        node.capacity = config.host_capacity();
        let resources = std::sync::Arc::new(stratus_kubelet::resources::ApiResources::new(
            server.client(),
            std::time::Duration::from_secs(60),
        ));
        let provider = stratus_provider_process::ProcessProvider::new(config)
            .with_resources(resources)
            .with_node_name(name);
        match stratus_testing::kubelet_api::virtual_node_with_api(
            &server,
            node,
            std::sync::Arc::new(provider),
        )
        .await
        {
            Ok(node) => {
                tokio::spawn(node.run(stopped.clone()));
                println!(
                    "process node {name}: its pods run as processes under {}",
                    root.display()
                );
                process_root = Some(root);
            }
            Err(e) => {
                eprintln!("error: process node {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("stratus in-memory API server listening on {}", server.url());
    println!("kubeconfig written to {}", args.kubeconfig.display());
    println!(
        "try: kubectl --kubeconfig {} get namespaces",
        args.kubeconfig.display()
    );
    crate::wait_for_signal().await;
    println!("shutting down");
    let _ = stop.send(true);
    server.shutdown().await;
    if let Some(root) = process_root {
        let _ = std::fs::remove_dir_all(root);
    }
    ExitCode::SUCCESS
}
