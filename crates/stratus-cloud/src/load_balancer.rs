//! Load balancers for `type: LoadBalancer` Services (Go: `LoadBalancer`).

use std::collections::BTreeSet;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::{Result, default_load_balancer_name};

/// The `spec.loadBalancerClass` values a load balancer implementation serves.
///
/// Go's service controller serves only Services without a class. The default
/// here is the same; a provider may also serve named classes, or only named
/// classes (when another implementation is the cluster default).
///
/// ```
/// use stratus_cloud::LoadBalancerClasses;
///
/// let go_default = LoadBalancerClasses::default();
/// assert!(go_default.serves(None));
/// assert!(!go_default.serves(Some("example.com/internal")));
///
/// let both = LoadBalancerClasses::default().with_class("example.com/internal");
/// assert!(both.serves(None) && both.serves(Some("example.com/internal")));
///
/// let named_only = LoadBalancerClasses::named(["example.com/internal"]);
/// assert!(!named_only.serves(None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerClasses {
    unclassed: bool,
    named: BTreeSet<String>,
}

impl Default for LoadBalancerClasses {
    /// Only Services without a `loadBalancerClass`, as Go.
    fn default() -> Self {
        Self {
            unclassed: true,
            named: BTreeSet::new(),
        }
    }
}

impl LoadBalancerClasses {
    /// Exactly these named classes, and not Services without a class.
    pub fn named<I, S>(classes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            unclassed: false,
            named: classes.into_iter().map(Into::into).collect(),
        }
    }

    /// Also serve the named class `class`.
    pub fn with_class(mut self, class: impl Into<String>) -> Self {
        self.named.insert(class.into());
        self
    }

    /// Whether Services without a class are served.
    pub fn with_unclassed(mut self, serve: bool) -> Self {
        self.unclassed = serve;
        self
    }

    /// True if a Service with this `spec.loadBalancerClass` is served.
    pub fn serves(&self, class: Option<&str>) -> bool {
        match class {
            None => self.unclassed,
            Some(class) => self.named.contains(class),
        }
    }

    /// True if Services without a class are served.
    pub fn serves_unclassed(&self) -> bool {
        self.unclassed
    }

    /// The named classes served.
    pub fn named_classes(&self) -> impl Iterator<Item = &str> {
        self.named.iter().map(String::as_str)
    }
}

/// A load-balancer implementation (Go: `LoadBalancer`).
///
/// Treat `service` and `nodes` as read-only. `cluster_name` is the value of
/// `--cluster-name` (default `kubernetes`).
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The load balancer's status if it exists, `None` if not. An
    /// implementation that returns [`crate::CloudErrorKind::ImplementedElsewhere`]
    /// elsewhere must still report load balancers it created.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>>;

    /// The cloud name of the Service's load balancer. Defaults to
    /// [`default_load_balancer_name`].
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        let _ = cluster_name;
        default_load_balancer_name(service)
    }

    /// Create or update the load balancer with `nodes` as backends and return
    /// its status. May fail with `ImplementedElsewhere` (the controller then
    /// leaves the Service alone), `RetryAfter` (requeued after exactly that
    /// delay), or `Throttled`.
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus>;

    /// Update only the backends of an existing load balancer. May fail with
    /// `ImplementedElsewhere`.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()>;

    /// Delete the load balancer if it exists; `Ok` if it is absent. Must not
    /// fail with `ImplementedElsewhere`.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()>;

    /// Whether the load balancer exists and already matches `service` with
    /// `nodes` as backends, answered cheaply (a read, no change). Not in Go.
    ///
    /// The service controller asks before ensuring a Service it has no
    /// record of ensuring (after a restart, or in a drift check), so a
    /// restart does not re-ensure every load balancer and a drift check
    /// re-ensures only the ones that drifted. The default answers
    /// [`crate::CloudErrorKind::NotImplemented`]; the controller then
    /// ensures, as Go does.
    async fn load_balancer_up_to_date(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<bool> {
        let _ = (cluster_name, service, nodes);
        Err(crate::CloudError::not_implemented())
    }

    /// The `spec.loadBalancerClass` values this implementation serves.
    /// Defaults to Services without a class only, as Go.
    fn classes(&self) -> LoadBalancerClasses {
        LoadBalancerClasses::default()
    }
}
