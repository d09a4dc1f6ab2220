//! Serving a custom resource at a version other than its storage version,
//! as the `None` conversion strategy does: the request is carried out at
//! the storage version, with `apiVersion` rewritten in what the client
//! sends (the body's) and in what it gets back (objects, list items, watch
//! events, Table rows). Nothing else of the object changes.

use bytes::Bytes;
use http::Response;
use http_body_util::BodyExt;
use hyper::body::Frame;
use serde_json::Value;

use crate::body::Body;
use crate::registry::Registry;

/// The two `apiVersion`s of a converted request.
#[derive(Debug, Clone)]
pub(crate) struct Conversion {
    /// What the client asked for (`example.com/v1beta1`).
    served: String,
    /// What is stored (`example.com/v1`).
    stored: String,
}

/// If resource `def` is a version of a custom resource other than its
/// storage version: the storage version's index, and how to convert.
pub(crate) fn of(defs: &Registry, def: usize) -> Option<(usize, Conversion)> {
    let storage_version = defs.custom(def)?.storage_version?;
    let served = &defs.get(def);
    let storage = defs.find(served.group, storage_version, served.plural)?;
    let conversion = Conversion {
        served: served.api_version(),
        stored: defs.get(storage).api_version(),
    };
    Some((storage, conversion))
}

fn swap(value: &mut Value, from: &str, to: &str) {
    if let Some(v) = value.get_mut("apiVersion")
        && v.as_str() == Some(from)
    {
        *v = Value::String(to.to_owned());
    }
}

/// Rewrite an object, a list's items, a watch event's object or a Table's
/// row objects.
fn rewrite(value: &mut Value, from: &str, to: &str) {
    swap(value, from, to);
    if let Some(object) = value.get_mut("object") {
        swap(object, from, to);
    }
    for key in ["items", "rows"] {
        if let Some(list) = value.get_mut(key).and_then(Value::as_array_mut) {
            for item in list {
                swap(item, from, to);
                if let Some(object) = item.get_mut("object") {
                    swap(object, from, to);
                }
            }
        }
    }
}

impl Conversion {
    /// A request body at the served version, as the storage version's.
    pub(crate) fn incoming(&self, body: Bytes) -> Bytes {
        match serde_json::from_slice::<Value>(&body) {
            Ok(mut value) if value.is_object() => {
                swap(&mut value, &self.served, &self.stored);
                Bytes::from(serde_json::to_vec(&value).unwrap_or_default())
            }
            _ => body,
        }
    }

    fn outgoing_bytes(&self, bytes: &[u8]) -> Option<Bytes> {
        let mut value: Value = serde_json::from_slice(bytes).ok()?;
        rewrite(&mut value, &self.stored, &self.served);
        serde_json::to_vec(&value).ok().map(Bytes::from)
    }

    /// A response at the storage version, as the served version's; a
    /// watch is rewritten event by event as it streams.
    pub(crate) async fn outgoing(&self, resp: Response<Body>, watch: bool) -> Response<Body> {
        let (mut parts, body) = resp.into_parts();
        if watch {
            let this = self.clone();
            let body = body
                .map_frame(move |frame| match frame.into_data() {
                    Ok(data) => {
                        let mut out = Vec::with_capacity(data.len());
                        for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                            match this.outgoing_bytes(line) {
                                Some(converted) => out.extend_from_slice(&converted),
                                None => out.extend_from_slice(line),
                            }
                            out.push(b'\n');
                        }
                        Frame::data(Bytes::from(out))
                    }
                    Err(other) => other,
                })
                .boxed_unsync();
            return Response::from_parts(parts, body);
        }
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        };
        let bytes = self.outgoing_bytes(&bytes).unwrap_or(bytes);
        parts.headers.remove(http::header::CONTENT_LENGTH);
        Response::from_parts(parts, http_body_util::Full::new(bytes).boxed_unsync())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_lists_events_and_tables_are_rewritten() {
        let c = Conversion {
            served: "example.com/v1beta1".into(),
            stored: "example.com/v1".into(),
        };
        let body = c.incoming(Bytes::from(
            json!({"apiVersion": "example.com/v1beta1", "kind": "W"}).to_string(),
        ));
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap()["apiVersion"],
            "example.com/v1"
        );
        let list = json!({"apiVersion": "example.com/v1", "kind": "WList",
            "items": [{"apiVersion": "example.com/v1", "spec": {"ref": "example.com/v1"}}]});
        let out: Value =
            serde_json::from_slice(&c.outgoing_bytes(list.to_string().as_bytes()).unwrap())
                .unwrap();
        assert_eq!(out["apiVersion"], "example.com/v1beta1");
        assert_eq!(out["items"][0]["apiVersion"], "example.com/v1beta1");
        assert_eq!(
            out["items"][0]["spec"]["ref"], "example.com/v1",
            "only apiVersion"
        );
        let event = json!({"type": "ADDED", "object": {"apiVersion": "example.com/v1"}});
        let out: Value =
            serde_json::from_slice(&c.outgoing_bytes(event.to_string().as_bytes()).unwrap())
                .unwrap();
        assert_eq!(out["object"]["apiVersion"], "example.com/v1beta1");
        let status = json!({"apiVersion": "v1", "kind": "Status"});
        let out: Value =
            serde_json::from_slice(&c.outgoing_bytes(status.to_string().as_bytes()).unwrap())
                .unwrap();
        assert_eq!(out["apiVersion"], "v1");
    }
}
