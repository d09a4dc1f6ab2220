//! `LoadBalancer`: one cloud load balancer per Service, nodes' NodePorts as
//! backends.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hyper::Method;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};
use stratus_cloud::helpers::health_check_path_port;
use stratus_cloud::{CloudError, LoadBalancer, Result};
use stratus_local_cloud::api::{self, Backend, HealthCheck, Listener, LoadBalancerSpec, Protocol};

use crate::{Backends, LocalProvider};

/// The tag naming the cluster a load balancer or route belongs to.
pub(crate) const CLUSTER_TAG: &str = "kubernetes.io/cluster";
/// The tag naming the Service (`namespace/name`) a load balancer serves.
const SERVICE_TAG: &str = "kubernetes.io/service";

/// The address the cloud reaches a node at: `InternalIP`, else `ExternalIP`.
fn node_ip(addresses: &[NodeAddress]) -> Option<&str> {
    ["InternalIP", "ExternalIP"].iter().find_map(|kind| {
        addresses
            .iter()
            .find(|a| a.type_ == *kind)
            .map(|a| a.address.as_str())
    })
}

fn protocol(service: &Service, p: Option<&str>) -> Result<Protocol> {
    match p.unwrap_or("TCP") {
        "TCP" => Ok(Protocol::Tcp),
        "UDP" => Ok(Protocol::Udp),
        other => Err(CloudError::invalid_input(format!(
            "Service {}: the local cloud balances TCP and UDP, not {other}",
            service.metadata.name.as_deref().unwrap_or_default()
        ))),
    }
}

impl LocalProvider {
    /// The nodes' addresses: their own, else their instances' in the cloud
    /// (one list for all of them, only if some node has none).
    async fn backend_ips(&self, nodes: &[Node]) -> Result<Vec<String>> {
        let own = |n: &Node| {
            n.status
                .as_ref()
                .and_then(|s| s.addresses.as_deref())
                .and_then(node_ip)
                .map(str::to_owned)
        };
        let mut ips: Vec<Option<String>> = nodes.iter().map(own).collect();
        if ips.iter().any(Option::is_none) {
            let missing: Vec<Node> = nodes
                .iter()
                .zip(&ips)
                .filter(|(_, ip)| ip.is_none())
                .map(|(n, _)| n.clone())
                .collect();
            let answers =
                stratus_cloud::InstancesBatch::instance_metadata_batch(self, &missing).await?;
            let mut answers = answers.into_iter();
            for ip in ips.iter_mut().filter(|ip| ip.is_none()) {
                if let Some(Ok(Some(meta))) = answers.next() {
                    *ip = node_ip(&meta.node_addresses).map(str::to_owned);
                }
            }
        }
        let mut ips: Vec<String> = ips.into_iter().flatten().collect();
        ips.sort();
        ips.dedup();
        Ok(ips)
    }

