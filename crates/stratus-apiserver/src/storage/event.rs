//! A stored object and a change to it, as the store keeps them and watches
//! see them, and the memory each takes (what bounds the history in bytes).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

/// The kind of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// A stored object and its serialized form.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) object: Arc<Value>,
    /// The object's JSON, `apiVersion` and `kind` first (as Go writes
    /// TypeMeta first).
    pub(crate) json: Bytes,
    /// Where the type members end in `json` (1 when it has none).
    pub(crate) type_end: usize,
    pub(crate) rv: u64,
}

impl Stored {
    /// The JSON without `apiVersion` and `kind`, as kube-apiserver writes
    /// the items of a built-in kind's list: the opening brace, and the rest
    /// of `json` to splice after it.
    pub(crate) fn untyped_json(&self) -> (&'static [u8], &[u8]) {
        match self.json.get(self.type_end) {
            _ if self.type_end <= 1 => (b"", &self.json[..]),
            Some(b',') => (b"{", &self.json[self.type_end + 1..]),
            _ => (b"{", b"}"),
        }
    }
}

/// An object's JSON with its type members first, and where they end.
pub(crate) fn encode(object: &Value) -> (Bytes, usize) {
    let Some(map) = object.as_object() else {
        return (
            Bytes::from(serde_json::to_vec(object).unwrap_or_default()),
            1,
        );
    };
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    let mut first = true;
    let mut member = |out: &mut Vec<u8>, key: &str, value: &Value| {
        if !first {
            out.push(b',');
        }
        first = false;
        // Writing a string and a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        let _ = serde_json::to_writer(&mut *out, value);
    };
    for key in ["apiVersion", "kind"] {
        if let Some(v) = map.get(key) {
            member(&mut out, key, v);
        }
    }
    let type_end = out.len();
    for (key, value) in map {
        if key != "apiVersion" && key != "kind" {
            member(&mut out, key, value);
        }
    }
    out.push(b'}');
    // Stored (and kept in the history) for the object's life: no spare
    // capacity from the buffer's doubling.
    out.shrink_to_fit();
    (Bytes::from(out), type_end)
}

/// A change, as watches see it.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) resource: usize,
    pub(crate) namespace: String,
    pub(crate) kind: EventType,
    /// The object after the change (for a deletion: its last state, carrying
    /// the deletion's resourceVersion).
    pub(crate) object: Stored,
    /// The object before the change (modifications and deletions).
    pub(crate) previous: Option<Arc<Value>>,
    /// [`Event::memory`], estimated once when the event is made: the
    /// history adds it when the event comes in and subtracts it when the
    /// event goes, and walking the object's tree twice would cost every
    /// commit a second walk under the store's lock.
    memory: usize,
}

impl Event {
    pub(crate) fn new(
        resource: usize,
        namespace: &str,
        kind: EventType,
        object: Stored,
        previous: Option<Arc<Value>>,
    ) -> Self {
        let memory = resident(
            malloc_chunk(std::mem::size_of::<Event>() + 16)
                + 2 * std::mem::size_of::<Arc<Event>>()
                + malloc_chunk(24)
                + value_memory(&object.object)
                + malloc_chunk(object.json.len())
                + malloc_chunk(namespace.len()),
        );
        Self {
            rv: object.rv,
            resource,
            namespace: namespace.to_owned(),
            kind,
            object,
            previous,
            memory,
        }
    }

    /// The memory the history holds for this event: the event itself and
    /// its slot in the history (twice: the buffer grows by doubling), its
    /// object's JSON and the JSON's shared header, and the parsed tree
    /// ([`value_memory`]), as resident memory ([`resident`]).
    pub(crate) fn memory(&self) -> usize {
        self.memory
    }
}

/// The resident memory `chunks` bytes of malloc chunks take: a quarter
/// more, for the fragmentation between glibc's per-thread arenas (objects
/// made on one worker thread and freed on another). Measured by
/// `cargo xtask bench apiserver`: under 100,000 writes from 16 clients the
/// process's resident memory grew 1 to 12 % past the chunks counted, over
/// five runs.
pub(crate) fn resident(chunks: usize) -> usize {
    chunks + chunks / 4
}

/// What glibc's malloc takes for `bytes`: the request and an 8-byte
/// header rounded up to 16, at least 32; nothing for nothing.
pub(crate) fn malloc_chunk(bytes: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        (bytes + 8).next_multiple_of(16).max(32)
    }
}

/// The memory a parsed JSON value takes behind an `Arc`: its node and
/// [`value_heap`].
pub(crate) fn value_memory(value: &Value) -> usize {
    malloc_chunk(std::mem::size_of::<Value>() + 16) + value_heap(value)
}

/// The heap a parsed JSON value holds beyond its own node: strings' bytes,
/// arrays' slots, and maps' B-tree nodes — a node holds up to 11 keys and
/// values inline and is allocated whole (about 640 bytes even for one
/// entry); past one node, nodes run about two thirds full.
fn value_heap(value: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    const TREE_NODE: usize = 11 * (std::mem::size_of::<String>() + NODE) + 16;
    match value {
        Value::String(s) => malloc_chunk(s.capacity()),
        Value::Array(items) => {
            malloc_chunk(items.capacity() * NODE) + items.iter().map(value_heap).sum::<usize>()
        }
        Value::Object(map) if map.is_empty() => 0,
        Value::Object(map) => {
            let nodes = if map.len() <= 11 {
                1
            } else {
                map.len().div_ceil(7)
            };
            nodes * malloc_chunk(TREE_NODE)
                + map
                    .iter()
                    .map(|(key, value)| malloc_chunk(key.capacity()) + value_heap(value))
                    .sum::<usize>()
        }
        _ => 0,
    }
}
