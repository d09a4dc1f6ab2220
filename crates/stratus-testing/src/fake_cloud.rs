//! [`FakeCloud`]: a stateful in-memory cloud implementing every
//! `stratus-cloud` trait, with knobs for latency, scripted errors,
//! throttling and batching, and a call log for assertions. Each capability
//! can be switched off ([`FakeCloud::without`]), so a test can stand in for
//! a provider with no `InstancesV2`, no load balancers or no routes.
//!
//! Unlike Go's fake cloud, errors are not sticky (each scripted error is
//! used once, or a fixed number of times), and instances are found by
//! provider ID first and node name second, as real providers do.
//!
//! ```
//! use k8s_openapi::api::core::v1::Node;
//! use stratus_cloud::{CloudProvider, InstanceState};
//! use stratus_testing::{FakeCloud, FakeInstance};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let cloud = FakeCloud::new();
//! cloud.add_instance(FakeInstance::new("node-1").with_internal_ip("10.0.0.1"));
//! let mut node = Node::default();
//! node.metadata.name = Some("node-1".into());
//! let instances = cloud.instances_v2().unwrap();
//! let meta = instances.instance_metadata(&node).await.unwrap().unwrap();
//! assert_eq!(meta.provider_id, "fake://node-1");
//! assert_eq!(instances.instance_state(&node).await.unwrap(), InstanceState::Running);
//! assert_eq!(cloud.calls_to("instance_metadata"), 1);
//! # });
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};
use stratus_cloud::helpers::load_balancer_source_ranges;
use stratus_cloud::{
    CloudError, CloudErrorKind, CloudProvider, Clusters, InstanceMetadata, InstanceState,
    Instances, InstancesBatch, InstancesV2, LoadBalancer, LoadBalancerClasses, ProviderId, Result,
    Route, Routes, Zone, Zones,
};

/// The provider name, and scheme of provider IDs (`fake://<node-name>`).
pub const FAKE_PROVIDER: &str = "fake";

/// A capability of [`FakeCloud`] that [`FakeCloud::without`] can take away:
/// the matching [`CloudProvider`] method then answers `None`, as a provider
/// that does not implement it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// [`CloudProvider::load_balancer`].
    LoadBalancer,
    /// [`CloudProvider::instances_v2`].
    InstancesV2,
    /// [`CloudProvider::instances`] (the legacy interface).
    Instances,
    /// [`CloudProvider::zones`] (the legacy interface).
    Zones,
    /// [`CloudProvider::routes`].
    Routes,
    /// [`CloudProvider::clusters`].
    Clusters,
}

/// An instance of the fake cloud.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeInstance {
    /// The node name it backs.
    pub node_name: String,
    /// `fake://<node_name>` unless set otherwise.
    pub provider_id: String,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Region.
    pub region: String,
    /// Addresses.
    pub addresses: Vec<NodeAddress>,
    /// Extra labels reported in the metadata.
    pub additional_labels: BTreeMap<String, String>,
    /// Running, shut down (gone instances are removed instead).
    pub state: InstanceState,
}

impl FakeInstance {
    /// A running instance for `node_name`, type `fake.small`, zone
    /// `fake-1a`, region `fake-1`, with a Hostname address.
    pub fn new(node_name: impl Into<String>) -> Self {
        let node_name = node_name.into();
        Self {
            provider_id: format!("{FAKE_PROVIDER}://{node_name}"),
            instance_type: "fake.small".into(),
            zone: "fake-1a".into(),
            region: "fake-1".into(),
            addresses: vec![NodeAddress {
                type_: "Hostname".into(),
                address: node_name.clone(),
            }],
            additional_labels: BTreeMap::new(),
            state: InstanceState::Running,
            node_name,
        }
    }

