//! The demo (`cargo xtask demo`, or this crate's `stratus-demo`): a cluster on the embedded in-process API server, or
//! with `--control-plane real` on the real control plane of `cargo xtask
//! cluster` (kube-apiserver, etcd, kube-controller-manager and
//! kube-scheduler built from their Go modules).
//!
//! Starts the harness API server (or uses the real one), simulated kubelets that register nodes
//! with the external-cloud-provider taint and keep them Ready, a local cloud
//! (`stratus-local-cloud`, in this process, its instances the nodes), the
//! manager with its provider `local` (the cloud-node controller initializes
//! the nodes: provider ID, instance-type / zone / region labels, addresses,
//! taint removed; the service controller provisions the LoadBalancer
//! Services' load balancers, straight to their ready endpoints), three
//! replicas of a web server on three process nodes with addresses of their
//! own behind a LoadBalancer Service made by kubectl (requests spread over
//! them, a UDP datagram, a rolling restart without a failed request, the
//! Service deleted and its address released: `web.rs`), and a virtual node
//! (`vk-demo`, MockPodProvider) running pods the scheduler binds to it;
//! shows progress and a summary. On the real control plane the manager runs
//! as its ServiceAccount under `docs/deploy/rbac.yaml` (with
//! `--use-service-account-credentials`), the real scheduler binds the pods,
//! the kubelet APIs listen on the cluster's node address (kube-apiserver
//! does not proxy to loopback), and the summary counts the manager's
//! forbidden requests in the audit log.
//!
//! ```no_run
//! use clap::Parser;
//!
//! // `cargo xtask demo --nodes 3`, from a program of your own.
//! let args = stratus_demo::Args::parse_from(["stratus-demo", "--nodes", "3"]);
//! let code = tokio::runtime::Runtime::new()?.block_on(stratus_demo::run(args));
//! # let _ = code;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use stratus_ccm::app::{CloudControllerManager, ManagerOptions};
use stratus_kubelet::node::NodeConfig;
use stratus_testing::kubelet_api::{KubeletApiSite, virtual_node_builder_at};
use stratus_testing::{MockPodProvider, NodeSpec, SimulatedKubelet, TestCluster};

use stratus_cluster as cluster;

mod local_cloud;
mod offload;
mod process;
mod progress;
mod web;

pub use offload::offload_node;
use progress::{measure, render};

/// The manager's flags, parsed as its command line would be.
#[derive(Parser)]
struct ManagerFlags {
    #[command(flatten)]
    options: ManagerOptions,
}

/// Run the demo cluster.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask demo")]
pub struct Args {
    /// Simulated nodes to register.
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// LoadBalancer Services to create.
    #[arg(long, default_value_t = 3)]
    services: usize,
    /// Pods to run on the virtual node `vk-demo`.
    #[arg(long, default_value_t = 10)]
    pods: usize,
    /// Pods to offload through `vk-offload` to the second, "remote"
    /// API server.
    #[arg(long, default_value_t = 3)]
    offloaded: usize,
    /// Where to write a kubeconfig for kubectl.
    #[arg(long, default_value = "target/stratus-demo.kubeconfig")]
    kubeconfig: PathBuf,
    /// Keep serving after converging, until Ctrl-C.
    #[arg(long)]
    keep_running: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// The API server: `embedded` (the harness, in-process) or `real` (the
    /// control plane of `cargo xtask cluster`: the running one, or one
    /// started for the demo and stopped after it).
    #[arg(long, value_enum, default_value = "embedded")]
    control_plane: ControlPlane,
}

/// Which API server the demo runs on.
pub(crate) use stratus_cluster::ControlPlane;

/// The demo's API server and what runs beside it.
enum Home {
    /// The harness, with its scheduler.
    Embedded(TestCluster),
    /// The real control plane; `started` when the demo brought it up (and
    /// so takes it down).
    Real {
        state: cluster::State,
        started: bool,
    },
}

/// The manager's user agent (the audit log is searched for it).
const MANAGER_AGENT: &str = "cloud-controller-manager";

