//! Instances: the current interface (Go's `InstancesV2`), the optional batch
//! capability, and the data they return.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::{CloudError, CloudErrorKind, Result};

/// What the cloud knows about a node's instance (Go: `InstanceMetadata`).
///
/// How each field lands on the Node:
///
/// | field | Node |
/// |---|---|
/// | `provider_id` | `spec.providerID`, only when empty (the field is immutable) |
/// | `instance_type` | labels `node.kubernetes.io/instance-type` and `beta.kubernetes.io/instance-type` |
/// | `node_addresses` | `status.addresses` |
/// | `zone` | labels `topology.kubernetes.io/zone` and `failure-domain.beta.kubernetes.io/zone` |
/// | `region` | labels `topology.kubernetes.io/region` and `failure-domain.beta.kubernetes.io/region` |
/// | `additional_labels` | labels, except keys in the `kubernetes.io` / `k8s.io` namespaces, never overwriting an existing key |
///
/// Empty strings mean "unknown" and leave the Node unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceMetadata {
    /// `<provider-name>://<instance-id>`; see [`crate::ProviderId`].
    pub provider_id: String,
    /// The instance type, e.g. `m5.large`.
    pub instance_type: String,
    /// The instance's addresses.
    pub node_addresses: Vec<NodeAddress>,
    /// The zone (failure domain).
    pub zone: String,
    /// The region.
    pub region: String,
    /// Extra labels to set on the Node.
    pub additional_labels: BTreeMap<String, String>,
}

/// The state of a node's instance, in one answer.
///
/// Go answers this with two calls, `InstanceExists` and `InstanceShutdown`.
/// The mapping, as in Go's V2 path:
///
/// | Go | `InstanceState` |
/// |---|---|
/// | `InstanceExists` = false | `Gone` |
/// | `InstanceExists` fails (any error, `InstanceNotFound` too) | the error: the node is skipped this pass |
/// | exists, `InstanceShutdown` = true | `ShutDown` |
/// | exists, `InstanceShutdown` = false or `NotImplemented` | `Running` |
/// | exists, `InstanceShutdown` fails | the error: the node is skipped this pass |
/// | (no counterpart) | `Unknown`: the cloud cannot tell right now; nothing is changed |
///
/// Only an explicit `Gone` answer can lead to the Node being deleted; an
/// error never does, whatever its kind, because an eventually consistent
/// cloud API can answer "not found" for an instance that exists. Stopped or
/// sleeping instances are `ShutDown`, never `Gone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceState {
    /// The instance exists and runs.
    Running,
    /// The instance exists but is stopped or shut down.
    ShutDown,
    /// The instance no longer exists.
    Gone,
    /// The cloud cannot tell (for example, the instance is transitioning).
    Unknown,
}

/// Instances, the current interface (Go: `InstancesV2`).
///
/// Every method receives the whole Node; look at `spec.providerID` first and
/// fall back to the name, labels or annotations only when it is empty.
#[async_trait]
pub trait InstancesV2: Send + Sync {
    /// Whether the node's instance exists. Only `Ok(false)` means it is gone
    /// (the Node may then be deleted); an error of any kind, a
    /// [`CloudErrorKind::NotFound`] one too, makes the lifecycle controller
    /// skip the node this pass, as Go's V2 path does. Must be true for
    /// stopped instances.
    async fn instance_exists(&self, node: &Node) -> Result<bool>;

    /// Whether the node's instance is shut down.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool>;

    /// The node's metadata. `Ok(None)` makes the node controller skip the
    /// node: the uninitialized taint stays and the node is not retried until
    /// it changes or the next informer resync (`--min-resync-period`), as in
    /// Go.
    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>>;

    /// The instance state in one answer. The default calls
    /// [`InstancesV2::instance_exists`] then [`InstancesV2::instance_shutdown`]
    /// and maps the answers as in the table on [`InstanceState`]; override it
    /// when the cloud answers in one call, and answer `Gone` only when the
    /// cloud says for certain that the instance no longer exists.
    async fn instance_state(&self, node: &Node) -> Result<InstanceState> {
        if !self.instance_exists(node).await? {
            return Ok(InstanceState::Gone);
        }
        match self.instance_shutdown(node).await {
            Ok(true) => Ok(InstanceState::ShutDown),
            Ok(false) => Ok(InstanceState::Running),
            Err(e) if e.is_not_implemented() => Ok(InstanceState::Running),
            Err(e) => Err(e),
        }
    }

