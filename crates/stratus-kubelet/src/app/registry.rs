//! Pod providers by name (Go: the provider registry of
//! `cmd/virtual-kubelet`), chosen with `--provider`.

use std::path::PathBuf;
use std::sync::Arc;
use stratus_runtime::command::VendorFlags;
use stratus_runtime::registry::Registry;
pub use stratus_runtime::registry::RegistryError;

use std::future::Future;
use std::pin::Pin;

use stratus_pod::{NodeProvider, PodLifecycleHandler, PodResources};

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
    /// The vendor's flags, parsed (a `Command::with_flags::<F>()`'s `F`;
    /// [`NoFlags`](super::NoFlags) otherwise). Read them with
    /// [`ProviderInit::flags`].
    pub flags: VendorFlags,
}

impl ProviderInit {
    /// The vendor's flags, if the command was built with flags of type
    /// `F` (`Command::with_flags::<F>()`).
    pub fn flags<F: 'static>(&self) -> Option<&F> {
        self.flags.get::<F>()
    }
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

/// What an asynchronous factory ([`register_provider`]) returns: the pod
/// provider and, optionally, the node provider (ping, capacity, node
/// status updates; default: always healthy, the command's capacity).
#[derive(Clone)]
pub struct Providers {
    /// The pod provider.
    pub pods: Arc<dyn PodLifecycleHandler>,
    /// The node provider, if the provider has one.
    pub node: Option<Arc<dyn NodeProvider>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("node", &self.node.is_some())
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// A pod provider alone.
    pub fn pods(pods: Arc<dyn PodLifecycleHandler>) -> Self {
        Self { pods, node: None }
    }

    /// With a node provider.
    pub fn with_node(mut self, node: Arc<dyn NodeProvider>) -> Self {
        self.node = Some(node);
        self
    }
}

/// The future an asynchronous factory returns.
pub type ProvidersFuture = Pin<Box<dyn Future<Output = Result<Providers, String>> + Send>>;

/// How the registry keeps every factory.
pub(crate) type AsyncFactory = Arc<dyn Fn(ProviderInit) -> ProvidersFuture + Send + Sync>;

/// The process-wide registry of pod providers.
static REGISTRY: Registry<AsyncFactory> = Registry::new("pod provider", &[]);

/// Register `factory` under `name` for `--provider=name`.
///
/// ```
/// use std::sync::Arc;
/// use stratus_kubelet::app::{register_pod_provider, registered_providers, RegistryError};
///
/// let factory = |_init| Err::<Arc<dyn stratus_pod::PodLifecycleHandler>, _>("not today".to_string());
/// register_pod_provider("doc-example", factory).unwrap();
/// assert!(registered_providers().contains(&"doc-example".to_string()));
/// assert!(matches!(
///     register_pod_provider("doc-example", factory),
///     Err(RegistryError::Duplicate { .. })
/// ));
/// ```
pub fn register_pod_provider(
    name: &str,
    factory: impl Fn(ProviderInit) -> Result<Arc<dyn PodLifecycleHandler>, String>
    + Send
    + Sync
    + 'static,
) -> Result<(), RegistryError> {
    register_provider(name, move |init| {
        let made = factory(init).map(Providers::pods);
        async move { made }
    })
}

/// Register an asynchronous `factory` under `name` for `--provider=name`:
/// it may await (connect to the backend, read Secrets through
/// `init.client`) and return a node provider too.
///
/// ```
/// use std::sync::Arc;
/// use stratus_kubelet::app::{Providers, register_provider, registered_providers};
/// use stratus_pod::NaiveNodeProvider;
/// # struct MyProvider;
/// # #[async_trait::async_trait]
/// # impl stratus_pod::PodLifecycleHandler for MyProvider {
/// #     async fn create_pod(&self, _: &k8s_openapi::api::core::v1::Pod) -> stratus_pod::Result<()> { Ok(()) }
/// #     async fn update_pod(&self, _: &k8s_openapi::api::core::v1::Pod) -> stratus_pod::Result<()> { Ok(()) }
/// #     async fn delete_pod(&self, _: &k8s_openapi::api::core::v1::Pod) -> stratus_pod::Result<()> { Ok(()) }
/// #     async fn get_pod(&self, _: &str, _: &str) -> stratus_pod::Result<Option<k8s_openapi::api::core::v1::Pod>> { Ok(None) }
/// #     async fn get_pod_status(&self, _: &str, _: &str) -> stratus_pod::Result<Option<k8s_openapi::api::core::v1::PodStatus>> { Ok(None) }
/// #     async fn get_pods(&self) -> stratus_pod::Result<Vec<k8s_openapi::api::core::v1::Pod>> { Ok(vec![]) }
/// # }
///
/// register_provider("doc-async", |init| async move {
///     let _remote = init.client; // e.g. read a Secret with the backend's credentials
///     Ok(Providers::pods(Arc::new(MyProvider)).with_node(Arc::new(NaiveNodeProvider)))
/// })
/// .unwrap();
/// assert!(registered_providers().contains(&"doc-async".to_string()));
/// ```
pub fn register_provider<F>(
    name: &str,
    factory: impl Fn(ProviderInit) -> F + Send + Sync + 'static,
) -> Result<(), RegistryError>
where
    F: Future<Output = Result<Providers, String>> + Send + 'static,
{
    let factory: AsyncFactory = Arc::new(move |init| Box::pin(factory(init)));
    REGISTRY.register(name, factory)
}

/// The registered names, sorted.
pub fn registered_providers() -> Vec<String> {
    REGISTRY.names()
}

/// The factory registered as `name`, or an error listing the names.
pub(crate) fn factory(name: &str) -> Result<AsyncFactory, RegistryError> {
    REGISTRY.get(name)
}