    /// Add an InternalIP address (first in the list).
    pub fn with_internal_ip(mut self, ip: impl Into<String>) -> Self {
        self.addresses.insert(
            0,
            NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            },
        );
        self
    }

    /// Add an ExternalIP address.
    pub fn with_external_ip(mut self, ip: impl Into<String>) -> Self {
        self.addresses.push(NodeAddress {
            type_: "ExternalIP".into(),
            address: ip.into(),
        });
        self
    }

    fn metadata(&self) -> InstanceMetadata {
        InstanceMetadata {
            provider_id: self.provider_id.clone(),
            instance_type: self.instance_type.clone(),
            node_addresses: self.addresses.clone(),
            zone: self.zone.clone(),
            region: self.region.clone(),
            additional_labels: self.additional_labels.clone(),
        }
    }
}

/// A load balancer of the fake cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeLoadBalancer {
    /// Its cloud name.
    pub name: String,
    /// `namespace/name` of the Service.
    pub service: String,
    /// The cluster name it was created for.
    pub cluster_name: String,
    /// Backend node names, sorted.
    pub hosts: Vec<String>,
    /// `(port, protocol, nodePort)` of each Service port.
    pub ports: Vec<(i32, String, i32)>,
    /// The address it was given.
    pub ip: String,
}

/// One call made to the fake cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudCall {
    /// The trait method, e.g. `ensure_load_balancer`.
    pub method: &'static str,
    /// What it was about (node name, load balancer name, route name).
    pub target: String,
    /// Nodes in a batch call.
    pub batch_size: usize,
}

#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

#[derive(Default)]
struct State {
    instances: BTreeMap<String, FakeInstance>,
    load_balancers: BTreeMap<String, FakeLoadBalancer>,
    routes: BTreeMap<String, Route>,
    calls: crate::call_log::CallLog<CloudCall>,
    errors: BTreeMap<&'static str, VecDeque<CloudErrorKind>>,
    latency: Duration,
    bucket: Option<Bucket>,
    batching: bool,
    max_batch: usize,
    classes: Option<LoadBalancerClasses>,
    elsewhere: Vec<String>,
    next_ip: u32,
    clusters: Vec<String>,
    /// Calls inside their latency right now, and the most there were.
    in_flight: usize,
    peak_in_flight: usize,
}

/// The fake cloud. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct FakeCloud {
    state: Arc<Mutex<State>>,
    /// The capabilities this handle does not offer.
    missing: Arc<BTreeSet<Capability>>,
}

impl std::fmt::Debug for FakeCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("FakeCloud")
            .field("instances", &s.instances.len())
            .field("load_balancers", &s.load_balancers.len())
            .field("routes", &s.routes.len())
            .finish()
    }
}

