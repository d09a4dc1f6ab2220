//! Changes of the ConfigMaps and Secrets pods use.

use async_trait::async_trait;

use crate::Result;

/// The kind of a referenced object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    /// A ConfigMap.
    ConfigMap,
    /// A Secret.
    Secret,
}

impl std::fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
        })
    }
}

/// A ConfigMap or Secret that changed (or was deleted), and the node's pods
/// that reference it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceChange {
    /// ConfigMap or Secret.
    pub kind: ResourceKind,
    /// Its namespace (the pods' namespace).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Whether it was deleted.
    pub deleted: bool,
    /// The names of the node's pods in `namespace` that reference it (env,
    /// `envFrom`, volumes, image pull secrets).
    pub pods: Vec<String>,
}

/// Told when a ConfigMap or Secret referenced by one of the node's pods
/// changes, so that the provider can refresh mounted files or restart
/// what read them (Go virtual-kubelet has no such hook; providers polled).
/// The new contents are read through [`PodResources`](crate::PodResources).
///
/// ```
/// use async_trait::async_trait;
/// use stratus_pod::{ResourceChange, ResourceChanges, ResourceKind, Result};
///
/// struct Refresher;
///
/// #[async_trait]
/// impl ResourceChanges for Refresher {
///     async fn resource_changed(&self, change: &ResourceChange) -> Result<()> {
///         for pod in &change.pods {
///             println!("refresh {}/{pod}: {} {} changed", change.namespace, change.kind, change.name);
///         }
///         Ok(())
///     }
/// }
/// # let _ = Refresher;
/// # let _ = ResourceKind::Secret;
/// ```
#[async_trait]
pub trait ResourceChanges: Send + Sync {
    /// `change` happened. An error is logged; the next change is told
    /// again.
    async fn resource_changed(&self, change: &ResourceChange) -> Result<()>;
}
