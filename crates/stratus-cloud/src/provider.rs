//! The top-level provider trait and the context its initialization hook gets.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

use crate::{
    Clusters, Instances, InstancesV2, LoadBalancer, Result, Routes, ShutdownSignal, Zones,
};

/// A boxed, sendable background task.
pub type BoxTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Runs background tasks for a provider on the manager's executor.
///
/// The manager owns every task spawned through it and stops them when it
/// shuts down, so a provider needs no async runtime of its own.
pub trait Spawn: Send + Sync {
    /// Start `task` in the background. `name` labels it in logs.
    fn spawn(&self, name: &str, task: BoxTask);
}

/// A map from type to value, through which the manager hands a provider
/// things this crate cannot name (today: the manager's `kube::Client`),
/// without this crate depending on them.
///
/// ```
/// use stratus_cloud::Extensions;
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct ApiEndpoint(String);
///
/// let mut ext = Extensions::new();
/// ext.insert(ApiEndpoint("https://127.0.0.1:6443".into()));
/// assert_eq!(ext.get::<ApiEndpoint>().map(|e| e.0.as_str()), Some("https://127.0.0.1:6443"));
/// assert!(ext.get::<String>().is_none());
/// ```
#[derive(Default)]
pub struct Extensions {
    map: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
}

impl Extensions {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Insert a value, returning the previous value of the same type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        self.map
            .insert(TypeId::of::<T>(), Box::new(value))
            .and_then(|old| old.downcast::<T>().ok().map(|b| *b))
    }

    /// The value of type `T`, if one was inserted.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.map
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
    }

    /// Remove and return the value of type `T`.
    pub fn remove<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        self.map
            .remove(&TypeId::of::<T>())
            .and_then(|v| v.downcast::<T>().ok().map(|b| *b))
    }

    /// The number of values held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if no value is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.len())
            .finish()
    }
}

/// What the manager hands a provider when it has won leadership, before any
/// controller starts (Go: `Initialize(clientBuilder, stop)`).
///
/// Stratus keeps this crate free of any Kubernetes client: instead of a client
/// builder, the manager fills [`InitContext::extensions`] with what it has
/// (its own `kube::Client`, with the manager's user agent and rate limits),
/// and a provider that wants API access reads it back. See
/// `docs/architecture.md`.
pub struct InitContext {
    cluster_name: String,
    shutdown: ShutdownSignal,
    spawner: Arc<dyn Spawn>,
    extensions: Extensions,
}

impl InitContext {
    /// A context for `cluster_name` (the `--cluster-name` flag), a shutdown
    /// signal and a spawner.
    pub fn new(
        cluster_name: impl Into<String>,
        shutdown: ShutdownSignal,
        spawner: Arc<dyn Spawn>,
    ) -> Self {
        Self {
            cluster_name: cluster_name.into(),
            shutdown,
            spawner,
            extensions: Extensions::new(),
        }
    }

    /// Add an extension (builder style).
    pub fn with_extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// The cluster name passed to load-balancer and route calls.
    pub fn cluster_name(&self) -> &str {
        &self.cluster_name
    }

    /// Completes when the manager shuts down or loses leadership.
    pub fn shutdown(&self) -> &ShutdownSignal {
        &self.shutdown
    }

    /// Start a background task owned by the manager.
    pub fn spawn(&self, name: &str, task: impl Future<Output = ()> + Send + 'static) {
        self.spawner.spawn(name, Box::pin(task));
    }

    /// The extensions the manager provided.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// The extensions, mutably (for the manager that builds the context).
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }
}

impl fmt::Debug for InitContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InitContext")
            .field("cluster_name", &self.cluster_name)
            .field("shutdown", &self.shutdown)
            .field("extensions", &self.extensions)
            .finish_non_exhaustive()
    }
}

/// A cloud provider: the entry point the manager holds (Go:
/// `cloudprovider.Interface`).
///
/// Each capability accessor returns `None` when the provider does not support
/// it; the controllers that need it then do not start, as in Go. A provider
/// usually implements the capability traits on the same struct and returns
/// `Some(self)`.
///
/// The manager holds providers as `Arc<dyn CloudProvider>`, so the trait is
/// object safe and every method takes `&self`.
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// The provider name; the scheme of provider IDs (`<name>://<id>`).
    fn provider_name(&self) -> &str;

    /// Whether the provider has a cluster ID. The manager refuses to start
    /// when this is false unless `--allow-untagged-cloud` is given, as Go's
    /// sample main does. Defaults to `true`.
    fn has_cluster_id(&self) -> bool {
        true
    }

    /// Runs once after the manager wins leadership and before any controller
    /// starts. Start background work with [`InitContext::spawn`]; stop it when
    /// [`InitContext::shutdown`] fires. An error stops the manager.
    async fn initialize(&self, ctx: &InitContext) -> Result<()> {
        let _ = ctx;
        Ok(())
    }

    /// Load balancers for `type: LoadBalancer` Services.
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        None
    }

    /// Instances, the current interface (preferred over
    /// [`CloudProvider::instances`] and [`CloudProvider::zones`]).
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        None
    }

    /// Instances, the legacy interface. Used only when
    /// [`CloudProvider::instances_v2`] is `None`.
    fn instances(&self) -> Option<&dyn Instances> {
        None
    }

    /// Zones, legacy. Not called when [`CloudProvider::instances_v2`] is
    /// supported.
    fn zones(&self) -> Option<&dyn Zones> {
        None
    }

    /// Routes for the pod network.
    fn routes(&self) -> Option<&dyn Routes> {
        None
    }

    /// Cluster enumeration (no controller calls it; kept for parity).
    fn clusters(&self) -> Option<&dyn Clusters> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_replace_and_remove() {
        let mut ext = Extensions::new();
        assert!(ext.is_empty());
        assert_eq!(ext.insert(5u32), None);
        assert_eq!(ext.insert(7u32), Some(5));
        assert_eq!(ext.len(), 1);
        assert_eq!(ext.remove::<u32>(), Some(7));
        assert!(ext.get::<u32>().is_none());
    }
}
