//! The wire types of the local cloud's HTTP API (version `v1`), JSON with
//! camelCase fields.
//!
//! | call | answer |
//! |---|---|
//! | `PUT /v1/instances/{id}` ([`Instance`]) | the instance |
//! | `GET /v1/instances/{id}` | the instance, or 404 |
//! | `GET /v1/instances?name=&limit=&continue=` | a [`List`] of instances |
//! | `DELETE /v1/instances/{id}` | 204, or 404 |
//! | `PUT /v1/load-balancers/{name}` ([`LoadBalancerSpec`]) | the [`LoadBalancer`], its address allocated on creation |
//! | `GET /v1/load-balancers/{name}` | the load balancer, or 404 |
//! | `GET /v1/load-balancers?limit=&continue=` | a [`List`] of load balancers |
//! | `DELETE /v1/load-balancers/{name}` | 204 (the address released, nothing listening), or 404 |
//! | `PUT /v1/routes/{name}` ([`Route`]) | the route |
//! | `GET /v1/routes?limit=&continue=` | a [`List`] of routes |
//! | `DELETE /v1/routes/{name}` | 204, or 404 |
//! | `PUT /v1/faults` ([`Faults`]) | the faults now injected |
//! | `GET /v1/calls` | the API calls answered so far, by `METHOD /v1/kind` or `METHOD /v1/kind/{name}` (a JSON object of counts) |
//!
//! A failed call answers an [`ApiError`] with the status of its
//! [`ErrorCode`]; a throttled one (429) also carries `Retry-After` in
//! seconds and [`ApiError::retry_after_ms`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The longest page a list answers, whatever `limit` asks.
pub const MAX_PAGE: usize = 500;

/// A machine the cloud knows: a node's instance.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// The instance ID (the path segment; set by the cloud from it).
    #[serde(default)]
    pub id: String,
    /// The Kubernetes node name this instance runs as.
    pub node_name: String,
    /// The zone, e.g. `local-a`.
    #[serde(default)]
    pub zone: String,
    /// The region, e.g. `local`.
    #[serde(default)]
    pub region: String,
    /// The instance type, e.g. `process`.
    #[serde(default)]
    pub instance_type: String,
    /// The instance's addresses.
    #[serde(default)]
    pub addresses: Vec<Address>,
    /// Whether the instance runs.
    #[serde(default)]
    pub state: InstanceState,
}

/// One address of an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Address {
    /// `InternalIP`, `ExternalIP`, `Hostname`, ... (Kubernetes' address types).
    #[serde(rename = "type")]
    pub kind: String,
    /// The address.
    pub address: String,
}

/// Whether an instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum InstanceState {
    /// It runs.
    #[default]
    Running,
    /// It is stopped (it still exists).
    Stopped,
}

/// What a caller asks of a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerSpec {
    /// The ports it listens on, each with its backends.
    pub listeners: Vec<Listener>,
    /// Free-form tags (the provider records the cluster and the Service).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// How every backend's health is told; none: a backend is healthy while
    /// connections to it succeed (a TCP connect decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// An HTTP health check of a load balancer's backends: each interval, a
/// `GET` of `path` on each backend's address at `port`; the backend is
/// healthy while it answers 2xx, and gets no new connection otherwise.
///
/// This is what a cloud does for a Service with `externalTrafficPolicy:
/// Local`: kube-proxy answers on the Service's `healthCheckNodePort` with 200
/// on nodes that have a ready endpoint of it and 503 on the others.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// The port asked on each backend's address (not the backend's port).
    pub port: u16,
    /// The path asked, starting with `/`.
    pub path: String,
}

/// One port of a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    /// `TCP` or `UDP`.
    pub protocol: Protocol,
    /// The port on the load balancer's address.
    pub port: u16,
    /// Where connections go, spread round-robin over the healthy ones.
    pub backends: Vec<Backend>,
}

/// A transport protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Protocol {
    /// TCP: each connection forwarded to one backend.
    #[serde(rename = "TCP")]
    Tcp,
    /// UDP: each client address's datagrams forwarded to one backend.
    #[serde(rename = "UDP")]
    Udp,
}

