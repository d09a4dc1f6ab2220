//! `cargo xtask kubernetes-versions`: every library crate checked against
//! each Kubernetes minor Stratus supports, the k8s-openapi version chosen
//! with `K8S_OPENAPI_ENABLED_VERSION` as a vendor's binary would choose it
//! with a feature (library crates never choose one).

use std::process::{Command, ExitCode};
use std::time::Instant;

/// The Kubernetes minors Stratus supports, oldest first (`cargo stratus
/// new --kubernetes` takes the same).
const SUPPORTED: &[&str] = cargo_stratus::KUBERNETES_MINORS;

pub(crate) fn run(args: &[String]) -> ExitCode {
    if let Some(arg) = args.first() {
        if arg != "-h" && arg != "--help" {
            eprintln!("kubernetes-versions takes no arguments, got {arg:?}");
            return ExitCode::from(2);
        }
        println!(
            "usage: cargo xtask kubernetes-versions\n\nchecks every library crate (`cargo check --lib` on the default members, crates/*) against Kubernetes {}",
            SUPPORTED.join(", ")
        );
        return ExitCode::SUCCESS;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut failed = Vec::new();
    for version in SUPPORTED {
        let start = Instant::now();
        // The workspace's default members are its library crates; `--lib`
        // builds none of their dev-dependencies, so none enables a version.
        let status = Command::new(&cargo)
            .args(["check", "--lib", "--quiet"])
            .current_dir(crate::generated::root())
            .env("K8S_OPENAPI_ENABLED_VERSION", version)
            .status();
        let ok = matches!(status, Ok(s) if s.success());
        println!(
            "kubernetes-versions: Kubernetes {version}: {} after {:.1}s",
            if ok { "ok" } else { "FAILED" },
            start.elapsed().as_secs_f64()
        );
        if !ok {
            failed.push(*version);
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "kubernetes-versions: the library crates do not compile against Kubernetes {}",
            failed.join(", ")
        );
        ExitCode::FAILURE
    }
}
