//! The harness's EndpointSlice controller: what kube-controller-manager's
//! `endpointslice` controller writes, for the Services and pods of a
//! [`crate::TestCluster`] (the harness runs no kube-controller-manager).
//!
//! For each Service with a selector, one EndpointSlice (`addressType: IPv4`)
//! named `<service>-<5 characters of its UID>`, labelled
//! `kubernetes.io/service-name` and
//! `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`,
//! owned by the Service, with one endpoint per pod that matches the selector,
//! has a `status.podIP` and has not finished: `ready` when the pod is Ready
//! and not terminating, `serving` when it is Ready, `terminating` when it is
//! being deleted (Kubernetes' terminating-endpoints behaviour); its ports are
//! the Service's, each `targetPort` resolved (a number, or the name of a
//! container port of the pods). Slices whose Service is gone or lost its
//! selector are deleted. Differences from kube-controller-manager: one slice
//! per Service whatever its size (Go's hold 100 endpoints each), IPv4 only,
//! a named `targetPort` resolved from the first pod that has it.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use k8s_openapi::api::discovery::v1::EndpointSlice;
//! use kube::api::{Api, ListParams};
//! use stratus_testing::TestCluster;
//!
//! let mut cluster = TestCluster::start().await.unwrap();
//! cluster.start_endpoint_slices();
//! let slices: Api<EndpointSlice> = Api::namespaced(cluster.client(), "default");
//! let listed = slices
//!     .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
//!     .await
//!     .unwrap();
//! assert!(listed.items.is_empty(), "no Service web yet");
//! # });
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

/// The `endpointslice.kubernetes.io/managed-by` value of the slices it
/// writes (kube-controller-manager's).
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// How often the controller looks at the Services and pods.
const PERIOD: Duration = Duration::from_millis(100);

/// The slice a Service should have, or `None` if it should have none.
fn desired(service: &Service, pods: &[Pod]) -> Option<serde_json::Value> {
    let name = service.metadata.name.as_deref()?;
    let namespace = service.metadata.namespace.as_deref()?;
    let uid = service.metadata.uid.as_deref()?;
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    let selector = spec.selector.as_ref().filter(|s| !s.is_empty())?;
    let selected: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .filter(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .filter(|p| {
            let status = p.status.as_ref();
            let finished = matches!(
                status.and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            let has_ip = status
                .and_then(|s| s.pod_ip.as_deref())
                .is_some_and(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok());
            has_ip && !finished
        })
        .collect();
    let ports: Vec<serde_json::Value> = spec
        .ports
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let port = match &p.target_port {
                None => Some(p.port),
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => Some(*n),
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(n)) => {
                    n.parse().ok().or_else(|| container_port(&selected, n))
                }
            };
            json!({
                "name": p.name.clone().unwrap_or_default(),
                "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                "port": port,
            })
        })
        .collect();
    let mut endpoints: Vec<serde_json::Value> = selected
        .iter()
        .map(|p| {
            let status = p.status.as_ref();
            let ready = status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let terminating = p.metadata.deletion_timestamp.is_some();
            json!({
                "addresses": [status.and_then(|s| s.pod_ip.clone())],
                "conditions": {"ready": ready && !terminating, "serving": ready, "terminating": terminating},
                "nodeName": p.spec.as_ref().and_then(|s| s.node_name.clone()),
                "targetRef": {
                    "kind": "Pod",
                    "namespace": namespace,
                    "name": p.metadata.name,
                    "uid": p.metadata.uid,
                },
            })
        })
        .collect();
    endpoints.sort_by_key(|e| e["targetRef"]["name"].as_str().map(str::to_owned));
    Some(json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": slice_name(name, uid),
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Service", "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    }))
}

/// `<service>-<the first 5 alphanumerics of its UID>`.
fn slice_name(service: &str, uid: &str) -> String {
    let suffix: String = uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(5)
        .collect();
    let base: String = service.chars().take(63 - 6).collect();
    format!("{base}-{suffix}")
}

/// The number of the container port named `name` in the first pod that has
/// one.
fn container_port(pods: &[&Pod], name: &str) -> Option<i32> {
    pods.iter().find_map(|p| {
        p.spec.as_ref()?.containers.iter().find_map(|c| {
            c.ports
                .as_deref()?
                .iter()
                .find(|cp| cp.name.as_deref() == Some(name))
                .map(|cp| cp.container_port)
        })
    })
}

