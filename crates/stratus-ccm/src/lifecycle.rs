//! The cloud-node-lifecycle controller (Go's semantics, plus a safeguard):
//!
//! - a Ready node loses the `node.cloudprovider.kubernetes.io/shutdown`
//!   taint;
//! - a node that is not Ready and whose instance is gone is deleted, with
//!   the `DeletingNode` event (`DeletingNodeFailed` when the delete fails).
//!   Only an explicit [`InstanceState::Gone`] answer counts: a failed cloud
//!   call, even a "not found" error, skips the node this pass, as Go's V2
//!   path does;
//! - a node that is not Ready and whose instance is shut down gets the
//!   shutdown taint (`NoSchedule`).
//!
//! Only not-Ready nodes cost cloud calls, batched when the provider can
//! batch. Beyond Go, "gone" must be seen on `gone_confirmations` consecutive
//! passes (default 2; Go deletes on the first) and the node must be older
//! than `min_node_age`, so one transient "not found" from the cloud API never
//! deletes a node.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use stratus_runtime::controller::Controller;
use stratus_runtime::informer::SharedInformer;
use stratus_runtime::workqueue::{Action, WorkQueue, default_controller_rate_limiter};

use crate::context::{Context, Part};
use crate::metrics::CcmMetrics;
use crate::names::events;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{DeleteParams, Patch};
use kube_runtime::reflector::Store;
use serde_json::json;
use stratus_cloud::names::{controllers, taints};
use stratus_cloud::{CloudError, CloudProvider, InstanceState, check_batch_len};
use stratus_runtime::events::EventType;
use stratus_runtime::health::ControllerHealth;
use tokio::sync::watch;

/// The one key of the controller's queue: a monitoring pass.
const PASS: &str = "nodes";

/// Settings of the lifecycle controller.
#[derive(Debug, Clone)]
pub struct LifecycleConfig {
    /// How often nodes are checked (`--node-monitor-period`, 5 s).
    pub monitor_period: Duration,
    /// Consecutive passes that must find an instance gone before its Node is
    /// deleted (Go: 1).
    pub gone_confirmations: u32,
    /// Nodes younger than this are never deleted.
    pub min_node_age: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            monitor_period: Duration::from_secs(5),
            gone_confirmations: 2,
            min_node_age: Duration::ZERO,
        }
    }
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether `taint` is the controller's shutdown taint: key and effect, as
/// Go's `MatchTaint` (a taint of that key with another effect, set by
/// someone else, is left alone).
fn is_shutdown_taint(taint: &Taint) -> bool {
    taint.key == taints::SHUTDOWN && taint.effect == taints::EFFECT_NO_SCHEDULE
}

fn has_shutdown_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(is_shutdown_taint))
}

