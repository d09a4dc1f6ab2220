//! Which Service changes queue a Service (Go's `UpdateFunc` and
//! `needsUpdate`), without IO.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Service;
use kube_runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use stratus_cloud::helpers::needs_cleanup;

pub(super) fn key_of(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or("default"),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A hash of what Go's `needsUpdate` compares: the type and class (whether
/// a load balancer is wanted), source ranges, ports (name, protocol, port,
/// node port, target port), session affinity and its config, load-balancer
/// IP, external IPs, external traffic policy, health-check node port,
/// annotations and UID; and whether the Service is being deleted. Any
/// other spec change (a selector, say) does not re-ensure, as in Go. A
/// hash, not the fields: it is kept per Service.
pub(super) fn fingerprint(svc: &Service) -> u64 {
    use std::hash::{Hash, Hasher};
    let spec = svc.spec.clone().unwrap_or_default();
    let ports: Vec<_> = spec
        .ports
        .unwrap_or_default()
        .into_iter()
        .map(|p| json!([p.name, p.protocol, p.port, p.node_port, p.target_port]))
        .collect();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    json!({
        "type": spec.type_,
        "class": spec.load_balancer_class,
        "sourceRanges": spec.load_balancer_source_ranges,
        "ports": ports,
        "sessionAffinity": spec.session_affinity,
        "sessionAffinityConfig": spec.session_affinity_config,
        "loadBalancerIP": spec.load_balancer_ip,
        "externalIPs": spec.external_ips,
        "externalTrafficPolicy": spec.external_traffic_policy,
        "healthCheckNodePort": spec.health_check_node_port,
        "annotations": svc.metadata.annotations,
        "uid": svc.metadata.uid,
        "deleting": svc.metadata.deletion_timestamp.is_some(),
    })
    .to_string()
    .hash(&mut hasher);
    hasher.finish()
}

/// Go's `UpdateFunc` filter: a Service is queued when it is new or gone,
/// when what `needsUpdate` compares changed ([`fingerprint`]), or when it
/// needs cleanup; not for the controller's own finalizer and status
/// writes, nor for a resync of one that did not change (a failed Service
/// waits for its backoff, as in Go).
pub(super) struct RelevantChanges {
    /// The informer's cache: a Service missing from it was deleted.
    cache: Store<Service>,
    /// The last fingerprint seen of each Service.
    seen: HashMap<String, u64>,
}

impl RelevantChanges {
    pub(super) fn new(cache: Store<Service>) -> Self {
        Self {
            cache,
            seen: HashMap::new(),
        }
    }

    /// Whether this event about `svc` should queue it.
    pub(super) fn changed(&mut self, svc: &Service) -> bool {
        let key = key_of(svc);
        let cached = self.cache.get(&ObjectRef::from_obj(svc)).is_some();
        if !cached {
            self.seen.remove(&key);
            return true;
        }
        let print = fingerprint(svc);
        if self.seen.insert(key, print) == Some(print) && !needs_cleanup(svc) {
            return false;
        }
        true
    }
}

pub(super) fn has_ingress(svc: &Service) -> bool {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_cloud::names::finalizers;

    fn service(value: serde_json::Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_what_go_compares_queues_a_service_again() {
        let (cache, mut writer) = kube_runtime::reflector::store::<Service>();
        let mut relevant = RelevantChanges::new(cache);
        let mut svc = service(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "1"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        }));
        let mut seen = |relevant: &mut RelevantChanges, svc: &Service| {
            writer.apply_watcher_event(&kube_runtime::watcher::Event::Apply(svc.clone()));
            relevant.changed(svc)
        };
        assert!(seen(&mut relevant, &svc), "new");
        assert!(!seen(&mut relevant, &svc), "a resync of the same Service");
        svc.metadata.finalizers = Some(vec![finalizers::LOAD_BALANCER_CLEANUP.into()]);
        svc.status =
            serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}))
                .unwrap();
        assert!(
            !seen(&mut relevant, &svc),
            "the controller's own finalizer and status"
        );
        svc.spec.as_mut().unwrap().selector = Some([("app".to_owned(), "web".to_owned())].into());
        assert!(
            !seen(&mut relevant, &svc),
            "a selector: not a field Go's needsUpdate compares"
        );
        svc.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].port = 8080;
        assert!(seen(&mut relevant, &svc), "a port");
        svc.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
        assert!(seen(&mut relevant, &svc), "an annotation");
        svc.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert!(seen(&mut relevant, &svc), "deleted, needing cleanup");
        assert!(seen(&mut relevant, &svc), "still needing cleanup");
        // Gone from the cache: queued, and forgotten.
        writer.apply_watcher_event(&kube_runtime::watcher::Event::Delete(svc.clone()));
        assert!(relevant.changed(&svc));
        assert!(relevant.seen.is_empty());
    }
}
