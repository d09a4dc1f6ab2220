//! The stats summary and resource metrics of the offloaded pods, read from
//! the remote kubelets through the remote API server's node proxy
//! (`/api/v1/nodes/<node>/proxy/stats/summary`), each pod renamed to its
//! home pod; the node's CPU and memory are the sums of its pods'.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{
    CpuStats, MemoryStats, NodeStats, PodError, PodReference, ResourceMetrics, Result,
    StatsSummary, Summary, render_resource_metrics,
};

use crate::KubernetesProvider;
use crate::dependencies::remote_error;

impl KubernetesProvider {
    /// Remote node → (remote namespace, remote name) → home reference.
    fn placements(&self) -> HashMap<String, HashMap<(String, String), PodReference>> {
        let mut by_node: HashMap<String, HashMap<(String, String), PodReference>> = HashMap::new();
        let pods = self
            .inner
            .pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for t in pods.values() {
            let Some(node) = t
                .remote
                .as_ref()
                .and_then(|r| r.spec.as_ref()?.node_name.clone())
            else {
                continue;
            };
            by_node.entry(node).or_default().insert(
                (t.remote_namespace.clone(), t.remote_name.clone()),
                PodReference {
                    name: t.identity.name.clone(),
                    namespace: t.identity.namespace.clone(),
                    uid: t.identity.uid.clone(),
                },
            );
        }
        by_node
    }
}

#[async_trait]
impl StatsSummary for KubernetesProvider {
    async fn stats_summary(&self) -> Result<Summary> {
        let placements = self.placements();
        let mut summary = Summary {
            node: NodeStats {
                node_name: self.inner.node_name.clone(),
                start_time: None,
                ..Default::default()
            },
            pods: Vec::new(),
        };
        let nodes: BTreeSet<&String> = placements.keys().collect();
        for node in nodes {
            let request = http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary"))
                .body(Vec::new())
                .map_err(PodError::other)?;
            let remote: Summary = match self.inner.remote.request(request).await {
                Ok(s) => s,
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 501 => continue,
                Err(e) => {
                    return Err(remote_error(e).context(format!("stats of remote node {node}")));
                }
            };
            let ours = &placements[node];
            for mut pod in remote.pods {
                let key = (pod.pod_ref.namespace.clone(), pod.pod_ref.name.clone());
                if let Some(home) = ours.get(&key) {
                    pod.pod_ref = home.clone();
                    summary.pods.push(pod);
                }
            }
        }
        let now = Time(jiff::Timestamp::now());
        let cpu: u64 = summary
            .pods
            .iter()
            .filter_map(|p| p.cpu.as_ref()?.usage_nano_cores)
            .sum();
        let cpu_total: u64 = summary
            .pods
            .iter()
            .filter_map(|p| p.cpu.as_ref()?.usage_core_nano_seconds)
            .sum();
        let memory: u64 = summary
            .pods
            .iter()
            .filter_map(|p| p.memory.as_ref()?.working_set_bytes)
            .sum();
        summary.node.cpu = Some(CpuStats {
            time: Some(now.clone()),
            usage_nano_cores: Some(cpu),
            usage_core_nano_seconds: Some(cpu_total),
            ..Default::default()
        });
        summary.node.memory = Some(MemoryStats {
            time: Some(now),
            working_set_bytes: Some(memory),
            usage_bytes: Some(memory),
            ..Default::default()
        });
        Ok(summary)
    }
}

#[async_trait]
impl ResourceMetrics for KubernetesProvider {
    async fn resource_metrics(&self) -> Result<String> {
        Ok(render_resource_metrics(&self.stats_summary().await?))
    }
}
