//! One watch on the remote cluster's pods that carry the node's label,
//! across every namespace: resumed after a dropped connection, listed
//! again after 410 Gone (kube-runtime's watcher), with back-off while the
//! remote API fails.

use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher::{self, Event};

use crate::naming::NODE_LABEL;

/// What the watch tells: the provider's side of it.
pub(crate) trait RemotePods: Send + Sync + 'static {
    /// The client of the remote cluster.
    fn remote(&self) -> &kube::Client;
    /// The virtual node's name (for the logs).
    fn node_name(&self) -> &str;
    /// The value of [`NODE_LABEL`] on the node's remote pods.
    fn node_label(&self) -> &str;
    /// A complete listing, after the first list and every relist.
    fn relisted(self: &Arc<Self>, listed: Vec<Pod>);
    /// A remote pod of the node was added or changed.
    fn observed(self: &Arc<Self>, pod: Pod);
    /// A remote pod of the node is gone.
    fn removed(self: &Arc<Self>, pod: &Pod);
}

/// Watch until the provider is dropped (the task is aborted then).
pub(crate) async fn run<P: RemotePods>(inner: Arc<P>) {
    let api: Api<Pod> = Api::all(inner.remote().clone());
    let config = watcher::Config::default().labels(&format!("{NODE_LABEL}={}", inner.node_label()));
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let mut listing: Option<Vec<Pod>> = None;
    let mut failing = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                if failing {
                    tracing::info!(node = %inner.node_name(), "the remote pod watch works again");
                    failing = false;
                }
                match event {
                    Event::Init => listing = Some(Vec::new()),
                    Event::InitApply(pod) => listing.get_or_insert_with(Vec::new).push(pod),
                    Event::InitDone => inner.relisted(listing.take().unwrap_or_default()),
                    Event::Apply(pod) => inner.observed(pod),
                    Event::Delete(pod) => inner.removed(&pod),
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(node = %inner.node_name(), error = %e, "the remote pod watch failed; retrying");
                    failing = true;
                }
            }
        }
    }
}
