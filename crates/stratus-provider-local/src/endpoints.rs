//! `backends: endpoints`: load balancers straight to the Services' ready
//! endpoints, kept in step by a watch of EndpointSlices.
//!
//! The manager's `kube::Client` (an [`InitContext`] extension) watches every
//! EndpointSlice that belongs to a Service (label
//! `kubernetes.io/service-name`) into a cache. A load balancer's backends are
//! the ready endpoints of its Service's slices at the slice port named as the
//! Service port (the serving, terminating ones when none is ready, as
//! kube-proxy falls back to them). A slice change reprograms the load
//! balancer of its Service at once, without waiting for the service
//! controller, which only acts on Service and node changes: a pod that
//! stops being ready, or starts terminating, is out of the load balancer
//! within one API call of the slice's change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube_runtime::WatchStreamExt;
use kube_runtime::reflector::{self, Store};
use kube_runtime::watcher;
use stratus_cloud::{CloudError, InitContext, Result};
use stratus_local_cloud::api::{Backend, LoadBalancerSpec};

use crate::LocalProvider;
use crate::load_balancer::service_key;

/// The label naming a slice's Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// How long an ensure waits for the first list of slices.
const CACHE_WAIT: Duration = Duration::from_secs(10);

/// A Service whose load balancer this provider programmed.
#[derive(Debug, Clone)]
struct Programmed {
    cluster: String,
    lb_name: String,
    service: Service,
    /// What was last written, when this provider wrote it.
    written: Option<LoadBalancerSpec>,
}

/// The slice cache and the Services to keep in step with it.
#[derive(Debug, Default)]
pub(crate) struct Endpoints {
    store: OnceLock<Store<EndpointSlice>>,
    programmed: Mutex<HashMap<String, Programmed>>,
}

impl Endpoints {
    /// Remember that `service`'s load balancer `lb_name` follows its
    /// endpoints, and what it was given (`written`) if this call wrote it.
    pub(crate) fn programmed(
        &self,
        cluster: &str,
        lb_name: &str,
        service: &Service,
        written: Option<&LoadBalancerSpec>,
    ) {
        if self.store.get().is_none() {
            return;
        }
        let mut programmed = self
            .programmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = service_key(service);
        let written = written
            .cloned()
            .or_else(|| programmed.get(&key).and_then(|p| p.written.clone()));
        programmed.insert(
            key,
            Programmed {
                cluster: cluster.to_owned(),
                lb_name: lb_name.to_owned(),
                service: service.clone(),
                written,
            },
        );
    }

    /// Stop following `service`.
    pub(crate) fn forget(&self, service: &Service) {
        self.programmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&service_key(service));
    }

    fn get(&self, key: &str) -> Option<Programmed> {
        self.programmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// The backends of one Service port.
    pub(crate) async fn backends(
        &self,
        service: &Service,
        port: &ServicePort,
    ) -> Result<Vec<Backend>> {
        let store = self.store.get().ok_or_else(|| {
            CloudError::invalid_input(
                "`backends: endpoints` needs the manager's client: the provider was not initialized",
            )
        })?;
        if tokio::time::timeout(CACHE_WAIT, store.wait_until_ready())
            .await
            .map_or(true, |r| r.is_err())
        {
            return Err(CloudError::retry_after(
                Duration::from_secs(1),
                "the EndpointSlice cache has not been filled yet",
            ));
        }
        let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let slices = store.state_filter(|s| {
            s.metadata.namespace.as_deref() == Some(namespace)
                && s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME_LABEL))
                    .map(String::as_str)
                    == Some(name)
        });
        Ok(backends_of(&slices, port))
    }
}

/// A list field read the same whatever the Kubernetes version:
/// `EndpointSlice::endpoints` is a `Vec` up to 1.35 and an `Option<Vec>`
/// from 1.36 (the library builds against each, `cargo xtask
/// kubernetes-versions`).
trait Items<T> {
    /// The items; none when the field is absent.
    fn items(&self) -> &[T];
}

impl<T> Items<T> for Vec<T> {
    fn items(&self) -> &[T] {
        self
    }
}

impl<T> Items<T> for Option<Vec<T>> {
    fn items(&self) -> &[T] {
        self.as_deref().unwrap_or_default()
    }
}

/// The ready endpoints of `slices` at `port` (the serving terminating ones
/// if none is ready).
fn backends_of(slices: &[Arc<EndpointSlice>], port: &ServicePort) -> Vec<Backend> {
    let wanted_name = port.name.clone().unwrap_or_default();
    let wanted_protocol = port.protocol.clone().unwrap_or_else(|| "TCP".into());
    let mut ready = Vec::new();
    let mut serving = Vec::new();
    for slice in slices {
        if slice.address_type != "IPv4" {
            continue;
        }
        let Some(number) = slice
            .ports
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find_map(|p| {
                let same = p.name.clone().unwrap_or_default() == wanted_name
                    && p.protocol.clone().unwrap_or_else(|| "TCP".into()) == wanted_protocol;
                same.then_some(p.port).flatten()
            })
        else {
            continue;
        };
        let Ok(number) = u16::try_from(number) else {
            continue;
        };
        for endpoint in slice.endpoints.items() {
            let conditions = endpoint.conditions.clone().unwrap_or_default();
            let Some(address) = endpoint.addresses.first() else {
                continue;
            };
            let backend = Backend {
                address: address.clone(),
                port: number,
            };
            // A nil `ready` means ready (the API's rule).
            if conditions.ready.unwrap_or(true) {
                ready.push(backend);
            } else if conditions.serving.unwrap_or(false) && conditions.terminating.unwrap_or(false)
            {
                serving.push(backend);
            }
        }
    }
    if ready.is_empty() { serving } else { ready }
}

