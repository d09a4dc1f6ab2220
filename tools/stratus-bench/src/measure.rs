//! What every benchmark measures with: the harness server it runs
//! against, a process's CPU time and resident memory, its results' JSON.

use std::collections::BTreeMap;

use stratus_testing::ApiServer;

use stratus_cluster::BoxError;

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

/// Print `metrics` as a table and write them to `target/bench/<name>.json`
/// (and their ratios as `target/bench/<name>-ratios.svg`); `ratios` says
/// how the ratios among them read.
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
    let figures: BTreeMap<String, f64> = out.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
    draw_ratios(name, &figures)
}

/// Draw the ratios among `figures` as `target/bench/<name>-ratios.svg`
/// (nothing when there are none).
pub(crate) fn draw_ratios(name: &str, figures: &BTreeMap<String, f64>) -> Result<(), BoxError> {
    if let Some(svg) = crate::plot::ratios(name, figures)? {
        let plot = format!("target/bench/{name}-ratios.svg");
        std::fs::write(&plot, svg)?;
        println!("wrote {plot}");
    }
    Ok(())
}

pub(crate) use stratus_cluster::host::{
    build_binaries, number_flags, process_cpu_seconds, process_rss_bytes, rss_bytes, stop_child,
};
