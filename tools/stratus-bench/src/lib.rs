//! `cargo xtask bench <target>`: benchmarks reported as ratios to a floor
//! measured in the same run.
//!
//! Targets:
//! - `apiserver`: the harness API server. Each HTTP figure is compared with
//!   the same operation on the in-memory store without HTTP.
//! - `ccm`: the cloud controllers at 5,000 nodes and 1,000 Services
//!   (`ccm.rs`).
//! - `ccm-go`: Stratus's cloud controller manager beside a Go one on
//!   k8s.io/cloud-provider (`ccm_go.rs`).
//! - `kubelet`: one virtual node with 10,000 pods (`kubelet.rs`).
//! - `kubelet-go`: Stratus's virtual kubelet beside the Go one
//!   (`kubelet_go.rs`).
//! - `kubelet-scale`: 100 virtual nodes with 100,000 pods in one process,
//!   beside the Go one's per-node figures (`kubelet_scale.rs`).
//! - `kubelet-api`: exec round trips and log streaming through the kubelet
//!   API (`kubelet_api.rs`).
//! - `process`: 500 pods of `sleep` on a process node
//!   (`process.rs`).
//! - `offload`: 2,000 pods offloaded to a second API server
//!   (`offload.rs`).
//! - `local-cloud`: the local cloud's load balancers against a direct
//!   connection (`local_cloud.rs`).
//! - `failover`: Lease takeover by replicas of the sample manager after a
//!   crash, a graceful stop and a partition of the leader
//!   (`failover.rs`).
//! - `plots [--out DIR]`: the suites' plots (every suite's ratios; the
//!   distributions of `kubelet-go`, the phases of `ccm`) drawn again from
//!   their JSON in `target/bench` (`plot.rs`; each suite draws its own when
//!   it ends).
//!
//! ```
//! use std::process::ExitCode;
//!
//! // An unknown suite is refused with the list of suites (exit code 2).
//! assert_eq!(stratus_bench::run(&["nope".to_owned()]), ExitCode::from(2));
//! ```

mod apiserver;
pub(crate) mod ccm;
pub(crate) mod ccm_go;
mod failover;
pub mod heap_meter;
pub(crate) mod kubelet;
pub(crate) mod kubelet_api;
pub(crate) mod kubelet_go;
mod kubelet_scale;
mod local_cloud;
pub(crate) mod measure;
mod offload;
pub(crate) mod plot;
mod process;

use std::process::ExitCode;

use serde_json::json;

/// Run `args[0]`, the suite, with its options (a release build only).
pub fn run(args: &[String]) -> ExitCode {
    let Some(target) = args.first() else {
        eprintln!(
            "usage: cargo xtask bench <apiserver|ccm|ccm-go|kubelet|kubelet-go|kubelet-scale|kubelet-api|process|offload|failover|local-cloud|plots>"
        );
        return ExitCode::from(2);
    };
    if target == "plots" {
        // Drawing measures nothing: any build will do.
        return self::plot::run(&args[1..]).map_or_else(
            |e| {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            },
            |()| ExitCode::SUCCESS,
        );
    }
    if ![
        "apiserver",
        "ccm",
        "kubelet",
        "kubelet-go",
        "kubelet-scale",
        "ccm-go",
        "kubelet-api",
        "process",
        "offload",
        "failover",
        "local-cloud",
    ]
    .contains(&target.as_str())
        && target != apiserver::MEMORY_CHILD
        && target != self::kubelet_go::STRATUS_NODE_CHILD
        && target != self::ccm_go::STRATUS_MANAGER_CHILD
        && target != self::kubelet_api::STRATUS_NODE_CHILD
    {
        eprintln!(
            "unknown benchmark {target:?}; available: apiserver, ccm, ccm-go, kubelet, kubelet-go, kubelet-scale, kubelet-api, process, offload, failover, local-cloud, plots"
        );
        return ExitCode::from(2);
    }
    if cfg!(debug_assertions) {
        // Benchmarks run optimized; `cargo xtask bench` builds them so.
        eprintln!(
            "benchmarks run in release: `cargo xtask bench {target}` (or `cargo run --release -p stratus-bench -- {target}`)"
        );
        return ExitCode::from(2);
    }
    if target == self::ccm_go::STRATUS_MANAGER_CHILD {
        // The manager command starts its own runtime, as a vendor's main.
        return self::ccm_go::stratus_manager(&args[1..]).unwrap_or_else(|e| {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        });
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if target == "ccm" {
        rt.block_on(self::ccm::run())
    } else if target == "kubelet" {
        rt.block_on(self::kubelet::run())
    } else if target == "kubelet-go" {
        rt.block_on(self::kubelet_go::run(&args[1..]))
    } else if target == "kubelet-scale" {
        rt.block_on(self::kubelet_scale::run(&args[1..]))
    } else if target == "ccm-go" {
        rt.block_on(self::ccm_go::run(&args[1..]))
    } else if target == self::kubelet_go::STRATUS_NODE_CHILD {
        rt.block_on(self::kubelet_go::stratus_node(&args[1..]))
    } else if target == self::kubelet_api::STRATUS_NODE_CHILD {
        rt.block_on(self::kubelet_api::stratus_node(&args[1..]))
    } else if target == "kubelet-api" {
        rt.block_on(self::kubelet_api::run(&args[1..]))
    } else if target == "process" {
        rt.block_on(self::process::run())
    } else if target == "offload" {
        rt.block_on(self::offload::run())
    } else if target == "local-cloud" {
        rt.block_on(self::local_cloud::run(&args[1..]))
    } else if target == "failover" {
        rt.block_on(self::failover::run(&args[1..]))
    } else if target == apiserver::MEMORY_CHILD {
        rt.block_on(async {
            let (took, budget) = apiserver::memory_under_writes().await?;
            println!("{}", json!({"took": took, "budget": budget}));
            Ok(())
        })
    } else {
        rt.block_on(apiserver::run())
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
