//! The demo's cloud: `stratus-local-cloud` in this process, its instances
//! for the demo's nodes, and the `local` provider (load balancers straight
//! to the Services' ready endpoints) for the manager; `web.rs` puts a
//! Service of three replicas behind one of its load balancers.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::Method;
use stratus_cloud::CloudProvider;
use stratus_local_cloud::api::{Address, Instance, InstanceState, LoadBalancer, Route};
use stratus_local_cloud::{Config, Forwarding, LocalCloud, StartError};
use stratus_provider_local::{Backends, Client, LocalProvider, RetryPolicy};

/// The range the demo's load balancers get their addresses from (the
/// tests use 127.77.0.0/16).
const ADDRESS_RANGE: &str = "127.78.0.0/16";

/// The pod network: the manager's `--cluster-cidr`, and the range whose
/// routes the cloud writes into the kernel (RFC 2544's, routed nowhere;
/// the tests use other parts of it).
pub(crate) const POD_NETWORK: &str = "198.19.0.0/19";

/// The running cloud and a client of its API.
pub(crate) struct LocalCloudDemo {
    cloud: LocalCloud,
    client: Client,
    /// Who moves the load balancers' traffic.
    pub(crate) forwarding: Forwarding,
}

/// Start the cloud with one instance per `(node name, internal IP)`.
/// Backends may be on this machine's loopback, and at `extra_backends`
/// (the process nodes' pod addresses on the real control plane).
pub(crate) async fn start(
    nodes: &[(String, String)],
    extra_backends: &[String],
) -> Result<LocalCloudDemo, String> {
    let mut allowed_backends = vec!["127.0.0.0/8".parse().map_err(|e| format!("{e}"))?];
    for address in extra_backends {
        allowed_backends.push(
            format!("{address}/32")
                .parse()
                .map_err(|e| format!("{address}: {e}"))?,
        );
    }
    let config = Config {
        address_range: ADDRESS_RANGE.parse().map_err(|e| format!("{e}"))?,
        allowed_backends,
        pod_network: Some(POD_NETWORK.parse().map_err(|e| format!("{e}"))?),
        // The kernel moves the load balancers' traffic (nftables DNAT);
        // where it cannot, this process does.
        forwarding: Forwarding::Kernel,
        ..Config::default()
    };
    let mut forwarding = Forwarding::Kernel;
    let cloud = match LocalCloud::start(config.clone()).await {
        Err(StartError::Forwarding(e)) => {
            forwarding = Forwarding::Proxy;
            eprintln!("warning: kernel forwarding is not available ({e}); the local cloud relays the load balancers' traffic itself");
            LocalCloud::start(Config {
                forwarding: Forwarding::Proxy,
                ..config
            })
            .await
        }
        started => started,
    }
    .map_err(|e| format!("the local cloud: {e}"))?;
    let client = Client::new(&format!("http://{}", cloud.addr()), RetryPolicy::default())
        .map_err(|e| e.to_string())?;
    for (i, (name, ip)) in nodes.iter().enumerate() {
        let instance = Instance {
            id: format!("i-{name}"),
            node_name: name.clone(),
            zone: format!("local-{}", ["a", "b", "c"][i % 3]),
            region: "local".into(),
            instance_type: "simulated".into(),
            addresses: vec![Address {
                kind: "InternalIP".into(),
                address: ip.clone(),
            }],
            state: InstanceState::Running,
        };
        client
            .call::<Instance>(
                Method::PUT,
                &format!("/v1/instances/i-{name}"),
                Some(&instance),
            )
            .await
            .map_err(|e| format!("registering {name} with the local cloud: {e}"))?;
    }
    Ok(LocalCloudDemo {
        cloud,
        client,
        forwarding,
    })
}

impl LocalCloudDemo {
    /// The `local` provider for the manager.
    pub(crate) fn provider(&self) -> Arc<dyn CloudProvider> {
        LocalProvider::new(self.client.clone())
            .with_backends(Backends::Endpoints)
            .into_dyn()
    }

    /// The cloud's API address.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.cloud.addr()
    }

    /// The API calls the cloud answered, by kind.
    pub(crate) async fn calls(&self) -> Result<BTreeMap<String, u64>, String> {
        self.client
            .call(Method::GET, "/v1/calls", None::<&()>)
            .await
            .map_err(|e| e.to_string())
    }

    /// Every load balancer.
    pub(crate) async fn load_balancers(&self) -> Result<Vec<LoadBalancer>, String> {
        self.client
            .list_all("/v1/load-balancers")
            .await
            .map_err(|e| e.to_string())
    }

    /// Every route.
    pub(crate) async fn routes(&self) -> Result<Vec<Route>, String> {
        self.client
            .list_all("/v1/routes")
            .await
            .map_err(|e| e.to_string())
    }

    /// Stop the cloud (its load balancers stop listening).
    pub(crate) async fn stop(self) {
        self.cloud.stop().await;
    }
}