    /// What the Service asks of its load balancer with these nodes: its
    /// ports' NodePorts on the nodes, or its ready endpoints.
    pub(crate) async fn spec(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerSpec> {
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_deref())
            .unwrap_or_default();
        if ports.is_empty() {
            return Err(CloudError::invalid_input("the Service has no ports"));
        }
        let ips = match self.backends {
            Backends::NodePorts => self.backend_ips(nodes).await?,
            Backends::Endpoints => Vec::new(),
        };
        let mut listeners = Vec::new();
        for p in ports {
            let port = u16::try_from(p.port)
                .map_err(|_| CloudError::invalid_input(format!("port {}", p.port)))?;
            let protocol = protocol(service, p.protocol.as_deref())?;
            let mut backends = match self.backends {
                Backends::NodePorts => {
                    let node_port = p
                        .node_port
                        .and_then(|n| u16::try_from(n).ok())
                        .filter(|n| *n != 0)
                        .ok_or_else(|| {
                            CloudError::invalid_input(format!(
                                "port {port} has no nodePort: with `backends: nodePorts` the local cloud's backends are the nodes' NodePorts (allocateLoadBalancerNodePorts must not be false)"
                            ))
                        })?;
                    ips.iter()
                        .map(|ip| Backend {
                            address: ip.clone(),
                            port: node_port,
                        })
                        .collect()
                }
                Backends::Endpoints => self.endpoints.backends(service, p).await?,
            };
            backends.sort();
            backends.dedup();
            listeners.push(Listener {
                protocol,
                port,
                backends,
            });
        }
        let tags = BTreeMap::from([
            (CLUSTER_TAG.to_owned(), cluster.to_owned()),
            (SERVICE_TAG.to_owned(), service_key(service)),
        ]);
        // `externalTrafficPolicy: Local` with the nodes as backends: a node
        // gets connections only while kube-proxy's health check on the
        // Service's healthCheckNodePort says it has a ready endpoint.
        let health_check = match self.backends {
            Backends::NodePorts => health_check_path_port(service).and_then(|(path, port)| {
                Some(HealthCheck {
                    port: u16::try_from(port).ok().filter(|p| *p != 0)?,
                    path: path.to_owned(),
                })
            }),
            Backends::Endpoints => None,
        };
        Ok(LoadBalancerSpec {
            listeners,
            tags,
            health_check,
        })
    }

    async fn get(&self, name: &str) -> Result<Option<api::LoadBalancer>> {
        match self
            .client
            .call(
                Method::GET,
                &format!("/v1/load-balancers/{name}"),
                None::<&()>,
            )
            .await
        {
            Ok(lb) => Ok(Some(lb)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub(crate) async fn put(
        &self,
        name: &str,
        spec: &LoadBalancerSpec,
    ) -> Result<api::LoadBalancer> {
        Ok(self
            .client
            .call(
                Method::PUT,
                &format!("/v1/load-balancers/{name}"),
                Some(spec),
            )
            .await?)
    }
}

/// `namespace/name`.
pub(crate) fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

fn status(lb: &api::LoadBalancer) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(lb.address.clone()),
            ip_mode: Some("VIP".to_owned()),
            ..Default::default()
        }]),
    }
}

/// The same listeners and backends, in any order.
fn same(a: &LoadBalancerSpec, b: &LoadBalancerSpec) -> bool {
    let norm = |s: &LoadBalancerSpec| {
        let mut ls: Vec<Listener> = s
            .listeners
            .iter()
            .map(|l| {
                let mut l = l.clone();
                l.backends.sort();
                l
            })
            .collect();
        ls.sort_by_key(|l| (l.protocol, l.port));
        (ls, s.tags.clone(), s.health_check.clone())
    };
    norm(a) == norm(b)
}

#[async_trait]
impl LoadBalancer for LocalProvider {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let name = self.get_load_balancer_name(cluster_name, service);
        Ok(self.get(&name).await?.as_ref().map(status))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let spec = self.spec(cluster_name, service, nodes).await?;
        let lb = self.put(&name, &spec).await?;
        self.endpoints
            .programmed(cluster_name, &name, service, Some(&spec));
        self.reprogram(&service_key(service)).await;
        Ok(status(&lb))
    }

    /// A PUT of the same listeners with the new backends: the cloud keeps
    /// the ports open and swaps the backends in place. With `backends:
    /// endpoints` the nodes are not backends: nothing to do.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        if self.backends == Backends::Endpoints {
            let name = self.get_load_balancer_name(cluster_name, service);
            self.endpoints
                .programmed(cluster_name, &name, service, None);
            self.reprogram(&service_key(service)).await;
            return Ok(());
        }
        let name = self.get_load_balancer_name(cluster_name, service);
        let spec = self.spec(cluster_name, service, nodes).await?;
        self.put(&name, &spec).await?;
        self.endpoints
            .programmed(cluster_name, &name, service, Some(&spec));
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.endpoints.forget(service);
        self.client
            .delete(&format!("/v1/load-balancers/{name}"))
            .await?;
        Ok(())
    }

    /// One GET, compared with what an ensure would ask. With `backends:
    /// endpoints` the backends are this provider's upkeep, not the
    /// controller's: when only they differ (the endpoints changed while the
    /// manager was away, or a change raced this question), they are written
    /// here and the answer is true, so the controller does not re-ensure.
    async fn load_balancer_up_to_date(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<bool> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let Some(existing) = self.get(&name).await? else {
            return Ok(false);
        };
        let wanted = self.spec(cluster_name, service, nodes).await?;
        if self.backends == Backends::Endpoints
            && same_ports(&existing.spec, &wanted)
            && !same(&existing.spec, &wanted)
        {
            self.put(&name, &wanted).await?;
            self.endpoints
                .programmed(cluster_name, &name, service, Some(&wanted));
            self.reprogram(&service_key(service)).await;
            return Ok(true);
        }
        // Asked for every load balancer after a manager restart: from here
        // on it follows its endpoints again.
        self.endpoints
            .programmed(cluster_name, &name, service, Some(&existing.spec));
        let up_to_date = same(&existing.spec, &wanted);
        if up_to_date {
            self.reprogram(&service_key(service)).await;
        }
        Ok(up_to_date)
    }
}

