//! Stats from `/proc`: each running container's process group (CPU time
//! and resident memory of every process in it), the pods they make up, and
//! the node (the host's `/proc/stat` and `/proc/meminfo`), served as the
//! kubelet's stats summary and `/metrics/resource`.

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{
    ContainerStats, CpuStats, MemoryStats, NodeStats, PodReference, PodStats, Summary,
};

/// `/proc` reports CPU time in ticks of 1/100 s (USER_HZ).
const NANOS_PER_TICK: u64 = 10_000_000;
/// The page size `/proc/<pid>/statm` counts in.
const PAGE: u64 = 4096;

/// CPU time (core-nanoseconds) and resident bytes of one process group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) cpu_nanos: u64,
    pub(crate) rss_bytes: u64,
}

/// The usage of every process group, by group ID, from one scan of `/proc`.
pub(crate) fn groups() -> HashMap<i32, Usage> {
    let mut out: HashMap<i32, Usage> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((group, cpu)) = parse_stat(&stat) else {
            continue;
        };
        let rss = std::fs::read_to_string(format!("/proc/{pid}/statm"))
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
            * PAGE;
        let usage = out.entry(group).or_default();
        usage.cpu_nanos += cpu;
        usage.rss_bytes += rss;
    }
    out
}

/// The process group and the CPU time (user + system, core-nanoseconds)
/// of one `/proc/<pid>/stat` line.
fn parse_stat(stat: &str) -> Option<(i32, u64)> {
    // The command name may hold spaces and parentheses: fields resume after
    // the last ')'. Then: state(3) ppid(4) pgrp(5) ... utime(14) stime(15).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let group = fields.get(2)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((group, (utime + stime) * NANOS_PER_TICK))
}

/// The host's cumulative CPU time (core-nanoseconds) and memory in use.
fn host() -> (Option<u64>, Option<u64>) {
    let cpu = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("cpu "))?;
        // user nice system (idle iowait not counted) irq softirq steal
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        let busy = [0usize, 1, 2, 5, 6, 7]
            .iter()
            .filter_map(|i| v.get(*i))
            .sum::<u64>();
        Some(busy * NANOS_PER_TICK)
    });
    let memory = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let field = |name: &str| -> Option<u64> {
            let line = s.lines().find(|l| l.starts_with(name))?;
            line.split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
                .map(|kb| kb * 1024)
        };
        Some(field("MemTotal:")?.saturating_sub(field("MemAvailable:")?))
    });
    (cpu, memory)
}

/// Turns cumulative CPU times into rates between two summaries.
#[derive(Default)]
pub(crate) struct Rates {
    last: HashMap<String, (Instant, u64)>,
}

impl Rates {
    /// Nanocores of `id` since its last sample (none the first time).
    pub(crate) fn nano_cores(&mut self, id: &str, cumulative: u64, now: Instant) -> Option<u64> {
        let previous = self.last.insert(id.to_owned(), (now, cumulative));
        let (then, before) = previous?;
        let seconds = now.duration_since(then).as_secs_f64();
        (seconds > 0.0).then(|| (cumulative.saturating_sub(before) as f64 / seconds) as u64)
    }

    /// Forget ids not in `live` (ended containers).
    pub(crate) fn retain(&mut self, live: &std::collections::HashSet<String>) {
        self.last.retain(|id, _| live.contains(id));
    }
}

fn cpu(time: &Time, cumulative: u64, rate: Option<u64>) -> CpuStats {
    CpuStats {
        time: Some(time.clone()),
        usage_nano_cores: rate,
        usage_core_nano_seconds: Some(cumulative),
        ..Default::default()
    }
}

fn memory(time: &Time, bytes: u64) -> MemoryStats {
    MemoryStats {
        time: Some(time.clone()),
        usage_bytes: Some(bytes),
        working_set_bytes: Some(bytes),
        rss_bytes: Some(bytes),
        ..Default::default()
    }
}

/// One running container: its name, start and process group.
pub(crate) struct Running {
    pub(crate) name: String,
    pub(crate) started: Option<Time>,
    pub(crate) group: i32,
}

/// One pod: its reference, start and running containers.
pub(crate) struct PodSample {
    pub(crate) reference: PodReference,
    pub(crate) started: Option<Time>,
    pub(crate) containers: Vec<Running>,
}

/// The summary of `pods` on node `node_name`.
pub(crate) fn summary(node_name: &str, pods: Vec<PodSample>, rates: &mut Rates) -> Summary {
    let now = Instant::now();
    let time = Time(k8s_openapi::jiff::Timestamp::now());
    let usage = groups();
    let mut live = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(pods.len());
    for pod in pods {
        let (mut pod_cpu, mut pod_rate, mut pod_memory) = (0u64, None::<u64>, 0u64);
        let mut containers = Vec::new();
        for c in pod.containers {
            let u = usage.get(&c.group).copied().unwrap_or_default();
            let id = format!(
                "{}/{}/{}/{}",
                pod.reference.namespace, pod.reference.name, c.name, c.group
            );
            let rate = rates.nano_cores(&id, u.cpu_nanos, now);
            live.insert(id);
            pod_cpu += u.cpu_nanos;
            pod_memory += u.rss_bytes;
            pod_rate = match (pod_rate, rate) {
                (Some(a), Some(b)) => Some(a + b),
                (None, r) | (r, None) => r,
            };
            containers.push(ContainerStats {
                name: c.name,
                start_time: c.started,
                cpu: Some(cpu(&time, u.cpu_nanos, rate)),
                memory: Some(memory(&time, u.rss_bytes)),
                ..Default::default()
            });
        }
        out.push(PodStats {
            pod_ref: pod.reference,
            start_time: pod.started,
            containers,
            cpu: Some(cpu(&time, pod_cpu, pod_rate)),
            memory: Some(memory(&time, pod_memory)),
            ..Default::default()
        });
    }
    let (host_cpu, host_memory) = host();
    let node_rate = host_cpu.and_then(|c| rates.nano_cores("node", c, now));
    live.insert("node".into());
    rates.retain(&live);
    Summary {
        node: NodeStats {
            node_name: node_name.to_owned(),
            cpu: host_cpu.map(|c| cpu(&time, c, node_rate)),
            memory: host_memory.map(|m| memory(&time, m)),
            ..Default::default()
        },
        pods: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_command_names() {
        let line = "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 25 5 0 0 20 0 1 0 100 1000 50";
        assert_eq!(parse_stat(line), Some((1234, 30 * NANOS_PER_TICK)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_found_in_its_group() {
        let me = rustix::process::getpgrp().as_raw_nonzero().get();
        let usage = groups();
        assert!(
            usage.get(&me).is_some_and(|u| u.rss_bytes > 0),
            "{:?}",
            usage.get(&me)
        );
    }

    #[test]
    fn rates_need_two_samples() {
        let mut rates = Rates::default();
        let t0 = Instant::now();
        assert_eq!(rates.nano_cores("a", 1_000, t0), None);
        let t1 = t0 + std::time::Duration::from_secs(2);
        assert_eq!(
            rates.nano_cores("a", 1_000 + 2_000_000_000, t1),
            Some(1_000_000_000)
        );
    }
}
