//! What the tasks read of this machine's processes (CPU time, resident
//! memory), stopping a child, and building the workspace's binaries to run
//! as processes: shared by the benchmarks and the soak.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::BoxError;

/// `--flag N` pairs, each value a whole number (the options of `bench
/// failover` and `soak`).
pub fn number_flags(args: &[String]) -> Result<Vec<(&str, u64)>, String> {
    let mut out = Vec::new();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a number"))?
            .parse()
            .map_err(|e| format!("{flag}: {e}"))?;
        out.push((flag.as_str(), value));
    }
    Ok(out)
}

/// `cargo build --quiet [--release] --package P ... [--bins]` with the
/// running Cargo; the answer is the directory the binaries are in
/// (`<target dir>/release` or `<target dir>/debug`).
pub fn build_binaries(release: bool, packages: &[&str]) -> Result<PathBuf, BoxError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut args = vec!["build", "--quiet"];
    if release {
        args.push("--release");
    }
    for package in packages {
        args.extend(["--package", package]);
    }
    args.push("--bins");
    let status = Command::new(cargo).args(&args).status()?;
    if !status.success() {
        return Err(format!("building {} failed", packages.join(", ")).into());
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    Ok(PathBuf::from(target).join(if release { "release" } else { "debug" }))
}

/// CPU time (user + system, all threads) of process `pid` (`"self"` or a
/// number), in seconds, from `/proc/<pid>/stat` (in USER_HZ, 100 a second
/// in Linux's /proc ABI); `None` if the process is gone.
pub fn process_cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after ')';
    // utime and stime are fields 14 and 15 of the line: 12 and 13 there.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// Stop a benchmark's child process: SIGTERM, then SIGKILL after 10 s.
pub fn stop_child(mut child: std::process::Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Resident memory of process `pid` (`"self"` or a number) now (`VmRSS`),
/// in bytes; `None` if the process is gone.
pub fn process_rss_bytes(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()?;
    Some(kib * 1024.0)
}

/// Resident memory of this process, in bytes (`/proc/self/statm`).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}
