//! The kubelet stats summary (`stats/v1alpha1`), as `/stats/summary` serves
//! it. `k8s-openapi` does not carry these types.
//!
//! Field names, order and omission rules follow the kubelet's JSON exactly:
//! optional fields are left out when absent, and a missing timestamp is
//! written as `null` (Go's zero `metav1.Time`).

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use crate::Result;

/// Serves the stats summary (Go: `GetStatsSummary`).
#[async_trait]
pub trait StatsSummary: Send + Sync {
    /// The node's and its pods' current stats.
    async fn stats_summary(&self) -> Result<Summary>;
}

/// The top-level summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Node-level stats.
    pub node: NodeStats,
    /// Per-pod stats.
    pub pods: Vec<PodStats>,
}

/// Node-level stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    /// The node's name.
    pub node_name: String,
    /// System daemons tracked as containers (`kubelet`, `runtime`, `misc`, `pods`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    /// When collection of node stats (re)started.
    pub start_time: Option<Time>,
    /// CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// IO pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    /// Network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// The root filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    /// The container runtime's filesystems.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    /// Process limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
    /// Swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// Process limits of the OS.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RlimitStats {
    /// When these stats were taken.
    pub time: Option<Time>,
    /// The maximum number of processes (threads).
    #[serde(rename = "maxpid", default, skip_serializing_if = "Option::is_none")]
    pub max_pid: Option<i64>,
    /// The number of running processes (threads).
    #[serde(rename = "curproc", default, skip_serializing_if = "Option::is_none")]
    pub num_of_running_processes: Option<i64>,
}

/// The container runtime's filesystems.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// Where images are stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
    /// Where writable layers are stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_fs: Option<FsStats>,
}

/// Process counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    /// The number of processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

/// Pod-level stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    /// The pod.
    pub pod_ref: PodReference,
    /// When collection of pod stats (re)started.
    pub start_time: Option<Time>,
    /// The pod's containers.
    pub containers: Vec<ContainerStats>,
    /// CPU of the whole pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory of the whole pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// IO pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    /// Network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// Volumes.
    #[serde(rename = "volume", default, skip_serializing_if = "Vec::is_empty")]
    pub volume_stats: Vec<VolumeStats>,
    /// Ephemeral storage of containers and emptyDir volumes.
    #[serde(
        rename = "ephemeral-storage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ephemeral_storage: Option<FsStats>,
    /// Processes.
    #[serde(
        rename = "process_stats",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub process_stats: Option<ProcessStats>,
    /// Swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// Container-level stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    /// The container's name.
    pub name: String,
    /// When collection (re)started.
    pub start_time: Option<Time>,
    /// CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// IO pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    /// Accelerators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accelerators: Vec<AcceleratorStats>,
    /// The writable layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    /// Log files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
    /// User-defined metrics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_defined_metrics: Vec<UserDefinedMetric>,
    /// Swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
}

/// A reference to a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodReference {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
}

/// Stats of one network interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    /// The interface name.
    pub name: String,
    /// Bytes received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    /// Receive errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_errors: Option<u64>,
    /// Bytes sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    /// Send errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_errors: Option<u64>,
}

/// Network stats: the default interface inline, plus every interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkStats {
    /// When these stats were taken.
    pub time: Option<Time>,
    /// The default interface.
    #[serde(flatten)]
    pub default_interface: InterfaceStats,
    /// All interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceStats>,
}

/// Pressure-stall information for one kind of stall.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiData {
    /// Total stall time, in microseconds.
    pub total: u64,
    /// Average over 10 s, in percent.
    pub avg10: f64,
    /// Average over 60 s, in percent.
    pub avg60: f64,
    /// Average over 300 s, in percent.
    pub avg300: f64,
}

/// Pressure-stall information.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiStats {
    /// Time all non-idle tasks stalled.
    pub full: PsiData,
    /// Time at least one task stalled.
    pub some: PsiData,
}

/// CPU stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    /// When these stats were taken.
    pub time: Option<Time>,
    /// Usage over the sample window, in nanocores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    /// Cumulative usage, in core-nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
    /// CPU pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// Memory stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// When these stats were taken.
    pub time: Option<Time>,
    /// Limit minus working set; absent without a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Total memory in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    /// The working set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    /// Anonymous and swap-cache memory.
    #[serde(rename = "rssBytes", default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Minor page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    /// Major page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
    /// Memory pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// IO stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoStats {
    /// When these stats were taken.
    pub time: Option<Time>,
    /// IO pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// Swap stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapStats {
    /// When these stats were taken.
    pub time: Option<Time>,
    /// Swap limit minus usage; absent without a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_available_bytes: Option<u64>,
    /// Swap in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_usage_bytes: Option<u64>,
}

