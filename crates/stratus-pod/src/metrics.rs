//! Resource metrics in the Prometheus text format, as the kubelet serves
//! them at `/metrics/resource`.

use std::fmt::Write as _;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::{Result, Summary};

/// Serves resource metrics (Go: `GetMetricsResource`).
///
/// A provider that already serves a [`Summary`] can answer with
/// [`render_resource_metrics`].
#[async_trait]
pub trait ResourceMetrics: Send + Sync {
    /// The metrics in the Prometheus text exposition format (version 0.0.4).
    async fn resource_metrics(&self) -> Result<String>;
}

/// Label pairs, value and optional timestamp (ms) of one sample.
type Sample<'a> = (Vec<(&'static str, &'a str)>, f64, Option<i64>);

struct Family<'a> {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<Sample<'a>>,
}

fn millis(t: &Option<Time>) -> Option<i64> {
    t.as_ref().map(|t| t.0.as_millisecond())
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Render the kubelet's resource metrics from a stats summary: node, pod and
/// container CPU (`*_cpu_usage_seconds_total`), working-set memory
/// (`*_memory_working_set_bytes`), swap (`*_swap_usage_bytes`), container
/// start times, and `scrape_error` / `resource_scrape_error` (0). Samples carry
/// the stats' timestamps in milliseconds, as the kubelet's do. Metrics whose
/// source field is absent are left out.
///
/// ```
/// use stratus_pod::{render_resource_metrics, CpuStats, NodeStats, Summary};
///
/// let summary = Summary {
///     node: NodeStats {
///         node_name: "vk".into(),
///         cpu: Some(CpuStats { usage_core_nano_seconds: Some(2_500_000_000), ..Default::default() }),
///         ..Default::default()
///     },
///     pods: vec![],
/// };
/// let text = render_resource_metrics(&summary);
/// assert!(text.contains("# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total 2.5\n"));
/// assert!(text.contains("scrape_error 0\n"));
/// ```
pub fn render_resource_metrics(summary: &Summary) -> String {
    let mut node_cpu = Family {
        name: "node_cpu_usage_seconds_total",
        help: "Cumulative cpu time consumed by the node in core-seconds",
        kind: "counter",
        samples: vec![],
    };
    let mut node_mem = Family {
        name: "node_memory_working_set_bytes",
        help: "Current working set of the node in bytes",
        kind: "gauge",
        samples: vec![],
    };
    let mut node_swap = Family {
        name: "node_swap_usage_bytes",
        help: "Current swap usage of the node in bytes. Reported only on non-windows systems",
        kind: "gauge",
        samples: vec![],
    };
    let mut pod_cpu = Family {
        name: "pod_cpu_usage_seconds_total",
        help: "Cumulative cpu time consumed by the pod in core-seconds",
        kind: "counter",
        samples: vec![],
    };
    let mut pod_mem = Family {
        name: "pod_memory_working_set_bytes",
        help: "Current working set of the pod in bytes",
        kind: "gauge",
        samples: vec![],
    };
    let mut pod_swap = Family {
        name: "pod_swap_usage_bytes",
        help: "Current amount of the pod swap usage in bytes. Reported only on non-windows systems",
        kind: "gauge",
        samples: vec![],
    };
    let mut ctr_cpu = Family {
        name: "container_cpu_usage_seconds_total",
        help: "Cumulative cpu time consumed by the container in core-seconds",
        kind: "counter",
        samples: vec![],
    };
    let mut ctr_mem = Family {
        name: "container_memory_working_set_bytes",
        help: "Current working set of the container in bytes",
        kind: "gauge",
        samples: vec![],
    };
    let mut ctr_swap = Family {
        name: "container_swap_usage_bytes",
        help: "Current amount of the container swap usage in bytes. Reported only on non-windows systems",
        kind: "gauge",
        samples: vec![],
    };
    let mut ctr_start = Family {
        name: "container_start_time_seconds",
        help: "Start time of the container since unix epoch in seconds",
        kind: "gauge",
        samples: vec![],
    };

    let node = &summary.node;
    if let Some(cpu) = &node.cpu
        && let Some(ns) = cpu.usage_core_nano_seconds
    {
        node_cpu
            .samples
            .push((vec![], ns as f64 / 1e9, millis(&cpu.time)));
    }
    if let Some(mem) = &node.memory
        && let Some(ws) = mem.working_set_bytes
    {
        node_mem
            .samples
            .push((vec![], ws as f64, millis(&mem.time)));
    }
    if let Some(swap) = &node.swap
        && let Some(used) = swap.swap_usage_bytes
    {
        node_swap
            .samples
            .push((vec![], used as f64, millis(&swap.time)));
    }
    for pod in &summary.pods {
        let ns = pod.pod_ref.namespace.as_str();
        let name = pod.pod_ref.name.as_str();
        let pod_labels = || vec![("namespace", ns), ("pod", name)];
        if let Some(cpu) = &pod.cpu
            && let Some(v) = cpu.usage_core_nano_seconds
        {
            pod_cpu
                .samples
                .push((pod_labels(), v as f64 / 1e9, millis(&cpu.time)));
        }
        if let Some(mem) = &pod.memory
            && let Some(v) = mem.working_set_bytes
        {
            pod_mem
                .samples
                .push((pod_labels(), v as f64, millis(&mem.time)));
        }
        if let Some(swap) = &pod.swap
            && let Some(v) = swap.swap_usage_bytes
        {
            pod_swap
                .samples
                .push((pod_labels(), v as f64, millis(&swap.time)));
        }
        for c in &pod.containers {
            let labels = || {
                vec![
                    ("container", c.name.as_str()),
                    ("namespace", ns),
                    ("pod", name),
                ]
            };
            if let Some(cpu) = &c.cpu
                && let Some(v) = cpu.usage_core_nano_seconds
            {
                ctr_cpu
                    .samples
                    .push((labels(), v as f64 / 1e9, millis(&cpu.time)));
            }
            if let Some(mem) = &c.memory
                && let Some(v) = mem.working_set_bytes
            {
                ctr_mem
                    .samples
                    .push((labels(), v as f64, millis(&mem.time)));
            }
            if let Some(swap) = &c.swap
                && let Some(v) = swap.swap_usage_bytes
            {
                ctr_swap
                    .samples
                    .push((labels(), v as f64, millis(&swap.time)));
            }
            if let Some(start) = &c.start_time {
                let secs = start.0.as_millisecond() as f64 / 1000.0;
                ctr_start.samples.push((labels(), secs, None));
            }
        }
    }

    let mut out = String::new();
    for family in [
        &ctr_cpu, &ctr_mem, &ctr_start, &ctr_swap, &node_cpu, &node_mem, &node_swap, &pod_cpu,
        &pod_mem, &pod_swap,
    ] {
        if family.samples.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} [STABLE] {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
        for (labels, value, ts) in &family.samples {
            out.push_str(family.name);
            if !labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape_label(v));
                }
                out.push('}');
            }
            let _ = write!(out, " {}", format_value(*value));
            if let Some(ts) = ts {
                let _ = write!(out, " {ts}");
            }
            out.push('\n');
        }
    }
    for name in ["resource_scrape_error", "scrape_error"] {
        let _ = writeln!(
            out,
            "# HELP {name} [STABLE] 1 if there was an error while getting container metrics, 0 otherwise"
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} 0");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContainerStats, CpuStats, MemoryStats, PodReference, PodStats};

    #[test]
    fn renders_pods_and_containers_with_timestamps() {
        let time = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
        let summary = Summary {
            node: Default::default(),
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "we\"b".into(),
                    namespace: "default".into(),
                    uid: "u".into(),
                },
                memory: Some(MemoryStats {
                    time: time.clone(),
                    working_set_bytes: Some(1024),
                    ..Default::default()
                }),
                containers: vec![ContainerStats {
                    name: "app".into(),
                    start_time: time.clone(),
                    cpu: Some(CpuStats {
                        time: time.clone(),
                        usage_core_nano_seconds: Some(1_000_000_000),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let text = render_resource_metrics(&summary);
        assert!(text.contains(
            "container_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"we\\\"b\"} 1 1767225600000\n"
        ), "{text}");
        assert!(text.contains("pod_memory_working_set_bytes{namespace=\"default\",pod=\"we\\\"b\"} 1024 1767225600000\n"));
        assert!(text.contains("container_start_time_seconds{container=\"app\",namespace=\"default\",pod=\"we\\\"b\"} 1767225600\n"));
        assert!(!text.contains("node_cpu_usage_seconds_total"));
    }
}