impl Default for FakeCloud {
    fn default() -> Self {
        Self::new()
    }
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn service_key(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or("default"),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

impl FakeCloud {
    /// An empty cloud: no latency, no throttling, batching on (500 per call).
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                batching: true,
                max_batch: 500,
                next_ip: 10,
                clusters: vec!["kubernetes".into()],
                ..Default::default()
            })),
            missing: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Add or replace an instance.
    pub fn add_instance(&self, instance: FakeInstance) {
        self.lock()
            .instances
            .insert(instance.provider_id.clone(), instance);
    }

    /// Remove an instance (by node name or provider ID): it is gone.
    pub fn remove_instance(&self, name_or_id: &str) -> Option<FakeInstance> {
        let mut s = self.lock();
        let key = s
            .instances
            .iter()
            .find(|(id, i)| *id == name_or_id || i.node_name == name_or_id)
            .map(|(id, _)| id.clone())?;
        s.instances.remove(&key)
    }

    /// Set an instance's state (running or shut down).
    pub fn set_instance_state(&self, node_name: &str, state: InstanceState) {
        if let Some(i) = self
            .lock()
            .instances
            .values_mut()
            .find(|i| i.node_name == node_name)
        {
            i.state = state;
        }
    }

    /// Change an instance (for example its type or addresses).
    pub fn update_instance(&self, node_name: &str, f: impl FnOnce(&mut FakeInstance)) {
        if let Some(i) = self
            .lock()
            .instances
            .values_mut()
            .find(|i| i.node_name == node_name)
        {
            f(i);
        }
    }

    /// The instances.
    pub fn instances_list(&self) -> Vec<FakeInstance> {
        self.lock().instances.values().cloned().collect()
    }

    /// Change the load balancer called `name` behind the controllers' back
    /// (drift: someone edited it in the cloud console); false if there is
    /// none.
    pub fn tamper_load_balancer(&self, name: &str, f: impl FnOnce(&mut FakeLoadBalancer)) -> bool {
        match self.lock().load_balancers.get_mut(name) {
            Some(lb) => {
                f(lb);
                true
            }
            None => false,
        }
    }

    /// Delete the load balancer called `name` behind the controllers' back.
    pub fn remove_load_balancer(&self, name: &str) -> Option<FakeLoadBalancer> {
        self.lock().load_balancers.remove(name)
    }

    /// The load balancers, by name.
    pub fn load_balancers(&self) -> BTreeMap<String, FakeLoadBalancer> {
        self.lock().load_balancers.clone()
    }

    /// How many load balancers have `host` (a node name) among their hosts,
    /// counted without copying them (a benchmark polls it while the
    /// controllers run).
    pub fn load_balancers_with_host(&self, host: &str) -> usize {
        self.lock()
            .load_balancers
            .values()
            .filter(|lb| lb.hosts.iter().any(|h| h == host))
            .count()
    }

    /// The routes, by name.
    pub fn routes_list(&self) -> BTreeMap<String, Route> {
        self.lock().routes.clone()
    }

    /// The calls made, in order (the last 10,000: the log stays bounded
    /// however long the cloud runs).
    pub fn calls(&self) -> Vec<CloudCall> {
        self.lock().calls.recent()
    }

    /// How many calls were made to `method` (all of them).
    pub fn calls_to(&self, method: &str) -> usize {
        self.lock().calls.count(method)
    }

    /// Forget the call log (and the peak of [`FakeCloud::peak_in_flight`]).
    pub fn clear_calls(&self) {
        let mut s = self.lock();
        s.calls.clear();
        s.peak_in_flight = s.in_flight;
    }

    /// The most calls that were in flight (inside their latency, see
    /// [`FakeCloud::set_latency`]) at once since the cloud was made or its
    /// calls last cleared: how many calls a controller makes in parallel.
    pub fn peak_in_flight(&self) -> usize {
        self.lock().peak_in_flight
    }

    /// Delay every call by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// Fail the next `times` calls to `method` with `kind` (then succeed
    /// again).
    pub fn fail_next(&self, method: &'static str, kind: CloudErrorKind, times: usize) {
        let mut s = self.lock();
        let queue = s.errors.entry(method).or_default();
        queue.extend(std::iter::repeat_n(kind, times));
    }

    /// Throttle: a token bucket of `per_second` calls with `burst`; calls
    /// beyond it fail with `Throttled` and the time until the next token.
    pub fn set_rate_limit(&self, per_second: f64, burst: u32) {
        self.lock().bucket = Some(Bucket {
            rate: per_second.max(0.001),
            burst: f64::from(burst.max(1)),
            tokens: f64::from(burst.max(1)),
            last: Instant::now(),
        });
    }

    /// Offer the batch capability (default on) and its largest batch.
    pub fn set_batching(&self, on: bool, max_batch: usize) {
        let mut s = self.lock();
        s.batching = on;
        s.max_batch = max_batch.max(1);
    }

    /// Serve these load-balancer classes (default: Services without a class).
    pub fn set_load_balancer_classes(&self, classes: LoadBalancerClasses) {
        self.lock().classes = Some(classes);
    }

    /// The same cloud (sharing its state) without `capability`. Clones made
    /// earlier keep it; clones made later do not.
    ///
    /// ```
    /// use stratus_cloud::CloudProvider;
    /// use stratus_testing::{FakeCloud, fake_cloud::Capability};
    ///
    /// let cloud = FakeCloud::new().without(Capability::InstancesV2);
    /// assert!(cloud.instances_v2().is_none());
    /// assert!(cloud.instances().is_some());
    /// ```
    pub fn without(mut self, capability: Capability) -> Self {
        let mut missing = self.missing.as_ref().clone();
        missing.insert(capability);
        self.missing = Arc::new(missing);
        self
    }

    /// Whether this handle offers `capability`.
    fn offers(&self, capability: Capability) -> bool {
        !self.missing.contains(&capability)
    }

    /// Answer `ImplementedElsewhere` for the Service `namespace/name`.
    pub fn implement_elsewhere(&self, service: &str) {
        self.lock().elsewhere.push(service.to_owned());
    }

    /// Account for a call: log it, apply throttling, latency and scripted
    /// errors.
    async fn call(&self, method: &'static str, target: &str, batch_size: usize) -> Result<()> {
        let (latency, outcome) = {
            let mut s = self.lock();
            s.calls.push(
                method,
                CloudCall {
                    method,
                    target: target.to_owned(),
                    batch_size,
                },
            );
            let mut outcome = Ok(());
            if let Some(b) = s.bucket.as_mut() {
                let now = Instant::now();
                b.tokens =
                    (b.tokens + now.duration_since(b.last).as_secs_f64() * b.rate).min(b.burst);
                b.last = now;
                if b.tokens >= 1.0 {
                    b.tokens -= 1.0;
                } else {
                    let wait = Duration::from_secs_f64((1.0 - b.tokens) / b.rate);
                    outcome = Err(CloudError::throttled(Some(wait)));
                }
            }
            if outcome.is_ok()
                && let Some(kind) = s.errors.get_mut(method).and_then(VecDeque::pop_front)
            {
                outcome = Err(CloudError::new(kind, format!("scripted {method} failure")));
            }
            (s.latency, outcome)
        };
        if !latency.is_zero() {
            /// Counts a call in flight until dropped (also when the caller
            /// gives up on it).
            struct InFlight<'a>(&'a FakeCloud);
            impl Drop for InFlight<'_> {
                fn drop(&mut self) {
                    self.0.lock().in_flight -= 1;
                }
            }
            let _in_flight = {
                let mut s = self.lock();
                s.in_flight += 1;
                s.peak_in_flight = s.peak_in_flight.max(s.in_flight);
                InFlight(self)
            };
            tokio::time::sleep(latency).await;
        }
        outcome
    }

    /// The node's instance: by provider ID when the node has one (which
    /// must be a `fake://` ID: anything else is `InvalidInput`, as a real
    /// cloud would answer garbage), else by node name.
    fn find(&self, node: &Node) -> Result<Option<FakeInstance>> {
        let provider_id = node
            .spec
            .as_ref()
            .and_then(|sp| sp.provider_id.as_deref())
            .filter(|id| !id.is_empty());
        if let Some(id) = provider_id {
            ProviderId::parse_for(FAKE_PROVIDER, id)?;
        }
        let s = self.lock();
        Ok(provider_id
            .and_then(|id| s.instances.get(id))
            .or_else(|| {
                s.instances
                    .values()
                    .find(|i| i.node_name == node_name(node))
            })
            .cloned())
    }

    fn find_by_provider_id(&self, provider_id: &str) -> Result<Option<FakeInstance>> {
        ProviderId::parse_for(FAKE_PROVIDER, provider_id)?;
        Ok(self.lock().instances.get(provider_id).cloned())
    }

    fn find_by_name(&self, name: &str) -> Option<FakeInstance> {
        self.lock()
            .instances
            .values()
            .find(|i| i.node_name == name)
            .cloned()
    }

    fn status_of(ip: &str) -> LoadBalancerStatus {
        LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip.to_owned()),
                ..Default::default()
            }]),
        }
    }
}

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
