//! Storage: the object store with its revision and bounded history, the
//! events it hands to open watches, field ownership, the patch formats, and
//! the version conversion of custom resources. It knows no request, no
//! admission and no HTTP: the REST operations (the `rest` folder) build on it.

pub(crate) mod conversion;
pub(crate) mod dispatch;
pub(crate) mod event;
pub(crate) mod managed_fields;
pub(crate) mod patch;
pub(crate) mod store;
