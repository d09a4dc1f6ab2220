//! `cargo xtask cluster`: a real Kubernetes control plane on this machine —
//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built
//! from the Go modules pinned in `tools/kubernetes/go.mod` and run on
//! loopback, the way kubeadm configures them (TLS everywhere but etcd's
//! loopback client port, `Node,RBAC` authorization with `NodeRestriction`,
//! service-account issuer and signing key, front-proxy certificates, a
//! kubelet client certificate, `--cloud-provider=external` so that the
//! cloud controllers are left to a cloud controller manager, an audit log).
//!
//! - `build`: build the four binaries into `target/kubernetes/bin` (the Go
//!   build and module caches make a second build incremental; nothing is
//!   rebuilt while the binaries are newer than `go.mod` and `go.sum`).
//! - `up [--kubeconfig FILE] [--node-address IP]`: build, make the
//!   certificates, start the components in the background, wait until all
//!   four are healthy, write the administrator's kubeconfig; returns and
//!   leaves them running. `--node-address` is added to the loopback device
//!   (and removed by `down`): kube-apiserver does not proxy to a node whose
//!   address is loopback, so nodes whose kubelet API the API server must
//!   reach (`kubectl logs`, `exec`, `nodes/proxy`) listen there.
//! - `down`: stop every component, remove the address and the state.
//! - `status`: each component's process and health.
//! - `stop|start|restart COMPONENT`: one component, for fault tests.
//!
//! Everything lives under `target/kubernetes/cluster/` (certificates,
//! etcd's data, logs, the audit log, `state.json`).
//!
//! ```
//! // The Go module the control plane is built from, found from anywhere.
//! let module = stratus_cluster::workspace_root().join("tools/kubernetes/go.mod");
//! assert!(module.is_file());
//! // No cluster is up in a test run: `cargo xtask cluster up` writes the state.
//! let _running = stratus_cluster::State::load();
//! ```

mod access;
mod build;
pub mod go_peers;
pub mod host;
mod layout;
pub mod lifecycle;
pub mod pki;
mod prepare;
mod process;
pub mod progress;
mod state;
mod virtual_node;

pub use access::{AuditCount, apply_manifest, audit_count, service_account_kubeconfig};
pub use build::build;
pub use layout::{DEFAULT_NODE_ADDRESS, cluster_dir};
pub use lifecycle::{
    down, down_after_benchmark, up, up_fresh, wait_for_config_map, wait_for_default_service_account,
};
pub use state::{State, config_from};
pub use virtual_node::{mock_virtual_kubelet, run_until_signal};

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use layout::bin_dir;

/// Any error, boxed, as the tasks return it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The workspace root, whatever directory the task runs from.
pub fn workspace_root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Which API server a task runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ControlPlane {
    /// The harness API server, in this process.
    Embedded,
    /// kube-apiserver and the rest, built from their Go modules.
    Real,
}
use lifecycle::{start_component, stop_component};
use process::{alive, healthy};
use virtual_node::serve_virtual_node;

/// `cargo xtask cluster`.
#[derive(Debug, clap::Parser)]
#[command(name = "cargo xtask cluster")]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Build the binaries from tools/kubernetes/go.mod.
    Build,
    /// Start the control plane in the background and wait until healthy.
    Up {
        /// Also copy the administrator's kubeconfig here.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The address added to the loopback device for nodes' kubelet
        /// APIs (`none` for no address).
        #[arg(long, default_value = DEFAULT_NODE_ADDRESS)]
        node_address: String,
    },
    /// Stop it and remove its state.
    Down,
    /// Each component's process and health.
    Status,
    /// Stop one component.
    Stop { component: String },
    /// Start a stopped component again.
    Start { component: String },
    /// Stop and start one component.
    Restart { component: String },
    /// Run a virtual node of this name on the running control plane: the
    /// virtual-kubelet command over a MockPodProvider, its kubelet API on
    /// the node address trusting the client CA kube-apiserver publishes,
    /// until interrupted (Ctrl-C or SIGTERM); the Node is deleted then.
    VirtualNode { name: String },
    /// Count the audit log's requests whose user agent starts with
    /// `--user-agent`; fails if any was forbidden (403).
    Audit {
        /// The user agent's prefix.
        #[arg(long, default_value = "cloud-controller-manager")]
        user_agent: String,
    },
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("cluster: {e}");
    ExitCode::FAILURE
}