fn age(node: &Node) -> Duration {
    node.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| k8s_openapi::jiff::Timestamp::now().duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// The cloud-node-lifecycle controller.
pub struct LifecycleController {
    ctx: Context,
    config: LifecycleConfig,
    gone_seen: HashMap<String, u32>,
}

impl std::fmt::Debug for LifecycleController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LifecycleController {
    /// A controller reading `nodes` for `cloud`, which must offer
    /// instances (V2, or the legacy Instances and Zones, adapted by
    /// [`with_legacy_instances`](stratus_cloud::legacy::with_legacy_instances)).
    pub fn new(
        client: kube::Client,
        nodes: &SharedInformer<Node>,
        cloud: Arc<dyn CloudProvider>,
        config: LifecycleConfig,
    ) -> Self {
        // Legacy Instances and Zones answer for InstancesV2 (as in Go).
        let cloud = stratus_cloud::legacy::with_legacy_instances(cloud);
        let component = controllers::CLOUD_NODE_LIFECYCLE.event_component;
        Self {
            ctx: Context::new(client, nodes, cloud, component),
            config,
            gone_seen: HashMap::new(),
        }
    }

    /// Run until `stop` becomes true: a pass once the Node cache holds
    /// its first list, then each one a period after the previous one
    /// finished (sliding, as Go's `wait.UntilWithContext`).
    pub async fn run(self, stop: watch::Receiver<bool>) {
        if self.ctx.cloud.instances_v2().is_none() {
            tracing::warn!(
                "the cloud provider offers neither InstancesV2 nor Instances; the lifecycle controller does not start"
            );
            return;
        }
        let period = self.config.monitor_period;
        let controller = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
            .health(self.ctx.health.clone())
            .passes_every(period)
            .reconcile_metrics(
                self.ctx
                    .metrics
                    .reconciles(controllers::CLOUD_NODE_LIFECYCLE),
            )
            .watches(&self.ctx.nodes, |_: &Node| None);
        controller.queue().add(PASS);
        let store = self.ctx.nodes.store().clone();
        let this = Arc::new(tokio::sync::Mutex::new(self));
        let reconcile = move |_: &'static str| {
            let (this, store) = (this.clone(), store.clone());
            async move {
                this.lock().await.pass(&store).await;
                Ok::<_, Infallible>(Action::RequeueAfter(period))
            }
        };
        controller.run(reconcile, stop).await;
    }

    /// One monitoring pass.
    async fn pass(&mut self, store: &Store<Node>) {
        let nodes: Vec<Node> = store.state().iter().map(|n| (**n).clone()).collect();
        let mut not_ready = Vec::new();
        for node in nodes {
            if ready(&node) {
                self.gone_seen
                    .remove(node.metadata.name.as_deref().unwrap_or_default());
                if has_shutdown_taint(&node) {
                    self.set_shutdown_taint(&node, false).await;
                }
            } else {
                not_ready.push(node);
            }
        }
        if not_ready.is_empty() {
            return;
        }
        let states = self.states(&not_ready).await;
        for (node, state) in not_ready.iter().zip(states) {
            let name = node.metadata.name.clone().unwrap_or_default();
            match state {
                Ok(InstanceState::Gone) => {
                    let seen = self.gone_seen.entry(name.clone()).or_insert(0);
                    *seen += 1;
                    if *seen >= self.config.gone_confirmations.max(1)
                        && age(node) >= self.config.min_node_age
                    {
                        self.delete(node).await;
                        self.gone_seen.remove(&name);
                    }
                }
                Ok(InstanceState::ShutDown) => {
                    self.gone_seen.remove(&name);
                    if !has_shutdown_taint(node) {
                        self.set_shutdown_taint(node, true).await;
                    }
                }
                Ok(InstanceState::Running | InstanceState::Unknown) => {
                    self.gone_seen.remove(&name);
                }
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "could not check the instance; skipping the node this pass")
                }
            }
        }
    }

    async fn states(&self, nodes: &[Node]) -> Vec<Result<InstanceState, CloudError>> {
        let Some(instances) = self.ctx.cloud.instances_v2() else {
            return nodes
                .iter()
                .map(|_| Err(CloudError::not_implemented()))
                .collect();
        };
        if let Some(batch) = instances.batch() {
            let mut out = Vec::with_capacity(nodes.len());
            for chunk in nodes.chunks(batch.max_batch_size().max(1)) {
                let answers = self
                    .ctx
                    .metrics
                    .cloud("instance_state_batch", batch.instance_state_batch(chunk))
                    .await;
                match answers {
                    Ok(answers) if check_batch_len(chunk.len(), &answers).is_ok() => {
                        out.extend(answers)
                    }
                    Ok(_) => out.extend(chunk.iter().map(|_| {
                        Err(CloudError::invalid_input(
                            "batch answer of the wrong length",
                        ))
                    })),
                    Err(e) => out.extend(
                        chunk
                            .iter()
                            .map(|_| Err(CloudError::new(e.kind(), e.to_string()))),
                    ),
                }
            }
            return out;
        }
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            let answer = self
                .ctx
                .metrics
                .cloud("instance_state", instances.instance_state(node))
                .await;
            out.push(answer);
        }
        out
    }

    async fn delete(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let reference = crate::node::reference(node);
        tracing::info!(node = %name, "deleting the node: its instance no longer exists in the cloud");
        self.ctx
            .recorder
            .record(
                &reference,
                EventType::Normal,
                events::DELETING_NODE,
                &format!("Deleting node {name} because it does not exist in the cloud provider"),
            )
            .await;
        let nodes = self.ctx.api();
        let params = DeleteParams {
            preconditions: node
                .metadata
                .uid
                .clone()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
            ..Default::default()
        };
        if let Err(e) = nodes.delete(&name, &params).await {
            tracing::warn!(node = %name, error = %e, "could not delete the node");
            self.ctx
                .recorder
                .record(
                    &reference,
                    EventType::Warning,
                    events::DELETING_NODE_FAILED,
                    &format!("Error deleting node {name}: {e}"),
                )
                .await;
        }
    }

    async fn set_shutdown_taint(&self, node: &Node, present: bool) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut list: Vec<Taint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !is_shutdown_taint(t))
            .collect();
        if present {
            list.push(Taint {
                key: taints::SHUTDOWN.into(),
                effect: taints::EFFECT_NO_SCHEDULE.into(),
                ..Default::default()
            });
        }
        let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": list}});
        self.ctx
            .patch_or_warn(
                &name,
                Part::Object,
                Patch::Merge(patch),
                "update the shutdown taint",
            )
            .await;
    }
}

impl crate::Instrumented for LifecycleController {
    fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth) {
        self.ctx.instruments()
    }
}