impl Home {
    async fn start(args: &Args) -> Result<Self, stratus_cluster::BoxError> {
        match args.control_plane {
            ControlPlane::Embedded => {
                let mut cluster = TestCluster::start().await?;
                cluster.start_scheduler();
                // kube-controller-manager's EndpointSlices, which the local
                // cloud's load balancers follow.
                cluster.start_endpoint_slices();
                // And its Deployments and ReplicaSets (the web app's).
                cluster.start_deployments();
                cluster.server().write_kubeconfig(&args.kubeconfig)?;
                Ok(Self::Embedded(cluster))
            }
            ControlPlane::Real => {
                let started = cluster::State::load().is_none();
                let state = cluster::up(Some(cluster::DEFAULT_NODE_ADDRESS)).await?;
                if state.node_address.is_none() {
                    return Err("the cluster has no node address for kubelet APIs (see `cargo xtask cluster up --node-address`)".into());
                }
                std::fs::copy(&state.kubeconfig, &args.kubeconfig)?;
                Ok(Self::Real { state, started })
            }
        }
    }

    fn url(&self) -> String {
        match self {
            Self::Embedded(c) => c.server().url().to_owned(),
            Self::Real { state, .. } => state.server.clone(),
        }
    }

    async fn client(&self) -> Result<kube::Client, stratus_cluster::BoxError> {
        match self {
            Self::Embedded(c) => Ok(c.client()),
            Self::Real { state, .. } => state.client().await,
        }
    }

    /// Where the virtual nodes serve their kubelet APIs.
    async fn site(&self) -> Result<KubeletApiSite, stratus_cluster::BoxError> {
        match self {
            Self::Embedded(c) => Ok(KubeletApiSite::harness(c.server())),
            Self::Real { state, .. } => state.kubelet_api_site().await,
        }
    }

    /// The manager's flags beyond the demo's own: on the real control
    /// plane, its ServiceAccount's kubeconfig (after applying the shipped
    /// RBAC) and per-controller credentials, as deployed.
    async fn manager_flags(&self) -> Result<Vec<String>, stratus_cluster::BoxError> {
        let Self::Real { state, .. } = self else {
            return Ok(Vec::new());
        };
        let rbac = stratus_cluster::workspace_root().join("docs/deploy/rbac.yaml");
        cluster::apply_manifest(&state.client().await?, &rbac, "stratus-demo").await?;
        // What the `local` provider needs beyond it: its load balancers
        // follow EndpointSlices.
        let local = stratus_cluster::workspace_root().join("docs/deploy/local-provider-rbac.yaml");
        cluster::apply_manifest(&state.client().await?, &local, "stratus-demo").await?;
        let kubeconfig = cluster::cluster_dir().join("cloud-controller-manager.kubeconfig");
        cluster::service_account_kubeconfig(
            state,
            "kube-system",
            "cloud-controller-manager",
            &kubeconfig,
        )
        .await?;
        Ok(vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            "--use-service-account-credentials".into(),
        ])
    }

    /// Pods can be created in `namespace` (the real controller manager
    /// makes its `default` ServiceAccount and root CA ConfigMap first).
    async fn namespace_ready(
        &self,
        client: &kube::Client,
        namespace: &str,
    ) -> Result<(), stratus_cluster::BoxError> {
        if let Self::Real { .. } = self {
            cluster::wait_for_default_service_account(client, namespace, Duration::from_secs(60))
                .await?;
            cluster::wait_for_config_map(
                client,
                namespace,
                "kube-root-ca.crt",
                Duration::from_secs(60),
            )
            .await?;
        }
        Ok(())
    }

    /// The audit log's verdict on the manager (real control plane only).
    fn manager_audit(&self) -> Option<Result<cluster::AuditCount, stratus_cluster::BoxError>> {
        match self {
            Self::Embedded(_) => None,
            Self::Real { state, .. } => Some(cluster::audit_count(state, MANAGER_AGENT)),
        }
    }

    /// The address the process node's pods get on the real control plane
    /// (kube-apiserver refuses loopback endpoints); `None` on the harness
    /// (they get 127.0.0.1).
    fn node_address(&self) -> Option<String> {
        match self {
            Self::Embedded(_) => None,
            Self::Real { state, .. } => Some(
                state
                    .node_address
                    .clone()
                    .unwrap_or_else(|| cluster::DEFAULT_NODE_ADDRESS.to_owned()),
            ),
        }
    }

    /// Stop what the demo started.
    fn stop(self) {
        if let Self::Real { started: true, .. } = self {
            cluster::down();
        }
    }
}

