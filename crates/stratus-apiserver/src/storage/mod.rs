//! Storage and watch: the object store with its revision and history,
//! reads, writes (create, update, patch, delete, server-side apply and the
//! write subresources), watches, and the version conversion of custom
//! resources.

pub(crate) mod apply;
pub(crate) mod conversion;
pub(crate) mod dispatch;
pub(crate) mod disruption;
pub(crate) mod event;
pub(crate) mod managed_fields;
pub(crate) mod patch;
pub(crate) mod read;
pub(crate) mod scale;
pub(crate) mod store;
pub(crate) mod watch;
pub(crate) mod write;
