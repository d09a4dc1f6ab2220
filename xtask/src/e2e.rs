//! `cargo xtask e2e --kubeconfig FILE [--ccm] [--virtual-node NAME]`: the
//! end-to-end checks of `stratus_testing::e2e` against any cluster — the
//! cloud controller manager's (Nodes initialized, routes for their pod
//! CIDRs, LoadBalancer Services provisioned and released, a Node whose
//! instance is gone deleted) and a virtual node's (Go virtual-kubelet's
//! e2e cases). Prints each check and a summary, writes JUnit XML with
//! `--junit`, exits 1 when a check failed. `--cleanup` deletes what an
//! interrupted run left (objects labelled
//! `app.kubernetes.io/managed-by=stratus-e2e`, nothing else).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use stratus_testing::conformance::Report;
use stratus_testing::e2e::{E2eConfig, cleanup, junit_xml, run_ccm_e2e, run_virtual_node_e2e};

/// `cargo xtask e2e`.
#[derive(Debug, Parser)]
#[command(name = "e2e", about = "End-to-end checks against a cluster")]
pub(crate) struct Args {
    /// The cluster's kubeconfig.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Check the cluster's cloud controller manager.
    #[arg(long)]
    ccm: bool,
    /// Check this virtual node (repeatable).
    #[arg(long = "virtual-node")]
    virtual_nodes: Vec<String>,
    /// Where test pods and Services are created.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Seconds each check waits for the cluster to converge.
    #[arg(long, default_value_t = 60)]
    wait: u64,
    /// The test pods' image.
    #[arg(long, default_value = "busybox")]
    image: String,
    /// Write the results as JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// The manager under test configures no cloud routes (skip the route
    /// check).
    #[arg(long)]
    no_routes: bool,
    /// The provider ID of an instance that does not exist, for the
    /// lifecycle check (default: a cloud Node's with its last segment
    /// replaced).
    #[arg(long)]
    gone_provider_id: Option<String>,
    /// Only delete what earlier runs left, then stop.
    #[arg(long)]
    cleanup: bool,
}

async fn client(path: &PathBuf) -> Result<kube::Client, String> {
    let file = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let client = match client(&args.kubeconfig).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("e2e: {e}");
            return ExitCode::from(2);
        }
    };
    if args.cleanup {
        return match cleanup(client, &args.namespace).await {
            Ok(n) => {
                println!("e2e: deleted {n} objects left by earlier runs");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("e2e: cleanup: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if !args.ccm && args.virtual_nodes.is_empty() {
        eprintln!("e2e: nothing to check: give --ccm and/or --virtual-node NAME");
        return ExitCode::from(2);
    }
    let config = E2eConfig {
        namespace: args.namespace.clone(),
        wait: Duration::from_secs(args.wait),
        image: args.image.clone(),
        routes: !args.no_routes,
        gone_provider_id: args.gone_provider_id.clone(),
        ..E2eConfig::default()
    };
    let mut suites: Vec<(String, Report)> = Vec::new();
    if args.ccm {
        suites.push((
            "cloud-controller-manager".into(),
            run_ccm_e2e(client.clone(), &config).await,
        ));
    }
    for node in &args.virtual_nodes {
        suites.push((
            format!("virtual-node {node}"),
            run_virtual_node_e2e(client.clone(), node, &config).await,
        ));
    }
    let mut failed = 0;
    for (name, report) in &suites {
        println!("== {name}\n{report}");
        failed += report.failures().len();
    }
    let total: usize = suites.iter().map(|(_, r)| r.checks.len()).sum();
    println!("e2e: {total} checks, {failed} failed (run {})", config.run);
    if let Some(path) = &args.junit {
        let named: Vec<(&str, &Report)> = suites.iter().map(|(n, r)| (n.as_str(), r)).collect();
        if let Err(e) = std::fs::write(path, junit_xml(&named)) {
            eprintln!("e2e: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
