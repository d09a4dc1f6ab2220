//! Project tasks for the Stratus workspace: `cargo xtask <task>`.
//!
//! - `ci`: formatting, lints, tests and docs, as CI runs them.
//! - `apiserver`: the harness's in-memory API server in the foreground.
//! - `cluster`: a real control plane (etcd, kube-apiserver,
//!   kube-controller-manager, kube-scheduler) built from Go modules
//!   (`tools/stratus-cluster`).
//! - `demo`: a demo cluster on the embedded API server.
//! - `e2e`: the end-to-end checks against a cluster (a kubeconfig).
//! - `fidelity`: the harness and kube-apiserver answering one request
//!   corpus, compared.
//! - `fuzz`: the parsers of network and user input, fed mutated inputs.
//! - `soak`: the demo's components as processes under churn and API
//!   faults, their memory and descriptors sampled.
//! - `bench`: benchmarks, reported as ratios to a floor or to a Go peer:
//!   the `stratus-bench` binary (`tools/stratus-bench`), in release.
//! - `manifests`: the deploy manifests under `docs/deploy/`.
//! - `new-provider`: `cargo stratus new` (cargo-stratus/) with this
//!   checkout as the generated crate's Stratus.
//! - `kubernetes-versions`: the library crates checked against each
//!   supported Kubernetes minor.

mod apiserver;
mod ci;
mod e2e;
mod error;
mod fidelity;
mod fuzz;
mod fuzz_live;
mod fuzz_targets;
mod generated;
mod kubernetes_versions;
mod manifests;
mod module_cycles;
mod protobuf_schema;
mod soak;

use std::process::ExitCode;

use clap::Parser;

const USAGE: &str = "usage: cargo xtask <task> [options]

tasks:
  ci          every CI check: fmt, clippy, tests, docs, packaging, generated providers, fuzz, soak, e2e,
              the real control plane (e2e-real, clients-real) and the client scripts (see xtask/src/ci.rs)
  apiserver   run the in-memory API server until Ctrl-C (--addr 127.0.0.1:6443 --kubeconfig FILE [--tls]
              [--authorization-mode AlwaysAllow|RBAC] [--scheduler=false] [--virtual-node NAME]
              [--process-node NAME] [--offload-node NAME])
  cluster     a real control plane built from tools/kubernetes/go.mod: build | up [--kubeconfig FILE] | down | status
              | stop|start|restart COMPONENT
  bench       benchmarks as ratios to a floor measured in the same run (apiserver, ccm, kubelet, kubelet-api, process, offload, failover),
              or to the Go peer in the same run (kubelet-go [--pods N] [--go-qps Q],
              ccm-go [--nodes N] [--services S] [--kube-api-qps Q])
  go-peers    build the benchmarks' Go peers from tools/go-peers/go.mod
  demo        a demo cluster on the embedded API server (--nodes N --services M --kubeconfig FILE --keep-running
              --control-plane embedded|real)
  e2e         end-to-end checks against a cluster (--kubeconfig FILE [--ccm] [--virtual-node NAME] [--junit FILE] [--cleanup])
  fidelity    the harness and the real kube-apiserver answer one request corpus; ratios in target/fidelity.json
  fuzz        every parser of network and user input fed mutated inputs ([--seconds N | --minutes N] [--target NAME] [--list])
  soak        the demo's components as processes under churn and API faults, memory and fds sampled ([--minutes N | --seconds N])
  module-cycles
              fail if the source files of a crate import each other in a cycle (prints each cycle)
  manifests   write docs/deploy/ (RBAC from the controllers' declarations, Deployment, DaemonSet); --check compares
  new-provider --kind ccm|virtual-kubelet --name NAME [--path DIR] [--stratus-version V] [--kubernetes 1.NN]
              write a provider crate (skeleton answering NotImplemented, main.rs, tests, Dockerfile, manifests, CI):
              `cargo stratus new` (cargo-stratus/) with this checkout as Stratus's source
  kubernetes-versions
              check every library crate against each supported Kubernetes minor (1.34 to 1.37)";

/// Wait for SIGINT or SIGTERM.
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            None
        }
    }
}

/// Parse a task's flags; `Err` is the exit code after clap printed the
/// error (2), or the help or version (0).
pub(crate) fn parse<A: Parser>(args: &[String]) -> Result<A, ExitCode> {
    A::try_parse_from(args).map_err(|e| {
        let _ = e.print();
        if e.use_stderr() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// Parse a task's flags and run it on a multi-threaded runtime.
fn parse_and_run<A, F, Fut>(args: &[String], task: F) -> ExitCode
where
    A: Parser,
    F: FnOnce(A) -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    let parsed = match parse::<A>(args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    match runtime() {
        Some(rt) => rt.block_on(task(parsed)),
        None => ExitCode::FAILURE,
    }
}

/// `cargo xtask bench <suite> ...`: the benchmark binary (`stratus-bench`,
/// with its own allocator), built and run in release.
fn bench(args: &[String]) -> ExitCode {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .args([
            "run",
            "--quiet",
            "--release",
            "--package",
            "stratus-bench",
            "--",
        ])
        .args(args)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => ExitCode::from(u8::try_from(s.code().unwrap_or(1)).unwrap_or(1)),
        Err(e) => {
            eprintln!("could not run the benchmarks: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci::run(&args[1..]),
        Some("apiserver") => parse_and_run(&args, apiserver::run),
        Some("bench") => bench(&args[1..]),
        Some("cluster") => parse_and_run(&args, stratus_cluster::run),
        Some("demo") => parse_and_run(&args, stratus_demo::run),
        Some("e2e") => parse_and_run(&args, e2e::run),
        Some("fidelity") => parse_and_run(&args, fidelity::run),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("go-peers") => stratus_cluster::go_peers::run(&args[1..]),
        Some("soak") => soak::run(&args[1..]),
        Some("manifests") => manifests::run(&args[1..]),
        Some("module-cycles") => module_cycles::run(&args[1..]),
        // `cargo stratus new` with this checkout as Stratus's source.
        Some("new-provider") => cargo_stratus::run(
            &[&["new".to_owned()], &args[1..]].concat(),
            cargo_stratus::Stratus::Path(generated::root()),
        ),
        Some("kubernetes-versions") => kubernetes_versions::run(&args[1..]),
        Some("protobuf-schema") => protobuf_schema::run(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("unknown task {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
