//! Reads: get and list, with selectors, pagination and the metadata-only
//! and Table representations.

use std::time::Duration;

use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::fields;
use crate::meta::{self, partial, str_at};
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::{Inner, Query, ResourceRequest};
use crate::storage::event::Stored;
use crate::tables;

/// How long a read at a resourceVersion the store has not reached waits for
/// it (kube-apiserver's watch cache: 3 s), and the retry it then asks.
const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);
const TOO_LARGE_RETRY_SECONDS: u64 = 1;

/// Before a get or list at a `resourceVersion` the store has not reached,
/// wait for that revision for at most 3 s, then fail with kube-apiserver's
/// 504 "Too large resource version". A `resourceVersion` that does not parse
/// is left for the read to refuse. (A watch from such a revision does not
/// wait: it opens and sends only later events, as kube-apiserver's does.)
pub(crate) async fn await_revision(inner: &Inner, req: &ResourceRequest) -> Result<(), ApiError> {
    let Some(wanted) = req
        .query
        .get("resourceVersion")
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return Ok(());
    };
    if !matches!(
        req.query.get("resourceVersionMatch"),
        None | Some("NotOlderThan" | "Exact")
    ) {
        return Ok(());
    }
    let mut changes = inner.store().subscribe();
    let deadline = tokio::time::Instant::now() + TOO_LARGE_WAIT;
    loop {
        changes.borrow_and_update();
        let current = inner.store().revision();
        if wanted <= current {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            // Timed out, or the store is gone: the revision was not reached.
            Ok(Err(_)) | Err(_) => return Err(too_large(wanted, inner.store().revision())),
        }
    }
}

/// kube-apiserver's error for a resourceVersion beyond the current one.
fn too_large(wanted: u64, current: u64) -> ApiError {
    ApiError {
        details: Some(json!({"causes": [{
            "reason": "ResourceVersionTooLarge",
            "message": "Too large resource version",
        }]})),
        retry_after: Some(TOO_LARGE_RETRY_SECONDS),
        ..ApiError::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {wanted}, current: {current}"),
        )
    }
}

/// How the client asked to see objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Representation {
    Full,
    Metadata,
    Table,
}

impl Representation {
    pub(crate) fn from_accept(accept: &str) -> Self {
        // The first acceptable alternative wins, as in content negotiation.
        for alt in accept.split(',') {
            let alt = alt.replace(' ', "");
            if alt.contains("as=Table") {
                return Self::Table;
            }
            if alt.contains("as=PartialObjectMetadata") {
                return Self::Metadata;
            }
            if alt.starts_with("application/json") || alt.starts_with("*/*") {
                return Self::Full;
            }
        }
        Self::Full
    }
}

/// Label and field selectors of a request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
    /// A custom resource's `selectableFields`: name and JSON path.
    extra: Vec<(&'static str, Vec<String>)>,
}

impl Filter {
    /// The filter of a request on the resource at `index`.
    pub(crate) fn of(inner: &Inner, index: usize, query: &Query) -> Result<Self, ApiError> {
        let def = &inner.defs().get(index);
        let extra = inner
            .defs()
            .custom(index)
            .map(|c| c.selectable.clone())
            .unwrap_or_default();
        Self::from_query(def, extra, query)
    }

    fn from_query(
        def: &ResourceDef,
        extra: Vec<(&'static str, Vec<String>)>,
        query: &Query,
    ) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or_default())
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or_default())
            .map_err(ApiError::bad_request)?;
        if let Some(unsupported) = fields
            .fields()
            .find(|f| !fields::supported(def, f) && !extra.iter().any(|(e, _)| e == f))
        {
            // Kinds with only the metadata fields answer with the generic
            // converter's words, kinds with their own fields with theirs.
            return Err(ApiError::bad_request(
                if fields::selectable(def).is_empty() && extra.is_empty() {
                    format!(
                        "{unsupported:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    )
                } else {
                    format!("field label not supported: {unsupported}")
                },
            ));
        }
        Ok(Self {
            labels,
            fields,
            extra,
        })
    }

    /// The value the field selector requires of `field`, if it does.
    pub(crate) fn required_field(&self, field: &str) -> Option<&str> {
        self.fields.required(field)
    }

    /// True if the filter selects every object (no label or field
    /// selector).
    pub(crate) fn is_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub(crate) fn matches(&self, def: &ResourceDef, obj: &Value) -> bool {
        if !(self.labels.is_empty() || self.labels.matches(meta::labels(obj))) {
            return false;
        }
        if self.fields.is_empty() {
            return true;
        }
        self.fields.matches(
            |field| match self.extra.iter().find(|(extra, _)| *extra == field) {
                Some((_, path)) => fields::text_at(obj, path),
                None => fields::value(def, obj, field).unwrap_or_default(),
            },
        )
    }
}

/// GET of one object.
pub(crate) fn get(
    inner: &Inner,
    req: &ResourceRequest,
    repr: Representation,
) -> Result<Bytes, ApiError> {
    let def = &inner.defs().get(req.def);
    let name = req.name.as_deref().unwrap_or_default();
    let stored = inner
        .store()
        .get(req.def, req.ns_key(), name)
        .ok_or_else(|| ApiError::not_found(def, name))?;
    Ok(match repr {
        Representation::Full => stored.json,
        Representation::Metadata => {
            Bytes::from(serde_json::to_vec(&partial(&stored.object)).unwrap_or_default())
        }
        Representation::Table => {
            let t = tables::table(
                def,
                inner.defs().custom(req.def).as_deref(),
                &[&stored.object],
                &inner.store().revision().to_string(),
                None,
                req.query.get("includeObject"),
            );
            Bytes::from(serde_json::to_vec(&t).unwrap_or_default())
        }
    })
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    /// The last (namespace, name) returned.
    start: (String, String),
}

