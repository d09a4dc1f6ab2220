//! What every benchmark measures with: the harness server it runs
//! against, a process's CPU time and resident memory, its results' JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use stratus_testing::ApiServer;

use crate::error::BoxError;

/// The harness API server a benchmark runs its controllers against, in the
/// benchmark's own process: history enough (2,000,000 events, 8 GiB) that
/// no event is evicted in a run. With the default 256 MiB, a benchmark of
/// tens of thousands of pods fills the history in its second half, every
/// write then frees an old event's parsed tree, and under that churn
/// glibc's malloc (`_int_malloc`, `malloc_consolidate`, `unlink_chunk`)
/// takes the shared cores from the controllers being measured: `bench
/// kubelet`'s 1,000 binds/s queued to a p99 of 1.6-2.7 s instead of
/// 10-50 ms. That is the harness's cost, not the node's (`bench apiserver`
/// measures the harness's memory budgets), and a watcher starved of CPU
/// behind a 100,000-pod burst would fall off a short history.
pub(crate) fn harness_server() -> stratus_testing::ApiServerBuilder {
    ApiServer::builder()
        .history(2_000_000)
        .history_bytes(8 << 30)
}

/// Write a suite that runs Stratus beside a Go peer: `leading` figures as
/// they are, then each row `(metric, stratus, go)` as `<metric>_stratus`,
/// `<metric>_go` and `<metric>_ratio_stratus_over_go` (below 1 = Stratus
/// better); `size` says what each side ran.
pub(crate) fn write_side_by_side(
    name: &str,
    leading: &[(&str, f64)],
    rows: &[(&str, f64, f64)],
    size: &str,
) -> Result<(), BoxError> {
    let rows: Vec<(&str, f64, Vec<f64>)> =
        rows.iter().map(|(m, s, g)| (*m, *s, vec![*g])).collect();
    write_against_peers(name, leading, &["go"], &rows, size)
}

/// Write a suite that runs Stratus beside several configurations of a Go
/// peer, named by `peers` (`go`, `go_tuned`): each row `(metric, stratus,
/// [one figure per peer])` as `<metric>_stratus`, `<metric>_<peer>` and
/// `<metric>_ratio_stratus_over_<peer>` for each peer (below 1 = Stratus
/// better).
pub(crate) fn write_against_peers(
    name: &str,
    leading: &[(&str, f64)],
    peers: &[&str],
    rows: &[(&str, f64, Vec<f64>)],
    size: &str,
) -> Result<(), BoxError> {
    let mut metrics: Vec<(String, f64)> =
        leading.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
    for (metric, s, figures) in rows {
        metrics.push((format!("{metric}_stratus"), *s));
        for (peer, g) in peers.iter().zip(figures) {
            metrics.push((format!("{metric}_{peer}"), *g));
            metrics.push((format!("{metric}_ratio_stratus_over_{peer}"), s / g));
        }
    }
    let metrics: Vec<(&str, f64)> = metrics.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    write_results(
        name,
        &metrics,
        &format!("{size}; ratio = Stratus over Go, below 1 = Stratus better"),
    )
}

/// Print `metrics` as a table and write them to `target/bench/<name>.json`;
/// `ratios` says how the ratios among them read.
pub(crate) fn write_results(
    name: &str,
    metrics: &[(&str, f64)],
    ratios: &str,
) -> Result<(), BoxError> {
    let out: BTreeMap<&str, f64> = metrics.iter().copied().collect();
    println!("{:<44} {:>16}", "metric", "value");
    for (k, v) in metrics {
        println!("{k:<44} {v:>16.3}");
    }
    std::fs::create_dir_all("target/bench")?;
    let path = format!("target/bench/{name}.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&out)?)?;
    println!("\nwrote {path} ({ratios})");
    Ok(())
}

/// `--flag N` pairs, each value a whole number (the options of `bench
/// failover` and `soak`).
pub(crate) fn number_flags(args: &[String]) -> Result<Vec<(&str, u64)>, String> {
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
pub(crate) fn build_binaries(release: bool, packages: &[&str]) -> Result<PathBuf, BoxError> {
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
pub(crate) fn process_cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after ')';
    // utime and stime are fields 14 and 15 of the line: 12 and 13 there.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// Stop a benchmark's child process: SIGTERM, then SIGKILL after 10 s.
pub(crate) fn stop_child(mut child: std::process::Child) {
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
pub(crate) fn process_rss_bytes(pid: &str) -> Option<f64> {
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
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}
