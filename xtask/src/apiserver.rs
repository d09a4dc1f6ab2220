//! `cargo xtask apiserver`: the harness API server in the foreground.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use stratus_kubelet::resources::ApiResources;
use stratus_testing::{ApiServer, TestCluster};

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
    /// `AlwaysAllow` (every caller may do anything), or `RBAC`: bearer
    /// tokens name the caller and Roles, ClusterRoles and their bindings
    /// decide (the kubeconfig is the administrator, in `system:masters`);
    /// `RBAC` implies `--tls`, as kubectl sends its token only over TLS.
    #[arg(long, value_enum, default_value = "AlwaysAllow")]
    authorization_mode: AuthorizationMode,
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
    /// Also run an offload node of this name (`stratus-provider-kubernetes`)
    /// whose pods run in a second in-process API server, the "remote
    /// cluster": there a scheduler binds them to the process node
    /// `remote-0`, so they are real processes too. Remote namespaces are
    /// the home ones prefixed `remote-`.
    #[arg(long, value_name = "NAME")]
    offload_node: Option<String>,
    /// Where to write the remote cluster's kubeconfig (with
    /// `--offload-node`).
    #[arg(long, default_value = "target/stratus-remote.kubeconfig")]
    remote_kubeconfig: PathBuf,
    /// Run the harness's scheduler: pods without a node are bound to a
    /// Ready, schedulable node whose taints they tolerate (and whose labels
    /// match their nodeSelector), as kube-scheduler would; `false` leaves
    /// them Pending.
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, default_value_t = true, default_missing_value = "true")]
    scheduler: bool,
    /// Run the harness's Deployment and ReplicaSet controllers
    /// (`stratus_testing::deployments`): a Deployment gets its ReplicaSets,
    /// rolling updates and pods, as kube-controller-manager makes them.
    #[arg(long)]
    deployments: bool,
}

/// kube-apiserver's `--authorization-mode` values the harness implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AuthorizationMode {
    /// Every request is allowed.
    #[value(name = "AlwaysAllow")]
    AlwaysAllow,
    /// Role-based access control.
    #[value(name = "RBAC")]
    Rbac,
}

/// The remote cluster's process node, with `--offload-node`.
const REMOTE_NODE: &str = "remote-0";

pub(crate) async fn run(args: Args) -> ExitCode {
    let mut builder = ApiServer::builder().bind(args.addr);
    if args.tls {
        builder = builder.tls();
    }
    if args.authorization_mode == AuthorizationMode::Rbac {
        builder = builder.rbac();
    }
    let server = match builder.start().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let scheduler = args
        .scheduler
        .then(|| tokio::spawn(stratus_testing::cluster::run_scheduler(server.client())));
    let deployments = args.deployments.then(|| {
        tokio::spawn(stratus_testing::deployments::run_deployments(
            server.client(),
        ))
    });
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
    let mut process_roots = Vec::new();
    if let Some(name) = &args.process_node {
        match start_process_node(&server, name, true, stopped.clone()).await {
            Ok(root) => process_roots.push(root),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    // Kept to the end: the remote cluster lives as long as the home one.
    let mut _remote = None;
    if let Some(name) = &args.offload_node {
        match start_offload_node(&server, name, &args.remote_kubeconfig, stopped.clone()).await {
            Ok((remote, root)) => {
                _remote = Some(remote);
                process_roots.push(root);
            }
            Err(e) => {
                eprintln!("error: {e}");
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
    stratus_runtime::terminated().await;
    println!("shutting down");
    let _ = stop.send(true);
    for task in [scheduler, deployments].into_iter().flatten() {
        task.abort();
    }
    server.shutdown().await;
    for root in process_roots {
        let _ = std::fs::remove_dir_all(root);
    }
    ExitCode::SUCCESS
}

/// Start process node `name` on `server` (tainted as virtual nodes are, or
/// not): the directory its pods run under.
async fn start_process_node(
    server: &ApiServer,
    name: &str,
    taint: bool,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> Result<PathBuf, String> {
    let root =
        std::env::temp_dir().join(format!("stratus-apiserver-{name}-{}", std::process::id()));
    let mut config = stratus_provider_process::ProcessConfig::new(&root);
    config
        .images
        .insert("busybox".into(), vec!["sh".into(), "-c".into()]);
    config
        .images
        .insert("python".into(), vec!["python3".into()]);
    let mut node =
        stratus_kubelet::node::NodeConfig::new(name, stratus_provider_process::PROVIDER_NAME);
    node.capacity = config.host_capacity();
    if !taint {
        node.taint = None;
    }
    let resources = Arc::new(ApiResources::new(server.client(), Duration::from_secs(60)));
    let provider = stratus_provider_process::ProcessProvider::new(config)
        .with_resources(resources)
        .with_node_name(name);
    let node =
        stratus_testing::kubelet_api::virtual_node_with_api(server, node, Arc::new(provider))
            .await
            .map_err(|e| format!("process node {name}: {e}"))?;
    tokio::spawn(node.run(stopped));
    println!(
        "process node {name}: its pods run as processes under {}",
        root.display()
    );
    Ok(root)
}

/// Start the remote cluster (a second API server with a scheduler and the
/// untainted process node `remote-0`, its kubeconfig written to
/// `kubeconfig`) and offload node `name` on `server`: the remote cluster
/// and its process node's directory.
async fn start_offload_node(
    server: &ApiServer,
    name: &str,
    kubeconfig: &Path,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> Result<(TestCluster, PathBuf), String> {
    let mut remote = TestCluster::start()
        .await
        .map_err(|e| format!("the remote cluster: {e}"))?;
    remote.start_scheduler();
    remote
        .server()
        .write_kubeconfig(kubeconfig)
        .map_err(|e| format!("the remote kubeconfig: {e}"))?;
    let root = start_process_node(remote.server(), REMOTE_NODE, false, stopped.clone()).await?;
    let node = stratus_demo::offload_node(
        &stratus_testing::kubelet_api::KubeletApiSite::harness(server),
        name,
        remote.client(),
        "remote-",
    )
    .await?;
    tokio::spawn(node.run(stopped));
    println!(
        "offload node {name}: its pods run in the remote cluster at {} (kubeconfig {}) on {REMOTE_NODE}",
        remote.server().url(),
        kubeconfig.display()
    );
    Ok((remote, root))
}