fn encode_token(rv: u64, start: (String, String)) -> String {
    let json = serde_json::to_vec(&ContinueToken { rv, start }).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn decode_token(token: &str) -> Result<ContinueToken, ApiError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| ApiError::bad_request("invalid continue token"))?;
    serde_json::from_slice(&bytes).map_err(|_| ApiError::bad_request("invalid continue token"))
}

fn key_of(obj: &Value) -> (String, String) {
    (
        str_at(obj, &["metadata", "namespace"])
            .unwrap_or_default()
            .to_owned(),
        meta::name(obj).to_owned(),
    )
}

/// LIST of a collection.
pub(crate) fn list(
    inner: &Inner,
    req: &ResourceRequest,
    repr: Representation,
) -> Result<Bytes, ApiError> {
    let def = &inner.defs().get(req.def);
    let filter = Filter::of(inner, req.def, &req.query)?;
    let limit: Option<usize> = req.query.number("limit")?.filter(|l: &usize| *l > 0);
    let rv_param: Option<u64> = match req.query.get("resourceVersion") {
        None => None,
        Some(v) => Some(
            v.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {v:?}")))?,
        ),
    };
    let (items, revision) = inner.store().list(req.def, req.namespace.as_deref());
    match (req.query.get("resourceVersionMatch"), rv_param) {
        (Some("Exact"), Some(rv)) if rv != revision => {
            if rv > revision {
                return Err(too_large(rv, revision));
            }
            return Err(ApiError::gone(format!(
                "too old resource version: {rv} ({revision}); the harness serves Exact reads only at the current revision"
            )));
        }
        // Without a resourceVersion it was refused with the request's
        // options (`http::check_options`).
        (Some("Exact" | "NotOlderThan") | None, _) => {}
        (Some(other), _) => {
            return Err(ApiError::bad_request(format!(
                "invalid resourceVersionMatch {other:?}"
            )));
        }
    }
    // `await_revision` waited for it; a revision still not reached fails.
    if let Some(rv) = rv_param
        && rv > revision
    {
        return Err(too_large(rv, revision));
    }
    let (list_rv, start) = match req.query.get("continue") {
        Some(token) => {
            let t = decode_token(token)?;
            if t.rv < inner.store().oldest_resumable() {
                return Err(ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ));
            }
            (t.rv, Some(t.start))
        }
        None => (revision, None),
    };
    let mut selected: Vec<&Stored> = items
        .iter()
        .filter(|s| start.as_ref().is_none_or(|k| key_of(&s.object) > *k))
        .filter(|s| filter.matches(def, &s.object))
        .collect();
    let mut continue_token = None;
    let mut remaining = None;
    if let Some(limit) = limit
        && selected.len() > limit
    {
        remaining = Some(selected.len() - limit);
        selected.truncate(limit);
        if let Some(last) = selected.last() {
            continue_token = Some(encode_token(list_rv, key_of(&last.object)));
        }
    }
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if let Some(token) = &continue_token {
        metadata["continue"] = json!(token);
    }
    // As kube-apiserver: the count only when nothing is filtered out (a
    // selector would make counting the rest a full scan).
    if let Some(n) = remaining.filter(|_| filter.is_everything()) {
        metadata["remainingItemCount"] = json!(n);
    }
    match repr {
        Representation::Table => {
            let objects: Vec<&Value> = selected.iter().map(|s| &*s.object).collect();
            let t = tables::table(
                def,
                inner.defs().custom(req.def).as_deref(),
                &objects,
                &list_rv.to_string(),
                continue_token.as_deref(),
                req.query.get("includeObject"),
            );
            Ok(Bytes::from(serde_json::to_vec(&t).unwrap_or_default()))
        }
        Representation::Metadata => {
            let items: Vec<Value> = selected.iter().map(|s| partial(&s.object)).collect();
            let list = json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
                "items": items,
            });
            Ok(Bytes::from(serde_json::to_vec(&list).unwrap_or_default()))
        }
        Representation::Full => {
            // Splice the stored JSON of each item instead of re-serializing.
            let head = json!({"kind": inner.defs().list_kind(req.def), "apiVersion": def.api_version(), "metadata": metadata});
            let head = serde_json::to_vec(&head).unwrap_or_default();
            let size: usize = selected.iter().map(|s| s.json.len() + 1).sum();
            let mut out = BytesMut::with_capacity(head.len() + size + 16);
            out.put_slice(&head[..head.len() - 1]);
            out.put_slice(b",\"items\":[");
            // kube-apiserver leaves the items' apiVersion and kind out of a
            // built-in kind's list (custom resources' lists keep them).
            let typed_items = inner.defs().custom(req.def).is_some();
            for (i, s) in selected.iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                if typed_items {
                    out.put_slice(&s.json);
                } else {
                    let (open, rest) = s.untyped_json();
                    out.put_slice(open);
                    out.put_slice(rest);
                }
            }
            out.put_slice(b"]}");
            Ok(out.freeze())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representation_negotiation() {
        assert_eq!(
            Representation::from_accept(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
            ),
            Representation::Table
        );
        assert_eq!(
            Representation::from_accept(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            ),
            Representation::Metadata
        );
        assert_eq!(
            Representation::from_accept("application/json"),
            Representation::Full
        );
        assert_eq!(Representation::from_accept(""), Representation::Full);
    }

    #[test]
    fn tokens_round_trip() {
        let t = decode_token(&encode_token(42, ("ns".into(), "name".into()))).unwrap();
        assert_eq!(t.rv, 42);
        assert_eq!(t.start, ("ns".to_owned(), "name".to_owned()));
        assert!(decode_token("!!!").is_err());
    }
}
