//! `cargo xtask kubernetes-versions`: every library crate checked against
//! each Kubernetes minor Stratus supports, the k8s-openapi version chosen
//! with `K8S_OPENAPI_ENABLED_VERSION` as a vendor's binary would choose it
//! with a feature (library crates never choose one).

use std::process::{Command, ExitCode};
use std::time::Instant;

/// The Kubernetes minors Stratus supports, oldest first: the four newest
/// k8s-openapi 0.29 knows (`v1_34` … `latest`, which is 1.37).
pub(crate) const SUPPORTED: &[&str] = &["1.34", "1.35", "1.36", "1.37"];

/// The k8s-openapi feature of minor `version` (`1.34` → `v1_34`), if it is
/// one Stratus supports.
pub(crate) fn feature(version: &str) -> Result<String, String> {
    if SUPPORTED.contains(&version) {
        Ok(format!("v{}", version.replace('.', "_")))
    } else {
        Err(format!(
            "Kubernetes {version:?} is not one Stratus supports (one of {})",
            SUPPORTED.join(", ")
        ))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_supported_minor_names_its_feature_and_another_is_refused() {
        assert_eq!(feature("1.34").unwrap(), "v1_34");
        assert_eq!(feature("1.37").unwrap(), "v1_37");
        let refused = feature("1.33").unwrap_err();
        assert!(refused.contains("1.34, 1.35, 1.36, 1.37"), "{refused}");
    }
}