/// Accelerator stats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorStats {
    /// Make (nvidia, amd, ...).
    pub make: String,
    /// Model.
    pub model: String,
    /// ID.
    pub id: String,
    /// Total memory, in bytes.
    pub memory_total: u64,
    /// Used memory, in bytes.
    pub memory_used: u64,
    /// Busy percentage over the last sample period.
    pub duty_cycle: u64,
}

/// A reference to a PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PvcReference {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
}

/// Volume health.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeHealthStats {
    /// The volume is not operating normally.
    pub abnormal: bool,
}

/// Volume stats: filesystem stats inline, plus the volume's identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStats {
    /// Filesystem usage.
    #[serde(flatten)]
    pub fs: FsStats,
    /// The volume's name in the pod.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The claim, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc_ref: Option<PvcReference>,
    /// Health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_health_stats: Option<VolumeHealthStats>,
}

/// Filesystem stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// When these stats were taken.
    pub time: Option<Time>,
    /// Available bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Capacity in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// Bytes used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// Free inodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    /// Total inodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    /// Used inodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

/// How a user-defined metric is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserDefinedMetricType {
    /// An instantaneous value.
    Gauge,
    /// A value that only increases.
    Cumulative,
    /// A rate over a period.
    Delta,
}

/// A metric exposed by a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserDefinedMetric {
    /// Name.
    pub name: String,
    /// Type.
    #[serde(rename = "type")]
    pub type_: UserDefinedMetricType,
    /// Display units.
    pub units: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// When the value was taken.
    pub time: Option<Time>,
    /// The value.
    pub value: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Option<Time> {
        Some(Time(s.parse().unwrap()))
    }

    #[test]
    fn serializes_like_the_kubelet() {
        let summary = Summary {
            node: NodeStats {
                node_name: "vk-1".into(),
                start_time: t("2026-01-02T03:04:05Z"),
                cpu: Some(CpuStats {
                    time: t("2026-01-02T03:04:06Z"),
                    usage_nano_cores: Some(1_500_000),
                    usage_core_nano_seconds: Some(42),
                    psi: None,
                }),
                network: Some(NetworkStats {
                    time: t("2026-01-02T03:04:06Z"),
                    default_interface: InterfaceStats {
                        name: "eth0".into(),
                        rx_bytes: Some(10),
                        ..Default::default()
                    },
                    interfaces: vec![],
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "web".into(),
                    namespace: "default".into(),
                    uid: "u1".into(),
                },
                start_time: None,
                containers: vec![ContainerStats {
                    name: "app".into(),
                    ..Default::default()
                }],
                ephemeral_storage: Some(FsStats {
                    used_bytes: Some(7),
                    ..Default::default()
                }),
                volume_stats: vec![VolumeStats {
                    fs: FsStats {
                        used_bytes: Some(1),
                        ..Default::default()
                    },
                    name: "data".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let json = serde_json::to_string(&summary).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"node":{"nodeName":"vk-1","startTime":"2026-01-02T03:04:05Z","#,
                r#""cpu":{"time":"2026-01-02T03:04:06Z","usageNanoCores":1500000,"usageCoreNanoSeconds":42},"#,
                r#""network":{"time":"2026-01-02T03:04:06Z","name":"eth0","rxBytes":10}},"#,
                r#""pods":[{"podRef":{"name":"web","namespace":"default","uid":"u1"},"startTime":null,"#,
                r#""containers":[{"name":"app","startTime":null}],"#,
                r#""volume":[{"time":null,"usedBytes":1,"name":"data"}],"#,
                r#""ephemeral-storage":{"time":null,"usedBytes":7}}]}"#
            )
        );
        let back: Summary = serde_json::from_str(&json).unwrap();
        assert_eq!(back, summary);
    }

    #[test]
    fn parses_kubelet_output_with_unknown_fields() {
        let json = r#"{"node":{"nodeName":"n","startTime":"2026-01-01T00:00:00Z",
            "rlimit":{"time":"2026-01-01T00:00:00Z","maxpid":4194304,"curproc":300},
            "futureField":1},
            "pods":[{"podRef":{"name":"p","namespace":"ns","uid":"u"},"startTime":"2026-01-01T00:00:00Z",
            "containers":[],"process_stats":{"process_count":3},
            "memory":{"time":"2026-01-01T00:00:00Z","workingSetBytes":100,"rssBytes":50,
            "psi":{"full":{"total":1,"avg10":0.5,"avg60":0,"avg300":0},"some":{"total":2,"avg10":0,"avg60":0,"avg300":0}}}}]}"#;
        let summary: Summary = serde_json::from_str(json).unwrap();
        assert_eq!(
            summary.node.rlimit.as_ref().unwrap().max_pid,
            Some(4_194_304)
        );
        let pod = &summary.pods[0];
        assert_eq!(pod.process_stats.as_ref().unwrap().process_count, Some(3));
        let memory = pod.memory.as_ref().unwrap();
        assert_eq!(memory.rss_bytes, Some(50));
        assert_eq!(memory.psi.as_ref().unwrap().some.total, 2);
    }
}
