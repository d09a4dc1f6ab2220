//! The Go peers of the benchmarks, built from the modules that
//! `tools/go-peers/go.mod` pins (github.com/virtual-kubelet/virtual-kubelet
//! v1.14.1 and the k8s.io modules of the control plane's minor): no binary
//! downloads, and Go's build cache shared with `cargo xtask cluster build`.
//! Nothing built here ships.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Instant, SystemTime};

use crate::bench::BoxError;

/// `tools/go-peers`.
fn module() -> PathBuf {
    crate::generated::root().join("tools/go-peers")
}

/// `<target>/go-peers`.
fn bin_dir() -> PathBuf {
    let root = crate::generated::root();
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("go-peers")
}

/// The newest modification of the module's files (go.mod, go.sum, the
/// peers' sources).
fn newest_input() -> Option<SystemTime> {
    let module = module();
    let mut files = vec![module.join("go.mod"), module.join("go.sum")];
    if let Ok(dir) = std::fs::read_dir(module.join("virtual-kubelet")) {
        files.extend(dir.filter_map(|e| Some(e.ok()?.path())));
    }
    files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok()?.modified().ok())
        .max()
}

/// The Go virtual kubelet (`tools/go-peers/virtual-kubelet`: nodeutil over
/// an in-memory provider answering at once), built unless newer than its
/// inputs.
pub(crate) fn virtual_kubelet() -> Result<PathBuf, BoxError> {
    let binary = bin_dir().join("virtual-kubelet");
    let inputs = newest_input().ok_or("tools/go-peers/go.mod is missing")?;
    let fresh = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .is_ok_and(|built| built >= inputs);
    if fresh {
        return Ok(binary);
    }
    std::fs::create_dir_all(bin_dir())?;
    let started = Instant::now();
    eprintln!("go-peers: go build ./virtual-kubelet");
    let status = Command::new("go")
        .current_dir(module())
        .env("GOFLAGS", "-mod=mod")
        .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
        .arg(&binary)
        .arg("./virtual-kubelet")
        .status()
        .map_err(|e| format!("could not run go (is Go installed?): {e}"))?;
    if !status.success() {
        return Err("go build ./virtual-kubelet failed".into());
    }
    eprintln!("go-peers: built in {:.0}s", started.elapsed().as_secs_f64());
    Ok(binary)
}

/// `cargo xtask go-peers`: build the Go peers (a no-op while they are newer
/// than their module's files) and print where they are.
pub(crate) fn run(args: &[String]) -> std::process::ExitCode {
    if !args.is_empty() {
        eprintln!("usage: cargo xtask go-peers (builds the benchmarks' Go peers)");
        return std::process::ExitCode::from(2);
    }
    match virtual_kubelet() {
        Ok(path) => {
            println!("go-peers: {}", path.display());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("go-peers: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