/// The demo's virtual node.
const VIRTUAL_NODE: &str = "vk-demo";

/// Run the demo until it converges (or, with `--keep-running`, until
/// Ctrl-C): 0 when every check passed.
pub async fn run(args: Args) -> ExitCode {
    let started = Instant::now();
    if let Some(parent) = args
        .kubeconfig
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        let _ = std::fs::create_dir_all(parent);
    }
    let home = match Home::start(&args).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: could not start the API server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = demo(&args, &home, started).await;
    home.stop();
    code
}

async fn demo(args: &Args, home: &Home, started: Instant) -> ExitCode {
    let (client, site, manager_flags) =
        match tokio::try_join!(home.client(), home.site(), home.manager_flags()) {
            Ok(all) => all,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
    match args.control_plane {
        ControlPlane::Embedded => {
            println!("Stratus demo: in-process API server at {}", home.url())
        }
        ControlPlane::Real => println!(
            "Stratus demo: real control plane (kube-apiserver, etcd, kube-controller-manager, kube-scheduler) at {}",
            home.url()
        ),
    }
    println!(
        "kubeconfig: {} (kubectl --kubeconfig {} get nodes -o wide)",
        args.kubeconfig.display(),
        args.kubeconfig.display()
    );

    let mut kubelets = Vec::with_capacity(args.nodes);
    for i in 0..args.nodes {
        let mut spec = NodeSpec::new(format!("demo-node-{i}"))
            .with_internal_ip(format!("10.0.{}.{}", i / 250, i % 250 + 2))
            .with_heartbeat(Duration::from_secs(2));
        spec.provided_node_ip = true;
        spec.labels.insert("stratus.dev/demo".into(), "true".into());
        match SimulatedKubelet::start(client.clone(), spec).await {
            Ok(k) => kubelets.push(k),
            Err(e) => {
                eprintln!("error: could not register demo-node-{i}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    // The cloud (`stratus-local-cloud`, in this process): one instance per
    // node, started once the kubelets have registered (as when a CCM starts
    // on a new cluster). Its load balancers listen on 127.78.0.0/16 and go
    // straight to the Services' ready endpoints.
    let instances: Vec<(String, String)> = (0..args.nodes)
        .map(|i| {
            (
                format!("demo-node-{i}"),
                format!("10.0.{}.{}", i / 250, i % 250 + 2),
            )
        })
        .collect();
    let node_address = home.node_address();
    let real = args.control_plane == ControlPlane::Real;
    // Backends outside 127/8 the cloud may connect to: this machine's node
    // address on the real control plane (the pods' own addresses are in the
    // pod network, which the cloud allows).
    let extra_backends: Vec<String> = if real {
        node_address.iter().cloned().collect()
    } else {
        Vec::new()
    };
    let cloud = match crate::local_cloud::start(&instances, &extra_backends).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "local cloud: http://{}/v1/load-balancers (forwarding: {})",
        cloud.addr(),
        match cloud.forwarding {
            stratus_local_cloud::Forwarding::Kernel => "the kernel's, nftables DNAT",
            stratus_local_cloud::Forwarding::Proxy => "this process relays",
        }
    );
    // The whole manager, as a vendor's binary runs it: Go's flags, the
    // Lease, the admin server, every controller (routes and pod CIDRs too).
    let (stop_controllers, controllers_stopped) = tokio::sync::watch::channel(false);
    let controllers_stopped_vk = controllers_stopped.clone();
    let controllers_stopped_process = controllers_stopped.clone();
    let controllers_stopped_web = controllers_stopped.clone();
    let controllers_stopped_offload = controllers_stopped.clone();
    let flags = match ManagerFlags::try_parse_from(
        [
            "cloud-controller-manager",
            "--cloud-provider=local",
            // The pod network the local cloud routes (its routes become
            // this machine's, so the web pods can bind their addresses).
            &format!("--cluster-cidr={}", crate::local_cloud::POD_NETWORK),
            "--allocate-node-cidrs",
            // Routes follow the Nodes (Go's watch-based reconciliation, at
            // most a pass a second): a web node's pods wait for theirs.
            "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
            "--route-reconciliation-period=1s",
            // No supervisor restarts the demo's in-process manager after a
            // lost Lease (an API server restart), so it campaigns again
            // instead of exiting as Go's does.
            "--leader-elect-recampaign",
        ]
        .into_iter()
        .map(String::from)
        .chain(manager_flags),
    ) {
        Ok(f) => f.options,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut manager = CloudControllerManager::new(flags);
    if args.control_plane == ControlPlane::Embedded {
        manager = manager.with_client(client.clone());
    }
    let manager = manager
        .with_provider(cloud.provider())
        .with_admin_addr(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .with_identity("stratus-demo")
        .start(controllers_stopped)
        .await;
    let manager = match manager {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: the manager did not start: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(addr) = manager.admin_addr() {
        println!("manager: https://{addr}/healthz?verbose, /metrics, /configz (self-signed TLS)");
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": "demo"}})).unwrap_or_default();
    if let Err(e) = namespaces.create(&PostParams::default(), &ns).await {
        eprintln!("error: could not create the demo namespace: {e}");
        return ExitCode::FAILURE;
    }
    if let Err(e) = home.namespace_ready(&client, "demo").await {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    // A virtual node (MockPodProvider) and pods the scheduler binds to it:
    // they select it and tolerate its provider taint.
    let pod_provider = MockPodProvider::new().with_node_name(VIRTUAL_NODE);
    let mut vk = NodeConfig::new(VIRTUAL_NODE, "mock");
    vk.labels.insert(
        "node.kubernetes.io/exclude-from-external-load-balancers".into(),
        "true".into(),
    );
    let virtual_node =
        match virtual_node_builder_at(&site, vk, std::sync::Arc::new(pod_provider.clone()))
            .await
            .and_then(|b| Ok(b.build()?))
        {
            Ok(n) => n,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
    let virtual_node = tokio::spawn(virtual_node.run(controllers_stopped_vk));
    // A second virtual node whose pods are real processes.
    let process_demo = match crate::process::start(
        &site,
        "demo",
        node_address.as_deref(),
        controllers_stopped_process,
    )
    .await
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Three more, one replica of a web server each, for the local cloud's
    // load balancer.
    let web_demo = match crate::web::start(&site, "demo", controllers_stopped_web).await {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            process_demo
                .delete_pod(&Api::namespaced(client.clone(), "demo"))
                .await;
            return ExitCode::FAILURE;
        }
    };
    // A third, whose pods run in another cluster (a second API server).
    let offload_demo =
        match crate::offload::start(&site, "demo", args.offloaded, controllers_stopped_offload)
            .await
        {
            Ok(o) => o,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
    let pods: Api<Pod> = Api::namespaced(client.clone(), "demo");
    for i in 0..args.pods {
        let pod = json!({
            "metadata": {"name": format!("app-{i}"), "labels": {"app": "demo"}},
            "spec": {
                "nodeSelector": {"type": "virtual-kubelet", "kubernetes.io/hostname": VIRTUAL_NODE},
                "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "app", "image": "nginx"}]
            }
        });
        let pod: Pod = match serde_json::from_value(pod) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(e) = pods.create(&PostParams::default(), &pod).await {
            eprintln!("error: could not create pod app-{i}: {e}");
            return ExitCode::FAILURE;
        }
    }

    let services: Api<Service> = Api::namespaced(client.clone(), "demo");
    for i in 0..args.services {
        let svc = json!({
            "metadata": {"name": format!("web-{i}")},
            "spec": {"type": "LoadBalancer", "selector": {"app": format!("web-{i}")}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
        });
        let svc: Service = match serde_json::from_value(svc) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(e) = services.create(&PostParams::default(), &svc).await {
            eprintln!("error: could not create service web-{i}: {e}");
            return ExitCode::FAILURE;
        }
    }

    let deadline = started + Duration::from_secs(args.timeout);
    let bars = progress::Bars::new();
    let progress = loop {
        let p = match measure(&client).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        bars.update(&p, args);
        let done = p.registered == args.nodes
            && p.ready == args.nodes
            && p.initialized == args.nodes
            && p.leases >= args.nodes
            && p.allocated == args.services
            && p.provisioned == args.services
            && p.virtual_pods_running == args.pods;
        if done || Instant::now() > deadline {
            bars.finish();
            if !bars.drawn() {
                for l in render(&p, args) {
                    println!("{l}");
                }
            }
            break p;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let converged = progress.registered == args.nodes
        && progress.ready == args.nodes
        && progress.initialized == args.nodes
        && progress.leases >= args.nodes
        && progress.allocated == args.services
        && progress.provisioned == args.services
        && progress.virtual_pods_running == args.pods;
    println!();
    println!("summary:");
    println!(
        "  nodes registered (external-cloud-provider taint): {}/{}",
        progress.registered, args.nodes
    );
    println!(
        "  nodes Ready with renewing leases:                 {}/{}",
        progress.ready.min(progress.leases),
        args.nodes
    );
    println!(
        "  LoadBalancer services with cluster IP + node ports: {}/{}",
        progress.allocated, args.services
    );
    // The local cloud's answers; an error is said, not counted as none.
    let calls = cloud.calls().await.unwrap_or_else(|e| {
        eprintln!("warning: the local cloud's call counts: {e}");
        Default::default()
    });
    let count = |key: &str| calls.get(key).copied().unwrap_or_default();
    let listed =
        |n: Result<usize, String>| n.map_or_else(|e| format!("? ({e})"), |n| n.to_string());
    println!(
        "  nodes initialized by the cloud-node controller:   {}/{} ({} instance calls to the local cloud)",
        progress.initialized,
        args.nodes,
        count("GET /v1/instances") + count("GET /v1/instances/{name}")
    );
    println!(
        "  load balancers provisioned by the service controller: {}/{} ({} in the local cloud, {} PUT calls)",
        progress.provisioned,
        args.services,
        listed(cloud.load_balancers().await.map(|l| l.len())),
        count("PUT /v1/load-balancers/{name}")
    );
    println!(
        "  pods Running on the virtual node {VIRTUAL_NODE}:     {}/{} ({} provider creates)",
        progress.virtual_pods_running,
        args.pods,
        pod_provider.calls_to("create_pod")
    );
    // The kubelet API, reached as kubectl reaches it: through the API
    // server's pods/log and nodes/proxy.
    let mut kubelet_api_ok = args.pods == 0;
    if args.pods > 0 {
        let logs = pods.logs("app-0", &Default::default()).await;
        let stats = client
            .request_text(
                http::Request::get(format!("/api/v1/nodes/{VIRTUAL_NODE}/proxy/stats/summary"))
                    .body(Vec::new())
                    .unwrap_or_default(),
            )
            .await;
        match (logs, stats) {
            (Ok(logs), Ok(stats)) => {
                let pods_in_summary = serde_json::from_str::<serde_json::Value>(&stats)
                    .ok()
                    .and_then(|v| v["pods"].as_array().map(Vec::len))
                    .unwrap_or_default();
                println!(
                    "  kubelet API via the API server: logs of demo/app-0 ({:?}), stats summary of {pods_in_summary} pods",
                    logs.trim_end()
                );
                kubelet_api_ok = pods_in_summary == args.pods;
            }
            (logs, stats) => eprintln!(
                "error: the kubelet API of {VIRTUAL_NODE} did not answer: logs {:?}, stats {:?}",
                logs.err(),
                stats.err()
            ),
        }
    }
    let process_ok = match process_demo.check(&pods, Duration::from_secs(30)).await {
        Ok(line) => {
            println!(
                "  a real process on {}: demo/{}, {line}",
                crate::process::PROCESS_NODE,
                crate::process::PROCESS_POD
            );
            true
        }
        Err(e) => {
            eprintln!(
                "error: the process node {}: {e}",
                crate::process::PROCESS_NODE
            );
            false
        }
    };
    let offload_ok = match offload_demo.check(&pods, Duration::from_secs(30)).await {
        Ok(line) => {
            println!(
                "  pods offloaded by {} to a second API server: {line}",
                crate::offload::OFFLOAD_NODE
            );
            true
        }
        Err(e) => {
            eprintln!(
                "error: the offload node {}: {e}",
                crate::offload::OFFLOAD_NODE
            );
            false
        }
    };
    // The web app behind a load balancer of the local cloud, the Service
    // made by kubectl.
    let exposed_ok = match web_demo
        .run(&client, &args.kubeconfig, "demo", &cloud)
        .await
    {
        Ok(lines) => {
            println!("  the local cloud's load balancer:");
            for line in lines {
                println!("    {line}");
            }
            true
        }
        Err(e) => {
            eprintln!("error: the local cloud's load balancer: {e}");
            false
        }
    };
    let audit_ok = match home.manager_audit() {
        None => true,
        Some(Ok(count)) => {
            println!(
                "  the manager under docs/deploy/rbac.yaml: {} requests, {} forbidden (audit log)",
                count.requests,
                count.forbidden.len()
            );
            for f in &count.forbidden {
                eprintln!("error: forbidden: {f}");
            }
            count.requests > 0 && count.forbidden.is_empty()
        }
        Some(Err(e)) => {
            eprintln!("error: the audit log: {e}");
            false
        }
    };
    println!("  time taken: {:.1}s", started.elapsed().as_secs_f64());
    if !converged || !kubelet_api_ok || !process_ok || !offload_ok || !exposed_ok || !audit_ok {
        web_demo.delete(&client, "demo").await;
        process_demo.delete_pod(&pods).await;
        offload_demo.delete_pods(&pods).await;
        eprintln!(
            "error: the demo cluster did not converge within {}s",
            args.timeout
        );
        return ExitCode::FAILURE;
    }
    if args.keep_running {
        println!(
            "serving until Ctrl-C; try: kubectl --kubeconfig {0} get nodes,svc -A, \
             kubectl --kubeconfig {0} -n demo logs app-0, \
             kubectl --kubeconfig {0} -n demo exec -it app-0 -- size, \
             kubectl --kubeconfig {0} -n demo logs -f hello-process, \
             kubectl --kubeconfig {0} -n demo port-forward hello-process {1}, \
             kubectl --kubeconfig {0} -n demo logs burst-0, \
             kubectl --kubeconfig {0} -n demo expose deployment {2} --type=LoadBalancer --port=80 --target-port=8080 \
             (then kubectl get svc {2}, curl its EXTERNAL-IP)",
            args.kubeconfig.display(),
            process_demo.port,
            crate::web::APP
        );
        stratus_runtime::terminated().await;
    }
    web_demo.delete(&client, "demo").await;
    process_demo.delete_pod(&pods).await;
    offload_demo.delete_pods(&pods).await;
    let _ = stop_controllers.send(true);
    if let Err(e) = manager.wait().await {
        eprintln!("error: the manager stopped with an error: {e}");
        return ExitCode::FAILURE;
    }
    match virtual_node.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            eprintln!("error: the virtual node stopped with an error: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("error: the virtual node task failed: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Ok(Err(e)) = process_demo.task.await {
        eprintln!("error: the process node stopped with an error: {e}");
        return ExitCode::FAILURE;
    }
    if let Err(e) = web_demo.stop().await {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    if let Err(e) = offload_demo.stop().await {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    cloud.stop().await;
    drop(kubelets);
    ExitCode::SUCCESS
}
