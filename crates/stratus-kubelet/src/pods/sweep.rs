//! The dangling-pod sweep: provider pods with no API pod are deleted,
//! unless that looks like an incomplete view of the API.

use kube_runtime::reflector::ObjectRef;

use super::{Shared, rules, split};

impl Shared {
    /// Delete provider pods that have no API pod, unless that looks like an
    /// incomplete view of the API.
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
        if dangling.is_empty() {
            return;
        }
        if dangling.len() > 10 && dangling.len() * 2 > provider_pods.len() {
            tracing::warn!(
                dangling = dangling.len(),
                provider_pods = provider_pods.len(),
                "most provider pods have no API pod; not deleting them (the API view may be incomplete)"
            );
            return;
        }
        for key in dangling {
            tracing::info!(pod = %key, "deleting a provider pod with no API pod");
            self.sync.add(key);
        }
    }
}
