//! The same operations as the HTTP handlers, called directly on the store:
//! the floor that `cargo xtask bench apiserver` compares HTTP against.

use serde_json::Value;

use super::{ApiServer, ApiServerError};
use crate::rest::read::{self, Representation};
use crate::rest::write;
use crate::state::{Query, ResourceRequest};

fn request(
    server: &ApiServer,
    plural: &str,
    namespace: Option<&str>,
    name: Option<&str>,
    query: &str,
) -> Result<ResourceRequest, ApiServerError> {
    let def = server
        .inner
        .defs()
        .core(plural)
        .ok_or_else(|| ApiServerError::Seed {
            what: plural.to_owned(),
            message: "unknown core resource".into(),
        })?;
    Ok(ResourceRequest {
        def,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        sub: None,
        query: Query::parse(Some(query)),
        user_agent: "stratus-bench".into(),
        user: None,
        warnings: Default::default(),
        conversion: None,
    })
}

fn seed_err(e: crate::error::ApiError) -> ApiServerError {
    ApiServerError::Seed {
        what: "bench".into(),
        message: e.message,
    }
}

/// Create a core object without HTTP.
pub fn create(
    server: &ApiServer,
    plural: &str,
    namespace: &str,
    body: &[u8],
) -> Result<Value, ApiServerError> {
    let req = request(server, plural, Some(namespace), None, "")?;
    write::create(&server.inner, &req, body)
        .map(|(_, v)| v)
        .map_err(seed_err)
}

/// Merge-patch a core object without HTTP.
pub fn merge_patch(
    server: &ApiServer,
    plural: &str,
    namespace: &str,
    name: &str,
    body: &[u8],
) -> Result<Value, ApiServerError> {
    let req = request(server, plural, Some(namespace), Some(name), "")?;
    write::patch(&server.inner, &req, "application/merge-patch+json", body)
        .map(|(_, v)| v)
        .map_err(seed_err)
}

/// List a core collection without HTTP; returns the response size in bytes.
pub fn list(server: &ApiServer, plural: &str, namespace: &str) -> Result<usize, ApiServerError> {
    let req = request(server, plural, Some(namespace), None, "")?;
    read::list(&server.inner, &req, Representation::Full)
        .map(|b| b.len())
        .map_err(seed_err)
}

/// Read every event after `after` from the history, serialized as a watch
/// would; returns how many there were.
pub fn read_events(server: &ApiServer, after: u64) -> usize {
    let mut cursor = after;
    let mut count = 0;
    while let Ok(events) = server.inner.store().events_after(cursor, 4096) {
        if events.is_empty() {
            break;
        }
        for e in &events {
            cursor = e.rv;
            let mut line = Vec::with_capacity(e.object.json.len() + 32);
            line.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":");
            line.extend_from_slice(&e.object.json);
            line.extend_from_slice(b"}\n");
            std::hint::black_box(&line);
            count += 1;
        }
    }
    count
}

/// The total size of the stored JSON of a core collection.
pub fn stored_bytes(
    server: &ApiServer,
    plural: &str,
    namespace: &str,
) -> Result<(usize, usize), ApiServerError> {
    let req = request(server, plural, Some(namespace), None, "")?;
    let (items, _) = server.inner.store().list(req.def, Some(namespace));
    Ok((items.len(), items.iter().map(|s| s.json.len()).sum()))
}
