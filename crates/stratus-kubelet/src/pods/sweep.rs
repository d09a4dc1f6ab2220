//! The dangling-pod sweep: provider pods with no API pod are deleted, as
//! Go's `deleteDanglingPods`; with the safeguard on, not when that looks
//! like an incomplete view of the API.

use kube_runtime::reflector::ObjectRef;

use super::{Shared, rules, split};

/// When the safeguard holds the sweep back: more than 10 dangling pods, and
/// more than half of the provider's.
pub(super) fn safeguard_holds(dangling: usize, provider_pods: usize) -> bool {
    dangling > 10 && dangling * 2 > provider_pods
}

impl Shared {
    /// Delete provider pods that have no API pod (unless the safeguard is
    /// on and they look like an incomplete view of the API); logged and
    /// counted either way.
    pub(super) async fn sweep_dangling(&self) {
        let provider_pods = match self.call("get_pods", self.provider.get_pods()).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the provider's pods; the dangling-pod sweep waits for the next pass");
                return;
            }
        };
        let dangling: Vec<String> = provider_pods
            .iter()
            .map(rules::key_of)
            .filter(|key| {
                let (namespace, name) = split(key);
                self.pods
                    .get(&ObjectRef::new(name).within(namespace))
                    .is_none()
            })
            .collect();
        if self.config.dangling_safeguard && safeguard_holds(dangling.len(), provider_pods.len()) {
            tracing::warn!(
                dangling = dangling.len(),
                provider_pods = provider_pods.len(),
                "the dangling-pod safeguard holds: most provider pods have no API pod, none is deleted (the API view may be incomplete)"
            );
            self.metrics.dangling_swept(&self.node, 0, dangling.len());
            return;
        }
        self.metrics.dangling_swept(&self.node, dangling.len(), 0);
        for key in dangling {
            tracing::info!(pod = %key, "deleting a provider pod with no API pod");
            self.sync.add(key);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_safeguard_holds_only_for_many_and_most() {
        use super::safeguard_holds;
        assert!(!safeguard_holds(10, 10), "ten are few enough");
        assert!(safeguard_holds(11, 20), "eleven of twenty");
        assert!(!safeguard_holds(11, 22), "half is not most");
        assert!(!safeguard_holds(3, 3));
    }
}