/// The same listeners (protocols and ports), tags and health check, whatever
/// the backends.
fn same_ports(a: &LoadBalancerSpec, b: &LoadBalancerSpec) -> bool {
    let ports = |s: &LoadBalancerSpec| {
        let mut p: Vec<(Protocol, u16)> =
            s.listeners.iter().map(|l| (l.protocol, l.port)).collect();
        p.sort();
        p
    };
    ports(a) == ports(b) && a.tags == b.tags && a.health_check == b.health_check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(port: u16, backends: &[(&str, u16)]) -> Listener {
        Listener {
            protocol: Protocol::Tcp,
            port,
            backends: backends
                .iter()
                .map(|(a, p)| Backend {
                    address: (*a).into(),
                    port: *p,
                })
                .collect(),
        }
    }

    #[test]
    fn specs_compare_without_order() {
        let a = LoadBalancerSpec {
            listeners: vec![
                listener(80, &[("10.0.0.1", 1), ("10.0.0.2", 1)]),
                listener(443, &[]),
            ],
            tags: BTreeMap::new(),
            health_check: None,
        };
        let b = LoadBalancerSpec {
            listeners: vec![
                listener(443, &[]),
                listener(80, &[("10.0.0.2", 1), ("10.0.0.1", 1)]),
            ],
            tags: BTreeMap::new(),
            health_check: None,
        };
        assert!(same(&a, &b));
        let c = LoadBalancerSpec {
            listeners: vec![listener(443, &[]), listener(80, &[("10.0.0.2", 1)])],
            tags: BTreeMap::new(),
            health_check: None,
        };
        assert!(!same(&a, &c));
        assert!(same_ports(&a, &c));
        let d = LoadBalancerSpec {
            listeners: vec![listener(80, &[])],
            tags: BTreeMap::new(),
            health_check: None,
        };
        assert!(!same_ports(&a, &d));
        let e = LoadBalancerSpec {
            health_check: Some(HealthCheck {
                port: 32000,
                path: "/healthz".into(),
            }),
            ..a.clone()
        };
        assert!(!same(&a, &e));
        assert!(!same_ports(&a, &e));
    }

    #[test]
    fn the_internal_address_is_preferred() {
        let a = |t: &str, ip: &str| NodeAddress {
            type_: t.into(),
            address: ip.into(),
        };
        assert_eq!(
            node_ip(&[a("ExternalIP", "1.1.1.1"), a("InternalIP", "10.0.0.1")]),
            Some("10.0.0.1")
        );
        assert_eq!(
            node_ip(&[a("Hostname", "n"), a("ExternalIP", "1.1.1.1")]),
            Some("1.1.1.1")
        );
        assert_eq!(node_ip(&[a("Hostname", "n")]), None);
    }
}
