//! Load-balancer hosts after Node changes: the backend set, rebuilt only
//! when a Node changed, and a host update for each load balancer whose
//! set changed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::*;

impl Shared {
    /// The backend nodes, rebuilt only after a node changed (not for every
    /// ensure: at thousands of nodes, copying them per Service dominates).
    pub(super) fn backend_nodes(&self) -> (Arc<Vec<Node>>, Arc<Backends>) {
        let generation = self.node_generation.load(Ordering::SeqCst);
        let mut cache = self.backend_cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.generation != generation {
            let nodes: Vec<Node> = self
                .nodes
                .state()
                .iter()
                .filter(|n| is_load_balancer_backend(n))
                .map(|n| (**n).clone())
                .collect();
            let set = backends(&nodes);
            // Keep the old set when it did not change, so load balancers
            // given it still share it.
            if *cache.backends != set {
                cache.backends = Arc::new(set);
            }
            cache.nodes = Arc::new(nodes);
            cache.generation = generation;
        }
        (cache.nodes.clone(), cache.backends.clone())
    }

    /// Update the hosts of every load balancer whose backend set changed.
    pub(super) async fn sync_nodes(&self, queue: &WorkQueue<String>) {
        let Some(lb) = self.lb() else { return };
        let (nodes, current) = self.backend_nodes();
        let stale: Vec<String> = self
            .states()
            .iter()
            .filter(|(_, s)| {
                s.backends
                    .as_ref()
                    .is_some_and(|b| !Arc::ptr_eq(b, &current) && b.as_ref() != current.as_ref())
            })
            .map(|(k, _)| k.clone())
            .collect();
        // As many at once as Service workers (Go's `--concurrent-service-syncs`
        // for host updates too): more only meet the cloud's budget sooner.
        let limit = self.config.workers.max(1);
        futures_util::stream::iter(stale)
            .for_each_concurrent(limit, |key| {
                self.update_hosts(lb, key, &nodes, &current, queue)
            })
            .await;
    }

    /// Update one load balancer's hosts (a throttled call again after the
    /// cloud's delay, up to [`HOST_UPDATE_RETRIES`] times); any other
    /// failure queues a full ensure.
    async fn update_hosts(
        &self,
        lb: &dyn LoadBalancer,
        key: String,
        nodes: &Arc<Vec<Node>>,
        current: &Arc<Backends>,
        queue: &WorkQueue<String>,
    ) {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key.as_str()));
        let Some(svc) = self
            .services
            .get(&ObjectRef::new(name).within(ns))
            .map(|s| (*s).clone())
        else {
            return;
        };
        self.update_state(&key, |s| s.backends = Some(current.clone()));
        self.metrics.loadbalancer_sync.inc();
        let started = std::time::Instant::now();
        let mut retries = 0;
        let updated = loop {
            let updated = self
                .metrics
                .cloud(
                    "update_load_balancer",
                    lb.update_load_balancer(&self.config.cluster_name, &svc, nodes),
                )
                .await;
            // A throttled (or retry-after) update is tried again after the
            // cloud's delay, in place: the throttle says nothing about the
            // load balancer, so neither an existence check nor a full
            // ensure (each another call against a spent budget) helps.
            match updated.as_ref().err().and_then(CloudError::retry_delay) {
                Some(delay) if delay <= HOST_UPDATE_RETRY_WAIT && retries < HOST_UPDATE_RETRIES => {
                    retries += 1;
                    tokio::time::sleep(delay).await;
                }
                _ => break updated,
            }
        };
        self.metrics
            .update_host_latency
            .observe(started.elapsed().as_secs_f64());
        match updated {
            Ok(()) => {
                if nodes.is_empty() {
                    self.event(
                        &svc,
                        EventType::Warning,
                        events::UNAVAILABLE_LOAD_BALANCER,
                        events::UNAVAILABLE_LOAD_BALANCER_MESSAGE,
                    )
                    .await;
                } else {
                    self.event(
                        &svc,
                        EventType::Normal,
                        events::UPDATED_LOAD_BALANCER,
                        "Updated load balancer with new hosts",
                    )
                    .await;
                }
            }
            Err(e) if e.is_implemented_elsewhere() => {}
            Err(e) => {
                // As Go: only an error if the load balancer still exists. One
                // deleted in the cloud is not re-created behind the user's
                // back (the drift check, when on, is the way to repair it).
                let exists = self
                    .metrics
                    .cloud(
                        "get_load_balancer",
                        lb.get_load_balancer(&self.config.cluster_name, &svc),
                    )
                    .await;
                match exists {
                    Ok(None) => {
                        tracing::info!(service = %key, error = %e, "the host update failed, but the load balancer no longer exists; leaving it");
                        return;
                    }
                    Ok(Some(_)) => {}
                    Err(check) => {
                        tracing::warn!(service = %key, error = %check, "failed to check if the load balancer exists");
                    }
                }
                self.metrics.nodesync_error.inc();
                let names: Vec<&str> = nodes
                    .iter()
                    .filter_map(|n| n.metadata.name.as_deref())
                    .take(20)
                    .collect();
                self.event(
                    &svc,
                    EventType::Warning,
                    events::UPDATE_LOAD_BALANCER_FAILED,
                    &format!(
                        "Error updating load balancer with new hosts {names:?} [node names limited, total number of nodes: {}], error: {e}",
                        nodes.len()
                    ),
                )
                .await;
                // A full ensure follows: forget the fingerprint, or the
                // unchanged Service would be skipped and the host lost.
                self.update_state(&key, |s| s.ensured = None);
                match e.retry_delay() {
                    Some(delay) => queue.add_after(key, delay),
                    None => queue.add_rate_limited(key),
                }
            }
        }
    }
}
