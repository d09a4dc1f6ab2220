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
use crate::provider::Inner;

/// Watch until the provider is dropped (the task is aborted then).
pub(crate) async fn run(inner: Arc<Inner>) {
    let api: Api<Pod> = Api::all(inner.remote.clone());
    let config = watcher::Config::default().labels(&format!("{NODE_LABEL}={}", inner.node_label));
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let mut listing: Option<Vec<Pod>> = None;
    let mut failing = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                if failing {
                    tracing::info!(node = %inner.node_name, "the remote pod watch works again");
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
                    tracing::warn!(node = %inner.node_name, error = %e, "the remote pod watch failed; retrying");
                    failing = true;
                }
            }
        }
    }
}
