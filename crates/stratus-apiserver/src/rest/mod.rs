//! The REST operations, as kube-apiserver's handlers and registry
//! strategies carry them out: for each request on a resource, its admission
//! webhooks, then the verb's rules over the store (get, list and watch;
//! create, update, patch and delete with admission and authorization;
//! server-side apply; the scale, binding, eviction and token
//! subresources).
//!
//! The arrows run one way: serving calls these operations, they call
//! admission and auth, and all of them build on storage.

pub(crate) mod apply;
pub(crate) mod disruption;
pub(crate) mod read;
pub(crate) mod scale;
pub(crate) mod token_request;
pub(crate) mod watch;
pub(crate) mod webhooks;
pub(crate) mod write;
