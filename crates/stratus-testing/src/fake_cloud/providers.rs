//! The cloud-provider traits [`FakeCloud`](super::FakeCloud) implements:
//! each call recorded, checked against the capabilities it was built with,
//! and answered from its state (or with the fault queued for it).

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};
use stratus_cloud::helpers::load_balancer_source_ranges;
use stratus_cloud::{
    CloudError, CloudProvider, Clusters, InstanceMetadata, InstanceState, Instances,
    InstancesBatch, InstancesV2, LoadBalancer, LoadBalancerClasses, ProviderId, Result, Route,
    Routes, Zone, Zones,
};

use super::{Capability, FAKE_PROVIDER, FakeCloud, FakeLoadBalancer, node_name, service_key};

fn not_found(what: &str) -> CloudError {
    CloudError::not_found(format!("{what} not found"))
}

#[async_trait]
impl CloudProvider for FakeCloud {
    fn provider_name(&self) -> &str {
        FAKE_PROVIDER
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.offers(Capability::LoadBalancer).then_some(self as _)
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        self.offers(Capability::InstancesV2).then_some(self as _)
    }

    fn instances(&self) -> Option<&dyn Instances> {
        self.offers(Capability::Instances).then_some(self as _)
    }

    fn zones(&self) -> Option<&dyn Zones> {
        self.offers(Capability::Zones).then_some(self as _)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        self.offers(Capability::Routes).then_some(self as _)
    }

    fn clusters(&self) -> Option<&dyn Clusters> {
        self.offers(Capability::Clusters).then_some(self as _)
    }
}

#[async_trait]
impl InstancesV2 for FakeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        self.call("instance_exists", node_name(node), 1).await?;
        Ok(self.find(node)?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        self.call("instance_shutdown", node_name(node), 1).await?;
        match self.find(node)? {
            Some(i) => Ok(i.state == InstanceState::ShutDown),
            None => Err(not_found(&format!("instance for node {}", node_name(node)))),
        }
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        self.call("instance_metadata", node_name(node), 1).await?;
        match self.find(node)? {
            Some(i) => Ok(Some(i.metadata())),
            None => Err(not_found(&format!("instance for node {}", node_name(node)))),
        }
    }

    async fn instance_state(&self, node: &Node) -> Result<InstanceState> {
        self.call("instance_state", node_name(node), 1).await?;
        Ok(self.find(node)?.map_or(InstanceState::Gone, |i| i.state))
    }

    fn batch(&self) -> Option<&dyn InstancesBatch> {
        self.lock().batching.then_some(self as &dyn InstancesBatch)
    }
}

#[async_trait]
impl InstancesBatch for FakeCloud {
    fn max_batch_size(&self) -> usize {
        self.lock().max_batch
    }

    async fn instance_metadata_batch(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<Option<InstanceMetadata>>>> {
        let max = self.max_batch_size();
        if nodes.len() > max {
            return Err(CloudError::invalid_input(format!(
                "batch of {} exceeds {max}",
                nodes.len()
            )));
        }
        self.call("instance_metadata_batch", "", nodes.len())
            .await?;
        Ok(nodes
            .iter()
            .map(|n| match self.find(n)? {
                Some(i) => Ok(Some(i.metadata())),
                None => Err(not_found(&format!("instance for node {}", node_name(n)))),
            })
            .collect())
    }

    async fn instance_state_batch(&self, nodes: &[Node]) -> Result<Vec<Result<InstanceState>>> {
        let max = self.max_batch_size();
        if nodes.len() > max {
            return Err(CloudError::invalid_input(format!(
                "batch of {} exceeds {max}",
                nodes.len()
            )));
        }
        self.call("instance_state_batch", "", nodes.len()).await?;
        Ok(nodes
            .iter()
            .map(|n| Ok(self.find(n)?.map_or(InstanceState::Gone, |i| i.state)))
            .collect())
    }
}

#[async_trait]
impl Instances for FakeCloud {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        self.call("node_addresses", name, 1).await?;
        self.find_by_name(name)
            .map(|i| i.addresses)
            .ok_or_else(|| not_found(name))
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        self.call("node_addresses_by_provider_id", provider_id, 1)
            .await?;
        self.find_by_provider_id(provider_id)?
            .map(|i| i.addresses)
            .ok_or_else(|| not_found(provider_id))
    }

    async fn instance_id(&self, name: &str) -> Result<String> {
        self.call("instance_id", name, 1).await?;
        let i = self.find_by_name(name).ok_or_else(|| not_found(name))?;
        let id: ProviderId = i.provider_id.parse()?;
        Ok(id.id().to_owned())
    }

    async fn instance_type(&self, name: &str) -> Result<String> {
        self.call("instance_type", name, 1).await?;
        self.find_by_name(name)
            .map(|i| i.instance_type)
            .ok_or_else(|| not_found(name))
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        self.call("instance_type_by_provider_id", provider_id, 1)
            .await?;
        self.find_by_provider_id(provider_id)?
            .map(|i| i.instance_type)
            .ok_or_else(|| not_found(provider_id))
    }

