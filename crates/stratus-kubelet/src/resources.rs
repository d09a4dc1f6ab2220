//! [`PodResources`] over the API server for a virtual node: Secrets and
//! ConfigMaps are read one object at a time when a pod references them, and
//! Services one namespace at a time, each answer cached for a short TTL.
//! Nothing is listed cluster-wide (Go's virtual-kubelet keeps informers of
//! every Secret and ConfigMap of the cluster in memory).
//!
//! ```no_run
//! use std::time::Duration;
//! use stratus_kubelet::resources::ApiResources;
//! use stratus_pod::PodResources;
//!
//! # async fn run(client: kube::Client) -> stratus_pod::Result<()> {
//! let resources = ApiResources::new(client, Duration::from_secs(30));
//! let secret = resources.get_secret("default", "db-password").await?;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, ListParams};
use stratus_pod::{PodError, PodResources};

type Cached<T> = Mutex<HashMap<(String, String), (Instant, T)>>;

/// Namespaced, on-demand reads of Secrets, ConfigMaps and Services with a
/// TTL cache (bounded: cleared when it holds 10,000 answers).
pub struct ApiResources {
    client: kube::Client,
    ttl: Duration,
    secrets: Cached<Option<Secret>>,
    config_maps: Cached<Option<ConfigMap>>,
    services: Cached<Vec<Service>>,
}

impl std::fmt::Debug for ApiResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiResources")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

const CACHE_LIMIT: usize = 10_000;

fn api_error(what: &str, e: kube::Error) -> PodError {
    match &e {
        kube::Error::Api(s) if s.code == 403 => PodError::new(
            stratus_pod::PodErrorKind::Other,
            format!("reading {what} is forbidden: {}", s.message),
        ),
        _ => PodError::unavailable(None, format!("reading {what}: {e}")),
    }
}

impl ApiResources {
    /// Reads with `client`, answers reused for `ttl`.
    pub fn new(client: kube::Client, ttl: Duration) -> Self {
        Self {
            client,
            ttl,
            secrets: Mutex::new(HashMap::new()),
            config_maps: Mutex::new(HashMap::new()),
            services: Mutex::new(HashMap::new()),
        }
    }

    fn cached<T: Clone>(&self, cache: &Cached<T>, key: &(String, String)) -> Option<T> {
        let cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, v)| v.clone())
    }

    fn store<T>(&self, cache: &Cached<T>, key: (String, String), value: T) {
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, (Instant::now(), value));
    }

    /// How many answers are cached (Secrets, ConfigMaps, Service lists).
    pub fn cached_entries(&self) -> usize {
        len_of(&self.secrets) + len_of(&self.config_maps) + len_of(&self.services)
    }
}

fn len_of<T>(c: &Cached<T>) -> usize {
    c.lock().unwrap_or_else(|e| e.into_inner()).len()
}

#[async_trait]
impl PodResources for ApiResources {
    async fn get_secret(&self, namespace: &str, name: &str) -> stratus_pod::Result<Option<Secret>> {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(hit) = self.cached(&self.secrets, &key) {
            return Ok(hit);
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let value = api
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("secret {namespace}/{name}"), e))?;
        if value.is_some() {
            self.store(&self.secrets, key, value.clone());
        }
        Ok(value)
    }

    async fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> stratus_pod::Result<Option<ConfigMap>> {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(hit) = self.cached(&self.config_maps, &key) {
            return Ok(hit);
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let value = api
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("config map {namespace}/{name}"), e))?;
        if value.is_some() {
            self.store(&self.config_maps, key, value.clone());
        }
        Ok(value)
    }

    async fn list_services(&self, namespace: &str) -> stratus_pod::Result<Vec<Service>> {
        let key = (namespace.to_owned(), String::new());
        if let Some(hit) = self.cached(&self.services, &key) {
            return Ok(hit);
        }
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| api_error(&format!("services in {namespace}"), e))?
            .items;
        self.store(&self.services, key, list.clone());
        Ok(list)
    }

    fn forget(&self, kind: stratus_pod::ResourceKind, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        match kind {
            stratus_pod::ResourceKind::ConfigMap => {
                self.config_maps
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
            }
            stratus_pod::ResourceKind::Secret => {
                self.secrets
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
            }
        }
    }
}
