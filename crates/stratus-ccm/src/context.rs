//! What each controller that reads Nodes for the cloud (cloud-node,
//! cloud-node-lifecycle, node-route) holds, and the one Node write they
//! share.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use stratus_cloud::CloudProvider;
use stratus_runtime::events::EventRecorder;
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::informer::SharedInformer;

use crate::metrics::CcmMetrics;

/// A Node controller's client, the shared Node informer it reads, its
/// provider, its event recorder, and where it reports.
pub(crate) struct Context {
    pub(crate) client: kube::Client,
    /// The shared Node informer it reads.
    pub(crate) nodes: SharedInformer<Node>,
    pub(crate) cloud: Arc<dyn CloudProvider>,
    pub(crate) recorder: EventRecorder,
    pub(crate) metrics: CcmMetrics,
    pub(crate) health: ControllerHealth,
}

/// Which part of a Node a patch writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part {
    /// Its metadata and spec.
    Object,
    /// Its status subresource.
    Status,
}

impl Context {
    /// The context of the controller whose events come from `component`,
    /// reporting nowhere until `Instrumented` says where.
    pub(crate) fn new(
        client: kube::Client,
        nodes: &SharedInformer<Node>,
        cloud: Arc<dyn CloudProvider>,
        component: &str,
    ) -> Self {
        let recorder = EventRecorder::new(client.clone(), component);
        Self {
            client,
            nodes: nodes.clone(),
            cloud,
            recorder,
            metrics: CcmMetrics::default(),
            health: ControllerHealth::new(),
        }
    }

    /// The Nodes API.
    pub(crate) fn api(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Patch `part` of Node `name`; a failure is logged as "could not
    /// `what`" and left to the next pass, which writes it again.
    pub(crate) async fn patch_or_warn(
        &self,
        name: &str,
        part: Part,
        patch: Patch<Value>,
        what: &str,
    ) {
        let api = self.api();
        let params = PatchParams::default();
        let written = match part {
            Part::Object => api.patch(name, &params, &patch).await,
            Part::Status => api.patch_status(name, &params, &patch).await,
        };
        if let Err(e) = written {
            tracing::warn!(node = %name, error = %e, "could not {what}");
        }
    }

    /// For `Instrumented`: the metrics and the health.
    pub(crate) fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth) {
        (&mut self.metrics, &mut self.health)
    }
}