/// A backend of a listener.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backend {
    /// The backend's IP address.
    pub address: String,
    /// The backend's port.
    pub port: u16,
}

/// A load balancer as the cloud has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancer {
    /// Its name (the path segment).
    pub name: String,
    /// The address it listens on, allocated by the cloud.
    pub address: String,
    /// What was asked of it.
    #[serde(flatten)]
    pub spec: LoadBalancerSpec,
}

/// A route: a pod CIDR sent to an instance.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    /// The route's name (the path segment; set by the cloud from it).
    #[serde(default)]
    pub name: String,
    /// The destination, e.g. `10.244.1.0/24`.
    pub destination_cidr: String,
    /// The node name of the instance the traffic goes to.
    pub target_node: String,
    /// Free-form tags (the provider records the cluster).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct List<T> {
    /// The items of this page, in name order.
    pub items: Vec<T>,
    /// The token for the next page (`?continue=`), absent on the last.
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// Faults the cloud injects, for tests of the callers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Faults {
    /// Added to every API call (not to the data plane), in milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// API calls a second allowed (a token bucket; 0 = unlimited). Calls
    /// beyond it answer 429 at once.
    #[serde(default)]
    pub calls_per_second: u32,
    /// The token bucket's size (0 = `calls_per_second`).
    #[serde(default)]
    pub burst: u32,
    /// The next this many API calls (not `/v1/faults`) answer 500.
    #[serde(default)]
    pub fail_next: u32,
}

/// Why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// The object does not exist (404).
    NotFound,
    /// The request is malformed or asks for something impossible (400).
    Invalid,
    /// A port of the load balancer cannot be listened on: something else on
    /// this machine has it, or the address is not this machine's (409).
    PortInUse,
    /// Every address of the load-balancer range is taken (507).
    AddressesExhausted,
    /// The call was throttled (429); retry after `retryAfterMs`.
    Throttled,
    /// The cloud failed (500), an injected fault too.
    Internal,
}

impl ErrorCode {
    /// The HTTP status the code is answered with.
    pub fn status(self) -> u16 {
        match self {
            Self::NotFound => 404,
            Self::Invalid => 400,
            Self::PortInUse => 409,
            Self::AddressesExhausted => 507,
            Self::Throttled => 429,
            Self::Internal => 500,
        }
    }
}

/// The body of a failed call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiError {
    /// Why.
    pub code: ErrorCode,
    /// For people.
    pub message: String,
    /// For [`ErrorCode::Throttled`]: when to try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_balancer_reads_back_as_written() {
        let lb = LoadBalancer {
            name: "a1".into(),
            address: "127.77.0.1".into(),
            spec: LoadBalancerSpec {
                listeners: vec![Listener {
                    protocol: Protocol::Udp,
                    port: 53,
                    backends: vec![Backend {
                        address: "127.0.0.1".into(),
                        port: 30053,
                    }],
                }],
                tags: BTreeMap::from([("cluster".into(), "kubernetes".into())]),
                health_check: Some(HealthCheck {
                    port: 32000,
                    path: "/healthz".into(),
                }),
            },
        };
        let json = serde_json::to_value(&lb).unwrap();
        assert_eq!(json["listeners"][0]["protocol"], "UDP");
        assert_eq!(json["tags"]["cluster"], "kubernetes");
        assert_eq!(json["healthCheck"]["port"], 32000);
        assert_eq!(serde_json::from_value::<LoadBalancer>(json).unwrap(), lb);
    }

    #[test]
    fn a_load_balancer_written_before_health_checks_reads_without_one() {
        let spec: LoadBalancerSpec = serde_json::from_str(r#"{"listeners":[]}"#).unwrap();
        assert_eq!(spec.health_check, None);
        let json = serde_json::to_value(&spec).unwrap();
        assert!(json.get("healthCheck").is_none());
    }

    #[test]
    fn a_list_without_continue_is_the_last_page() {
        let list: List<Route> = serde_json::from_str(r#"{"items":[]}"#).unwrap();
        assert_eq!(list.continue_token, None);
    }
}