impl LocalProvider {
    /// Fill the slice cache with the manager's client and reprogram a
    /// Service's load balancer whenever one of its slices changes.
    pub(crate) fn watch_endpoints(&self, ctx: &InitContext) -> Result<()> {
        let client = ctx
            .extensions()
            .get::<kube::Client>()
            .cloned()
            .ok_or_else(|| {
                CloudError::invalid_input(
                    "`backends: endpoints` needs the manager's kube::Client in the init context",
                )
            })?;
        let (reader, writer) = reflector::store();
        if self.endpoints.store.set(reader).is_err() {
            return Ok(());
        }
        let slices: Api<EndpointSlice> = Api::all(client);
        let stream = watcher(
            slices,
            watcher::Config::default().labels(SERVICE_NAME_LABEL),
        )
        .default_backoff()
        .reflect(writer);
        let me = self.clone();
        let shutdown = ctx.shutdown().clone();
        ctx.spawn("local-cloud-endpoint-slices", async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                let event = tokio::select! {
                    e = stream.next() => e,
                    () = shutdown.wait() => return,
                };
                let changed = match event {
                    None => return,
                    Some(Ok(watcher::Event::Apply(s) | watcher::Event::Delete(s))) => vec![s],
                    Some(Ok(watcher::Event::InitDone)) => {
                        // After a re-list, every followed Service once.
                        let keys: Vec<String> = me
                            .endpoints
                            .programmed
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .keys()
                            .cloned()
                            .collect();
                        for key in keys {
                            me.reprogram(&key).await;
                        }
                        continue;
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        // A missing RBAC rule shows here (forbidden).
                        tracing::warn!(error = %e, "the EndpointSlice watch failed; it backs off and resumes");
                        continue;
                    }
                };
                for slice in changed {
                    let (Some(ns), Some(service)) = (
                        slice.metadata.namespace.as_deref(),
                        slice.metadata.labels.as_ref().and_then(|l| l.get(SERVICE_NAME_LABEL)),
                    ) else {
                        continue;
                    };
                    me.reprogram(&format!("{ns}/{service}")).await;
                }
            }
        });
        Ok(())
    }

    /// PUT the load balancer of the Service `key` with its current backends,
    /// if this provider follows it and they changed. Also called right after
    /// a load balancer is written: a slice that reached the cache between
    /// the write's reading of it and the Service's registration would
    /// otherwise wait for its next change.
    pub(crate) async fn reprogram(&self, key: &str) {
        let Some(p) = self.endpoints.get(key) else {
            return;
        };
        let result = async {
            let wanted = self.spec(&p.cluster, &p.service, &[]).await?;
            if p.written.as_ref() == Some(&wanted) {
                return Ok(None);
            }
            let lb = self.put(&p.lb_name, &wanted).await?;
            self.endpoints
                .programmed(&p.cluster, &p.lb_name, &p.service, Some(&wanted));
            Ok::<_, CloudError>(Some(lb))
        }
        .await;
        match result {
            Ok(None) => {}
            Ok(Some(lb)) => {
                tracing::debug!(service = key, backends = ?lb.spec.listeners.iter().map(|l| l.backends.len()).collect::<Vec<_>>(),
                "load balancer follows its endpoints")
            }
            Err(e) if e.is_not_found() => self.endpoints.forget(&p.service),
            Err(e) => tracing::warn!(service = key, error = %e,
                "the load balancer could not follow its endpoints; the next change or resync tries again"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(endpoints: serde_json::Value) -> Arc<EndpointSlice> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web-abcde", "namespace": "default"},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "dns", "port": 53, "protocol": "UDP"}],
                "endpoints": endpoints,
            }))
            .unwrap(),
        )
    }

    fn port(name: &str, protocol: &str) -> ServicePort {
        serde_json::from_value(serde_json::json!({"name": name, "port": 80, "protocol": protocol}))
            .unwrap()
    }

    #[test]
    fn ready_endpoints_then_serving_terminating_ones() {
        let s = slice(serde_json::json!([
            {"addresses": ["127.0.0.1"], "conditions": {"ready": true}},
            {"addresses": ["127.0.0.2"], "conditions": {}},
            {"addresses": ["127.0.0.3"], "conditions": {"ready": false, "serving": true, "terminating": true}},
            {"addresses": ["127.0.0.4"], "conditions": {"ready": false}},
        ]));
        let got: Vec<String> = backends_of(&[s], &port("http", "TCP"))
            .into_iter()
            .map(|b| format!("{}:{}", b.address, b.port))
            .collect();
        assert_eq!(got, ["127.0.0.1:8080", "127.0.0.2:8080"]);
        let terminating = slice(serde_json::json!([
            {"addresses": ["127.0.0.3"], "conditions": {"ready": false, "serving": true, "terminating": true}},
        ]));
        assert_eq!(
            backends_of(std::slice::from_ref(&terminating), &port("http", "TCP")).len(),
            1
        );
        assert_eq!(
            backends_of(std::slice::from_ref(&terminating), &port("dns", "UDP"))[0].port,
            53
        );
        assert!(backends_of(&[terminating], &port("other", "TCP")).is_empty());
    }
}
