//! End-to-end checks against any cluster, given a client: the contracts a
//! cloud controller manager and a virtual node keep, observed only through
//! the API server (Go's cloud-provider e2e tests and virtual-kubelet's
//! `test/e2e` cases). `cargo xtask e2e --kubeconfig FILE` runs them;
//! CI runs them against the demo cluster.
//!
//! Every object the checks create (pods, a Service, and one Node whose
//! instance does not exist, tainted so nothing runs on it) carries the label
//! `app.kubernetes.io/managed-by=stratus-e2e` (and `e2e.stratus.dev/run`),
//! is deleted at the end of its check, and [`cleanup`] deletes what an
//! interrupted run left; nothing else is ever changed.
//!
//! ```no_run
//! use stratus_testing::e2e::{E2eConfig, run_virtual_node_e2e};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let report = run_virtual_node_e2e(client, "vk-demo", &E2eConfig::default()).await;
//! print!("{report}");
//! report.assert_passed();
//! # Ok(())
//! # }
//! ```

mod checks;
mod junit;
mod streams;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams};

pub use checks::{run_ccm_e2e, run_virtual_node_e2e};
pub use junit::junit_xml;
pub(crate) use streams::{attach_probe, exec_echo, port_forward_probe};

/// The label every object the checks create carries; [`cleanup`] deletes
/// by it.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "stratus-e2e");

/// The label naming the run that created an object.
pub const RUN_LABEL: &str = "e2e.stratus.dev/run";

/// How the checks run.
#[derive(Debug, Clone)]
pub struct E2eConfig {
    /// Where test pods and Services are created.
    pub namespace: String,
    /// How long each check waits for the cluster to converge.
    pub wait: Duration,
    /// The run's name (the value of [`RUN_LABEL`], a prefix of the objects'
    /// names).
    pub run: String,
    /// The container image of test pods.
    pub image: String,
    /// Whether the manager under test configures cloud routes (Go's
    /// `--configure-cloud-routes`): then every cloud Node must have a pod
    /// CIDR and `NetworkUnavailable=False`.
    pub routes: bool,
    /// The provider ID of an instance that does not exist, for the
    /// lifecycle check; `None` derives one from a cloud Node's (its last
    /// `/` segment replaced by `<run>-gone`).
    pub gone_provider_id: Option<String>,
}

impl Default for E2eConfig {
    /// Namespace `default`, 60 s per check, a run name from the clock,
    /// image `busybox`, routes checked, the vanished instance's provider ID
    /// derived.
    fn default() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self {
            namespace: "default".into(),
            wait: Duration::from_secs(60),
            run: format!("e2e-{:x}", nanos % 0xff_ffff),
            image: "busybox".into(),
            routes: true,
            gone_provider_id: None,
        }
    }
}

/// Delete every Pod and Service labelled [`MANAGED_BY`] in `namespace`,
/// and every Node so labelled (what an interrupted run left); the answer is
/// how many.
pub async fn cleanup(client: kube::Client, namespace: &str) -> Result<usize, kube::Error> {
    let selector = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let nodes: Api<Node> = Api::all(client);
    let mut deleted = 0;
    for node in nodes.list(&selector).await?.items {
        if let Some(name) = node.metadata.name {
            nodes.delete(&name, &DeleteParams::default()).await?;
            deleted += 1;
        }
    }
    for pod in pods.list(&selector).await?.items {
        if let Some(name) = pod.metadata.name {
            pods.delete(&name, &DeleteParams::default().grace_period(0))
                .await?;
            deleted += 1;
        }
    }
    for service in services.list(&selector).await?.items {
        if let Some(name) = service.metadata.name {
            services.delete(&name, &DeleteParams::default()).await?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