/// The controller over `client`'s API server, for ever (spawn it and abort
/// it; [`crate::TestCluster::start_endpoint_slices`] does): every 100 ms,
/// the slices of every Service written where they differ from what they
/// should be, and the ones of vanished Services deleted.
pub async fn run_endpoint_slices(client: kube::Client) {
    let services: Api<Service> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    let managed = ListParams::default().labels(&format!(
        "endpointslice.kubernetes.io/managed-by={MANAGED_BY}"
    ));
    // What was last written, by namespace/name: a slice is written again
    // only when it would change.
    let mut written: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    loop {
        tokio::time::sleep(PERIOD).await;
        let (Ok(all_services), Ok(all_pods), Ok(existing)) = (
            services.list(&ListParams::default()).await,
            pods.list(&ListParams::default()).await,
            slices.list(&managed).await,
        ) else {
            continue;
        };
        let mut wanted = BTreeSet::new();
        for service in &all_services.items {
            let Some(slice) = desired(service, &all_pods.items) else {
                continue;
            };
            let (Some(ns), Some(name)) = (
                slice["metadata"]["namespace"].as_str().map(str::to_owned),
                slice["metadata"]["name"].as_str().map(str::to_owned),
            ) else {
                continue;
            };
            let key = (ns.clone(), name.clone());
            wanted.insert(key.clone());
            let present = existing.items.iter().any(|s| {
                s.metadata.namespace.as_deref() == Some(&ns)
                    && s.metadata.name.as_deref() == Some(&name)
            });
            if present && written.get(&key) == Some(&slice) {
                continue;
            }
            let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
            let applied = api
                .patch(
                    &name,
                    &PatchParams::apply(MANAGED_BY).force(),
                    &Patch::Apply(&slice),
                )
                .await;
            match applied {
                Ok(_) => {
                    written.insert(key, slice);
                }
                Err(e) => {
                    tracing::debug!(error = %e, slice = %name, "writing an EndpointSlice failed")
                }
            }
        }
        for slice in existing.items {
            let (Some(ns), Some(name)) = (slice.metadata.namespace, slice.metadata.name) else {
                continue;
            };
            let key = (ns.clone(), name.clone());
            if wanted.contains(&key) {
                continue;
            }
            let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
            let _ = api.delete(&name, &DeleteParams::default()).await;
            written.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ip: Option<&str>, ready: bool, port_name: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("u-{name}"), "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": port_name, "containerPort": 8080}]}]},
            "status": {"podIP": ip, "phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .unwrap()
    }

    fn service(target_port: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "1a2b3c4d-0000"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": target_port}]}
        }))
        .unwrap()
    }

    #[test]
    fn endpoints_carry_the_pods_readiness_and_resolved_ports() {
        let mut terminating = pod("c", Some("127.0.0.3"), true, "http");
        terminating.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap();
        let pods = [
            pod("a", Some("127.0.0.1"), true, "http"),
            pod("b", Some("127.0.0.2"), false, "http"),
            terminating,
            pod("no-ip", None, true, "http"),
        ];
        let slice = desired(&service(json!("http")), &pods).unwrap();
        assert_eq!(slice["metadata"]["name"], "web-1a2b3");
        assert_eq!(slice["ports"][0]["port"], 8080);
        let eps = slice["endpoints"].as_array().unwrap();
        assert_eq!(eps.len(), 3);
        assert_eq!(
            eps[0]["conditions"],
            json!({"ready": true, "serving": true, "terminating": false})
        );
        assert_eq!(
            eps[1]["conditions"],
            json!({"ready": false, "serving": false, "terminating": false})
        );
        assert_eq!(
            eps[2]["conditions"],
            json!({"ready": false, "serving": true, "terminating": true})
        );
        assert_eq!(
            desired(&service(json!(9090)), &pods).unwrap()["ports"][0]["port"],
            9090
        );
        let mut no_selector = service(json!(1));
        no_selector.spec.as_mut().unwrap().selector = None;
        assert!(desired(&no_selector, &pods).is_none());
    }
}
