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

mod providers;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};
use stratus_cloud::{
    CloudError, CloudErrorKind, InstanceMetadata, InstanceState, LoadBalancerClasses, ProviderId,
    Result, Route,
};

/// The provider name, and scheme of provider IDs (`fake://<node-name>`).
pub const FAKE_PROVIDER: &str = "fake";

/// A capability of [`FakeCloud`] that [`FakeCloud::without`] can take away:
/// the matching [`CloudProvider`](stratus_cloud::CloudProvider) method then answers `None`, as a provider
/// that does not implement it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// [`CloudProvider::load_balancer`](stratus_cloud::CloudProvider::load_balancer).
    LoadBalancer,
    /// [`CloudProvider::instances_v2`](stratus_cloud::CloudProvider::instances_v2).
    InstancesV2,
    /// [`CloudProvider::instances`](stratus_cloud::CloudProvider::instances) (the legacy interface).
    Instances,
    /// [`CloudProvider::zones`](stratus_cloud::CloudProvider::zones) (the legacy interface).
    Zones,
    /// [`CloudProvider::routes`](stratus_cloud::CloudProvider::routes).
    Routes,
    /// [`CloudProvider::clusters`](stratus_cloud::CloudProvider::clusters).
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