    /// Whether a node can be initialized only with a provider ID (from
    /// [`InstanceMetadata::provider_id`] or the Node's own): true, as Go's
    /// V2 path requires since 2024. The legacy adapter answers false: Go's
    /// V1 path initializes a node whose `instance_id` is not implemented by
    /// name, without a provider ID.
    fn requires_provider_id(&self) -> bool {
        true
    }

    /// The node's addresses, for the periodic address refresh of
    /// initialized nodes. The default asks
    /// [`InstancesV2::instance_metadata`], as Go's V2 refresh does; the
    /// legacy adapter ([`crate::legacy::with_legacy_instances`]) answers
    /// with `node_addresses_by_provider_id` (by name on error) only, as Go's
    /// V1 refresh. `Ok(None)` skips the node.
    async fn instance_addresses(&self, node: &Node) -> Result<Option<Vec<NodeAddress>>> {
        Ok(self
            .instance_metadata(node)
            .await?
            .map(|meta| meta.node_addresses))
    }

    /// The batch capability, when the cloud can answer for many nodes in one
    /// call. The controllers then coalesce nodes into batches.
    fn batch(&self) -> Option<&dyn InstancesBatch> {
        None
    }
}

/// Answers for many nodes in one cloud call (beyond Go; AWS batches up to 500
/// instance IDs per `DescribeInstances`).
///
/// Both methods return one entry per input node, in input order. An `Err` of
/// the whole call fails every node of the batch; an `Err` entry fails one.
/// The controllers check the length and treat a mismatch as an error of the
/// whole batch.
#[async_trait]
pub trait InstancesBatch: Send + Sync {
    /// The largest batch the cloud accepts. Defaults to 500.
    fn max_batch_size(&self) -> usize {
        500
    }

    /// [`InstancesV2::instance_metadata`] for each node.
    async fn instance_metadata_batch(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<Option<InstanceMetadata>>>>;

    /// [`InstancesV2::instance_state`] for each node.
    async fn instance_state_batch(&self, nodes: &[Node]) -> Result<Vec<Result<InstanceState>>>;
}

/// Check that a batch answer has one entry per node.
///
/// ```
/// use stratus_cloud::{check_batch_len, CloudErrorKind};
///
/// assert!(check_batch_len(3, &[1, 2, 3]).is_ok());
/// let err = check_batch_len(3, &[1, 2]).unwrap_err();
/// assert_eq!(err.kind(), CloudErrorKind::Other);
/// ```
pub fn check_batch_len<T>(nodes: usize, answers: &[T]) -> Result<()> {
    if nodes == answers.len() {
        Ok(())
    } else {
        Err(CloudError::new(
            CloudErrorKind::Other,
            format!(
                "batch answer has {} entries for {} nodes",
                answers.len(),
                nodes
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scripted {
        exists: Result<bool>,
        shutdown: Result<bool>,
    }

    fn copy(r: &Result<bool>) -> Result<bool> {
        match r {
            Ok(b) => Ok(*b),
            Err(e) => Err(CloudError::from_kind(e.kind())),
        }
    }

    #[async_trait]
    impl InstancesV2 for Scripted {
        async fn instance_exists(&self, _: &Node) -> Result<bool> {
            copy(&self.exists)
        }
        async fn instance_shutdown(&self, _: &Node) -> Result<bool> {
            copy(&self.shutdown)
        }
        async fn instance_metadata(&self, _: &Node) -> Result<Option<InstanceMetadata>> {
            Ok(None)
        }
    }

    async fn state(exists: Result<bool>, shutdown: Result<bool>) -> Result<InstanceState> {
        Scripted { exists, shutdown }
            .instance_state(&Node::default())
            .await
    }

    #[tokio::test]
    async fn default_state_follows_the_go_mapping() {
        use InstanceState::*;
        assert_eq!(state(Ok(false), Ok(false)).await.unwrap(), Gone);
        // Go's V2 path: an `InstanceNotFound` error is an error, not "gone".
        let err = state(Err(CloudError::not_found("x")), Ok(false))
            .await
            .unwrap_err();
        assert!(err.is_not_found());
        let err = state(Ok(true), Err(CloudError::not_found("x")))
            .await
            .unwrap_err();
        assert!(err.is_not_found());
        assert_eq!(state(Ok(true), Ok(true)).await.unwrap(), ShutDown);
        assert_eq!(state(Ok(true), Ok(false)).await.unwrap(), Running);
        assert_eq!(
            state(Ok(true), Err(CloudError::not_implemented()))
                .await
                .unwrap(),
            Running
        );
        let err = state(Err(CloudError::throttled(None)), Ok(false))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CloudErrorKind::Throttled { retry_after: None });
    }
}
