//! Clusters (Go: `Clusters`; no controller calls it).

use async_trait::async_trait;

use crate::Result;

/// Cluster enumeration (Go: `Clusters`).
#[async_trait]
pub trait Clusters: Send + Sync {
    /// The names of the clusters the provider knows.
    async fn list_clusters(&self) -> Result<Vec<String>>;

    /// The address of the control plane of `cluster_name`.
    async fn master(&self, cluster_name: &str) -> Result<String>;
}
