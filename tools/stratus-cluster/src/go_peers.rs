//! The Go peers of the benchmarks, built from the modules that
//! `tools/go-peers/go.mod` pins (github.com/virtual-kubelet/virtual-kubelet
//! v1.14.1, and k8s.io/cloud-provider and the other k8s.io modules at the
//! control plane's minor): no binary
//! downloads, and Go's build cache shared with `cargo xtask cluster build`.
//! Nothing built here ships.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Instant, SystemTime};

use crate::BoxError;

/// `tools/go-peers`.
fn module() -> PathBuf {
    crate::workspace_root().join("tools/go-peers")
}

/// `<target>/go-peers`.
fn bin_dir() -> PathBuf {
    let root = crate::workspace_root();
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("go-peers")
}

/// The peers: each a `main` package in a directory of the module, built
/// to a binary of the same name.
const PEERS: [&str; 2] = ["virtual-kubelet", "cloud-controller-manager"];

/// The newest modification of the module's files (go.mod, go.sum, the
/// peers' sources).
fn newest_input() -> Option<SystemTime> {
    let module = module();
    let mut files = vec![module.join("go.mod"), module.join("go.sum")];
    for peer in PEERS {
        if let Ok(dir) = std::fs::read_dir(module.join(peer)) {
            files.extend(dir.filter_map(|e| Some(e.ok()?.path())));
        }
    }
    files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok()?.modified().ok())
        .max()
}

/// The peer `name` (a directory of `tools/go-peers`), built unless newer
/// than the module's inputs.
fn build(name: &str) -> Result<PathBuf, BoxError> {
    let binary = bin_dir().join(name);
    let inputs = newest_input().ok_or("tools/go-peers/go.mod is missing")?;
    let fresh = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .is_ok_and(|built| built >= inputs);
    if fresh {
        return Ok(binary);
    }
    std::fs::create_dir_all(bin_dir())?;
    let started = Instant::now();
    let wait = crate::progress::Wait::start("go-peers", format!("go build ./{name}"));
    let status = Command::new("go")
        .current_dir(module())
        .env("GOFLAGS", "-mod=mod")
        .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
        .arg(&binary)
        .arg(format!("./{name}"))
        .status()
        .map_err(|e| format!("could not run go (is Go installed?): {e}"))?;
    if !status.success() {
        return Err(format!("go build ./{name} failed").into());
    }
    wait.done(&format!(
        "built in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(binary)
}

/// The Go virtual kubelet (`tools/go-peers/virtual-kubelet`: nodeutil over
/// an in-memory provider answering at once).
pub fn virtual_kubelet() -> Result<PathBuf, BoxError> {
    build("virtual-kubelet")
}

/// The Go cloud controller manager (`tools/go-peers/cloud-controller-manager`:
/// k8s.io/cloud-provider's command over an in-memory cloud with FakeCloud's
/// latency and call budget).
pub fn cloud_controller_manager() -> Result<PathBuf, BoxError> {
    build("cloud-controller-manager")
}

/// `cargo xtask go-peers`: build the Go peers (a no-op while they are newer
/// than their module's files) and print where they are.
pub fn run(args: &[String]) -> std::process::ExitCode {
    if !args.is_empty() {
        eprintln!("usage: cargo xtask go-peers (builds the benchmarks' Go peers)");
        return std::process::ExitCode::from(2);
    }
    for peer in PEERS {
        match build(peer) {
            Ok(path) => println!("go-peers: {}", path.display()),
            Err(e) => {
                eprintln!("go-peers: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    std::process::ExitCode::SUCCESS
}