    async fn add_ssh_key_to_all_instances(&self, user: &str, _key_data: &[u8]) -> Result<()> {
        self.call("add_ssh_key_to_all_instances", user, 1).await?;
        Err(CloudError::not_implemented())
    }

    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        self.call("current_node_name", hostname, 1).await?;
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        self.call("instance_exists_by_provider_id", provider_id, 1)
            .await?;
        Ok(self.find_by_provider_id(provider_id)?.is_some())
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        self.call("instance_shutdown_by_provider_id", provider_id, 1)
            .await?;
        self.find_by_provider_id(provider_id)?
            .map(|i| i.state == InstanceState::ShutDown)
            .ok_or_else(|| not_found(provider_id))
    }
}

#[async_trait]
impl Zones for FakeCloud {
    async fn get_zone(&self) -> Result<Zone> {
        self.call("get_zone", "", 1).await?;
        Err(CloudError::not_implemented())
    }

    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        self.call("get_zone_by_provider_id", provider_id, 1).await?;
        let i = self
            .find_by_provider_id(provider_id)?
            .ok_or_else(|| not_found(provider_id))?;
        Ok(Zone {
            failure_domain: i.zone,
            region: i.region,
        })
    }

    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone> {
        self.call("get_zone_by_node_name", name, 1).await?;
        let i = self.find_by_name(name).ok_or_else(|| not_found(name))?;
        Ok(Zone {
            failure_domain: i.zone,
            region: i.region,
        })
    }
}

fn hosts(nodes: &[Node]) -> Vec<String> {
    let mut h: Vec<String> = nodes.iter().map(|n| node_name(n).to_owned()).collect();
    h.sort();
    h.dedup();
    h
}

fn ports(svc: &Service) -> Vec<(i32, String, i32)> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    (
                        p.port,
                        p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                        p.node_port.unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[async_trait]
impl LoadBalancer for FakeCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.call("get_load_balancer", &name, 1).await?;
        Ok(self
            .lock()
            .load_balancers
            .get(&name)
            .map(|lb| Self::status_of(&lb.ip)))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.call("ensure_load_balancer", &name, 1).await?;
        // As a real cloud: garbage source ranges are refused.
        load_balancer_source_ranges(service)
            .map_err(|e| CloudError::invalid_input(e.to_string()))?;
        let key = service_key(service);
        let mut s = self.lock();
        if s.elsewhere.contains(&key) {
            return Err(CloudError::implemented_elsewhere());
        }
        let ip = match s.load_balancers.get(&name) {
            Some(lb) => lb.ip.clone(),
            None => {
                s.next_ip += 1;
                let n = s.next_ip;
                format!("203.0.{}.{}", (n / 250) % 250, n % 250 + 1)
            }
        };
        s.load_balancers.insert(
            name.clone(),
            FakeLoadBalancer {
                name,
                service: key,
                cluster_name: cluster_name.to_owned(),
                hosts: hosts(nodes),
                ports: ports(service),
                ip: ip.clone(),
            },
        );
        Ok(Self::status_of(&ip))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.call("update_load_balancer", &name, 1).await?;
        let mut s = self.lock();
        if s.elsewhere.contains(&service_key(service)) {
            return Err(CloudError::implemented_elsewhere());
        }
        match s.load_balancers.get_mut(&name) {
            Some(lb) => {
                lb.hosts = hosts(nodes);
                Ok(())
            }
            None => Err(not_found(&format!("load balancer {name}"))),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.call("ensure_load_balancer_deleted", &name, 1).await?;
        self.lock().load_balancers.remove(&name);
        Ok(())
    }

    async fn load_balancer_up_to_date(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<bool> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.call("load_balancer_up_to_date", &name, 1).await?;
        let s = self.lock();
        if s.elsewhere.contains(&service_key(service)) {
            return Err(CloudError::implemented_elsewhere());
        }
        Ok(s.load_balancers.get(&name).is_some_and(|lb| {
            lb.cluster_name == cluster_name
                && lb.hosts == hosts(nodes)
                && lb.ports == ports(service)
        }))
    }

    fn classes(&self) -> LoadBalancerClasses {
        self.lock().classes.clone().unwrap_or_default()
    }
}

#[async_trait]
impl Routes for FakeCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        self.call("list_routes", cluster_name, 1).await?;
        Ok(self.lock().routes.values().cloned().collect())
    }

    async fn create_route(
        &self,
        _cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<()> {
        self.call("create_route", name_hint, 1).await?;
        let mut stored = route.clone();
        stored.name = name_hint.to_owned();
        self.lock().routes.insert(name_hint.to_owned(), stored);
        Ok(())
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<()> {
        self.call("delete_route", &route.name, 1).await?;
        self.lock().routes.remove(&route.name);
        Ok(())
    }
}

#[async_trait]
impl Clusters for FakeCloud {
    async fn list_clusters(&self) -> Result<Vec<String>> {
        self.call("list_clusters", "", 1).await?;
        Ok(self.lock().clusters.clone())
    }

    async fn master(&self, cluster_name: &str) -> Result<String> {
        self.call("master", cluster_name, 1).await?;
        if self.lock().clusters.iter().any(|c| c == cluster_name) {
            Ok("https://127.0.0.1:6443".into())
        } else {
            Err(not_found(&format!("cluster {cluster_name}")))
        }
    }
}
