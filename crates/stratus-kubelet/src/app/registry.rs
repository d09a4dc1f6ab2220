//! Pod providers by name (Go: the provider registry of
//! `cmd/virtual-kubelet`), chosen with `--provider`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use stratus_pod::{PodLifecycleHandler, PodResources};

/// What a provider's factory gets (Go: `provider.InitConfig`).
#[derive(Clone)]
pub struct ProviderInit {
    /// `--provider-config`, if given.
    pub config_file: Option<PathBuf>,
    /// The node's name (`--nodename`).
    pub node_name: String,
    /// `--os`: `Linux` or `Windows`.
    pub operating_system: String,
    /// The node's InternalIP (`VKUBELET_POD_IP`).
    pub internal_ip: String,
    /// The kubelet API's port (`KUBELET_PORT`).
    pub daemon_port: u16,
    /// The API client.
    pub client: kube::Client,
    /// Where Secrets and ConfigMaps are read (the node's, shared).
    pub resources: Arc<dyn PodResources>,
}

impl std::fmt::Debug for ProviderInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderInit")
            .field("config_file", &self.config_file)
            .field("node_name", &self.node_name)
            .field("operating_system", &self.operating_system)
            .finish_non_exhaustive()
    }
}

/// Builds a provider; an `Err` is printed and the command exits 1.
pub type ProviderFactory =
    Arc<dyn Fn(ProviderInit) -> Result<Arc<dyn PodLifecycleHandler>, String> + Send + Sync>;

/// A registration that could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name is taken.
    #[error("a pod provider named {0:?} is already registered")]
    Duplicate(String),
    /// The name is empty.
    #[error("a pod provider needs a name")]
    EmptyName,
}

fn registry() -> &'static Mutex<BTreeMap<String, ProviderFactory>> {
    static REGISTRY: OnceLock<Mutex<BTreeMap<String, ProviderFactory>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Register `factory` under `name` for `--provider=name`.
///
/// ```
/// use std::sync::Arc;
/// use stratus_kubelet::app::{register_pod_provider, registered_providers, RegistryError};
///
/// let factory = |_init| Err::<Arc<dyn stratus_pod::PodLifecycleHandler>, _>("not today".to_string());
/// register_pod_provider("doc-example", factory).unwrap();
/// assert!(registered_providers().contains(&"doc-example".to_string()));
/// assert_eq!(
///     register_pod_provider("doc-example", factory),
///     Err(RegistryError::Duplicate("doc-example".into()))
/// );
/// ```
pub fn register_pod_provider(
    name: &str,
    factory: impl Fn(ProviderInit) -> Result<Arc<dyn PodLifecycleHandler>, String>
    + Send
    + Sync
    + 'static,
) -> Result<(), RegistryError> {
    if name.trim().is_empty() {
        return Err(RegistryError::EmptyName);
    }
    let mut providers = registry().lock().unwrap_or_else(PoisonError::into_inner);
    if providers.contains_key(name) {
        return Err(RegistryError::Duplicate(name.to_owned()));
    }
    providers.insert(name.to_owned(), Arc::new(factory));
    Ok(())
}

/// The registered names, sorted.
pub fn registered_providers() -> Vec<String> {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .cloned()
        .collect()
}

/// The factory registered as `name`.
pub(crate) fn factory(name: &str) -> Option<ProviderFactory> {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
        .cloned()
}
