//! Resource callbacks: how a provider gets Secrets, ConfigMaps and Services
//! without API access of its own.
//!
//! The virtual node implements [`PodResources`] over namespaced, on-demand
//! caches and hands it to the provider; the provider never talks to the API
//! server. [`InMemoryResources`] is a plain implementation for tests and
//! tools.

use std::collections::BTreeMap;
use std::sync::RwLock;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};

use crate::Result;

/// Looks up the objects a pod refers to.
#[async_trait]
pub trait PodResources: Send + Sync {
    /// The Secret `namespace/name`, or `None` if it does not exist.
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>>;

    /// The ConfigMap `namespace/name`, or `None` if it does not exist.
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>>;

    /// The Services of one namespace (for service-link environment
    /// variables).
    async fn list_services(&self, namespace: &str) -> Result<Vec<Service>>;

    /// `namespace/name` changed: forget any cached copy, so the next read
    /// sees the new contents. Does nothing by default.
    fn forget(&self, kind: crate::ResourceKind, namespace: &str, name: &str) {
        let _ = (kind, namespace, name);
    }
}

type Key = (String, String);

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_owned(), name.to_owned())
}

/// [`PodResources`] over objects held in memory.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use stratus_pod::{InMemoryResources, PodResources};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let resources = InMemoryResources::new();
/// let mut cm = ConfigMap::default();
/// cm.metadata.namespace = Some("default".into());
/// cm.metadata.name = Some("settings".into());
/// resources.insert_config_map(cm);
/// assert!(resources.get_config_map("default", "settings").await.unwrap().is_some());
/// assert!(resources.get_config_map("other", "settings").await.unwrap().is_none());
/// # });
/// ```
#[derive(Debug, Default)]
pub struct InMemoryResources {
    secrets: RwLock<BTreeMap<Key, Secret>>,
    config_maps: RwLock<BTreeMap<Key, ConfigMap>>,
    services: RwLock<BTreeMap<Key, Service>>,
}

fn meta_key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Key {
    key(
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl InMemoryResources {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add or replace a Secret (keyed by its namespace and name).
    pub fn insert_secret(&self, secret: Secret) {
        let k = meta_key(&secret.metadata);
        write(&self.secrets).insert(k, secret);
    }

    /// Add or replace a ConfigMap.
    pub fn insert_config_map(&self, config_map: ConfigMap) {
        let k = meta_key(&config_map.metadata);
        write(&self.config_maps).insert(k, config_map);
    }

    /// Add or replace a Service.
    pub fn insert_service(&self, service: Service) {
        let k = meta_key(&service.metadata);
        write(&self.services).insert(k, service);
    }

    /// Remove a Secret.
    pub fn remove_secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        write(&self.secrets).remove(&key(namespace, name))
    }

    /// Remove a ConfigMap.
    pub fn remove_config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        write(&self.config_maps).remove(&key(namespace, name))
    }

    /// Remove a Service.
    pub fn remove_service(&self, namespace: &str, name: &str) -> Option<Service> {
        write(&self.services).remove(&key(namespace, name))
    }
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

#[async_trait]
impl PodResources for InMemoryResources {
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>> {
        Ok(read(&self.secrets).get(&key(namespace, name)).cloned())
    }

    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>> {
        Ok(read(&self.config_maps).get(&key(namespace, name)).cloned())
    }

    async fn list_services(&self, namespace: &str) -> Result<Vec<Service>> {
        Ok(read(&self.services)
            .range(key(namespace, "")..)
            .take_while(|((ns, _), _)| ns == namespace)
            .map(|(_, s)| s.clone())
            .collect())
    }
}