/// Run `cargo xtask cluster <subcommand>`.
pub async fn run(args: Args) -> ExitCode {
    match args.command {
        Sub::Build => match tokio::task::spawn_blocking(build).await {
            Ok(Ok(what)) => {
                eprintln!("cluster: {what} ({})", bin_dir().display());
                ExitCode::SUCCESS
            }
            Ok(Err(e)) => fail(e),
            Err(e) => fail(e),
        },
        Sub::Up {
            kubeconfig,
            node_address,
        } => {
            let address = (node_address != "none").then_some(node_address.as_str());
            if let Some(a) = address
                && a.parse::<IpAddr>().is_err()
            {
                return fail(format!("--node-address {a:?} is not an IP address"));
            }
            match up(address).await {
                Ok(state) => {
                    let mut path = state.kubeconfig.clone();
                    if let Some(copy) = kubeconfig {
                        if let Err(e) = std::fs::copy(&state.kubeconfig, &copy) {
                            return fail(format!("{}: {e}", copy.display()));
                        }
                        path = copy;
                    }
                    println!("kubeconfig: {}", path.display());
                    println!(
                        "node address for kubelet APIs: {}",
                        state.node_address.as_deref().unwrap_or("none")
                    );
                    println!("audit log: {}", state.audit_log.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    let _ = down();
                    fail(e)
                }
            }
        }
        Sub::Down => {
            if down() {
                eprintln!("cluster: down");
            } else {
                eprintln!("cluster: none was up");
            }
            ExitCode::SUCCESS
        }
        Sub::Status => {
            let Some(state) = State::load() else {
                println!("cluster: down");
                return ExitCode::FAILURE;
            };
            let mut all = true;
            println!(
                "server: {}\nkubeconfig: {}",
                state.server,
                state.kubeconfig.display()
            );
            for c in &state.components {
                let ok = alive(c.pid) && healthy(&state, c).await;
                all &= ok;
                println!(
                    "{:<24} pid {:<8} {}",
                    c.name,
                    c.pid,
                    if ok { "healthy" } else { "NOT healthy" }
                );
            }
            if all {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Sub::Audit { user_agent } => {
            let Some(state) = State::load() else {
                return fail("no cluster is up");
            };
            match audit_count(&state, &user_agent) {
                Ok(count) => {
                    for f in &count.forbidden {
                        println!("forbidden: {f}");
                    }
                    println!(
                        "audit: {} requests by {user_agent}*, {} forbidden ({} more while kube-apiserver was starting, before its authorizer was ready)",
                        count.requests,
                        count.forbidden.len(),
                        count.forbidden_while_starting
                    );
                    if count.forbidden.is_empty() && count.requests > 0 {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => fail(e),
            }
        }
        Sub::Stop { component } => match stop_component(&component) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Sub::Start { component } => match start_component(&component).await {
            Ok(took) => {
                eprintln!(
                    "cluster: {component} healthy after {:.1}s",
                    took.as_secs_f64()
                );
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Sub::VirtualNode { name } => match serve_virtual_node(&name).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Sub::Restart { component } => {
            if let Err(e) = stop_component(&component) {
                return fail(e);
            }
            match start_component(&component).await {
                Ok(took) => {
                    eprintln!(
                        "cluster: {component} healthy after {:.1}s",
                        took.as_secs_f64()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_requests_are_counted_apart_while_the_api_server_starts() {
        let dir = std::env::temp_dir().join(format!("stratus-audit-test-{}", std::process::id()));
        let mut state = prepare::prepare(&dir, None, &[]).unwrap();
        let event = |at: &str, code: u16, agent: &str| {
            serde_json::json!({"verb": "get", "requestURI": "/api/v1/nodes", "userAgent": agent,
                "requestReceivedTimestamp": at, "responseStatus": {"code": code},
                "user": {"username": "system:serviceaccount:kube-system:cloud-controller-manager"}})
            .to_string()
        };
        let log = [
            event(
                "2026-11-25T10:00:00.000000Z",
                200,
                "cloud-controller-manager/v1",
            ),
            event(
                "2026-11-25T10:00:05.000000Z",
                403,
                "cloud-controller-manager/v1",
            ),
            event(
                "2026-11-25T10:01:00.000000Z",
                403,
                "cloud-controller-manager/v1",
            ),
            event("2026-11-25T10:01:00.000000Z", 403, "kubectl/v1.33"),
        ]
        .join("\n");
        std::fs::write(&state.audit_log, log).unwrap();
        let at = |t: &str| {
            t.parse::<k8s_openapi::jiff::Timestamp>()
                .unwrap()
                .as_microsecond()
        };
        state.apiserver_outages =
            vec![(at("2026-11-25T10:00:04Z"), Some(at("2026-11-25T10:00:10Z")))];
        let count = audit_count(&state, "cloud-controller-manager").unwrap();
        assert_eq!(count.requests, 3);
        assert_eq!(count.forbidden_while_starting, 1);
        assert_eq!(count.forbidden.len(), 1, "{:?}", count.forbidden);
        assert!(count.forbidden[0].starts_with("2026-11-25T10:01:00"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_zombie_or_missing_process_is_not_alive() {
        assert!(!alive(0));
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX));
    }

    #[test]
    fn the_components_command_lines_name_their_certificates_and_ports() {
        let dir = std::env::temp_dir().join(format!("stratus-cluster-test-{}", std::process::id()));
        let state = prepare::prepare(
            &dir,
            Some(DEFAULT_NODE_ADDRESS),
            &["node-lifecycle-controller"],
        )
        .unwrap();
        let apiserver = &state.components[1];
        assert_eq!(apiserver.name, "kube-apiserver");
        assert!(
            apiserver
                .args
                .contains(&"--authorization-mode=Node,RBAC".to_owned())
        );
        assert!(
            apiserver
                .args
                .iter()
                .any(|a| a.starts_with("--kubelet-client-certificate=") && a.ends_with(".crt"))
        );
        let kcm = &state.components[2];
        assert!(kcm.args.contains(&"--cloud-provider=external".to_owned()));
        assert!(kcm.args.contains(
            &"--controllers=*,bootstrapsigner,tokencleaner,-node-lifecycle-controller".to_owned()
        ));
        for c in &state.components {
            assert!(c.health.starts_with("http"), "{}", c.health);
        }
        let kubeconfig = std::fs::read_to_string(&state.kubeconfig).unwrap();
        assert!(kubeconfig.contains(&state.server));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
