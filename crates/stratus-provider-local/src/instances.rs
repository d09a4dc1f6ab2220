//! `InstancesV2` and its batch capability.

use std::collections::HashMap;

use async_trait::async_trait;
use hyper::Method;
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use stratus_cloud::{
    CloudError, InstanceMetadata, InstanceState, InstancesBatch, InstancesV2, ProviderId, Result,
};
use stratus_local_cloud::api::{self, Instance};

use crate::{LocalProvider, PROVIDER_NAME};

/// How a Node names its instance.
enum Key {
    /// By `spec.providerID`.
    Id(String),
    /// By node name (no provider ID yet).
    Name(String),
}

fn key(node: &Node) -> Result<Key> {
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|id| !id.is_empty());
    if let Some(id) = provider_id {
        let parsed = ProviderId::parse_for(PROVIDER_NAME, id)
            .map_err(|e| CloudError::invalid_input(e.to_string()))?;
        return Ok(Key::Id(parsed.id().to_owned()));
    }
    match node.metadata.name.as_deref() {
        Some(name) if !name.is_empty() => Ok(Key::Name(name.to_owned())),
        _ => Err(CloudError::invalid_input(
            "the Node has neither a provider ID nor a name",
        )),
    }
}

fn metadata(instance: &Instance) -> Result<InstanceMetadata> {
    let provider_id = ProviderId::new(PROVIDER_NAME, instance.id.clone())
        .map_err(|e| CloudError::invalid_input(e.to_string()))?;
    Ok(InstanceMetadata {
        provider_id: provider_id.to_string(),
        instance_type: instance.instance_type.clone(),
        node_addresses: instance
            .addresses
            .iter()
            .map(|a| NodeAddress {
                type_: a.kind.clone(),
                address: a.address.clone(),
            })
            .collect(),
        zone: instance.zone.clone(),
        region: instance.region.clone(),
        additional_labels: Default::default(),
    })
}

fn state(instance: Option<&Instance>) -> InstanceState {
    match instance.map(|i| i.state) {
        None => InstanceState::Gone,
        Some(api::InstanceState::Running) => InstanceState::Running,
        Some(api::InstanceState::Stopped) => InstanceState::ShutDown,
    }
}

impl LocalProvider {
    /// The node's instance; `None` if the cloud has none.
    pub(crate) async fn find_instance(&self, node: &Node) -> Result<Option<Instance>> {
        match key(node)? {
            Key::Id(id) => {
                match self
                    .client
                    .call::<Instance>(Method::GET, &format!("/v1/instances/{id}"), None::<&()>)
                    .await
                {
                    Ok(instance) => Ok(Some(instance)),
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
            Key::Name(name) => {
                if !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'))
                {
                    return Err(CloudError::invalid_input(format!(
                        "node name {name:?} is not a DNS name"
                    )));
                }
                let found: Vec<Instance> = self
                    .client
                    .list_all(&format!("/v1/instances?name={name}"))
                    .await?;
                Ok(found.into_iter().next())
            }
        }
    }

    /// Every instance of the cloud, by ID and by node name.
    async fn all_instances(&self) -> Result<Index> {
        let all: Vec<Instance> = self.client.list_all("/v1/instances").await?;
        let mut index = Index::default();
        for (i, instance) in all.iter().enumerate() {
            index.by_id.insert(instance.id.clone(), i);
            index.by_name.entry(instance.node_name.clone()).or_insert(i);
        }
        index.all = all;
        Ok(index)
    }
}

#[derive(Default)]
struct Index {
    all: Vec<Instance>,
    by_id: HashMap<String, usize>,
    by_name: HashMap<String, usize>,
}

impl Index {
    fn get(&self, node: &Node) -> Result<Option<&Instance>> {
        let i = match key(node)? {
            Key::Id(id) => self.by_id.get(&id),
            Key::Name(name) => self.by_name.get(&name),
        };
        Ok(i.map(|i| &self.all[*i]))
    }
}

#[async_trait]
impl InstancesV2 for LocalProvider {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        Ok(self.find_instance(node).await?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        let instance = self.find_instance(node).await?.ok_or_else(|| {
            CloudError::not_found(format!(
                "no instance for node {:?}",
                node.metadata.name.as_deref().unwrap_or_default()
            ))
        })?;
        Ok(instance.state == api::InstanceState::Stopped)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        self.find_instance(node)
            .await?
            .as_ref()
            .map(metadata)
            .transpose()
    }

    /// One call, not Go's two.
    async fn instance_state(&self, node: &Node) -> Result<InstanceState> {
        Ok(state(self.find_instance(node).await?.as_ref()))
    }

    fn batch(&self) -> Option<&dyn InstancesBatch> {
        Some(self)
    }
}

/// Many nodes answered from one (paginated) list of the cloud's instances.
#[async_trait]
impl InstancesBatch for LocalProvider {
    async fn instance_metadata_batch(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<Option<InstanceMetadata>>>> {
        let index = self.all_instances().await?;
        Ok(nodes
            .iter()
            .map(|node| index.get(node)?.map(metadata).transpose())
            .collect())
    }

    async fn instance_state_batch(&self, nodes: &[Node]) -> Result<Vec<Result<InstanceState>>> {
        let index = self.all_instances().await?;
        Ok(nodes
            .iter()
            .map(|node| Ok(state(index.get(node)?)))
            .collect())
    }
}
