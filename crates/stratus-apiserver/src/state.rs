//! The server's shared state and the parsed form of a resource request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use crate::admission::defaults::Allocators;
use crate::controls::{Faults, RequestLog, Reviews};
use crate::error::ApiError;
use crate::registry::Registry;
use crate::storage::store::Store;

/// Tunables of the server.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Events kept for watch resumption.
    pub(crate) history: usize,
    /// Bytes the kept events may take (`event::Event::memory`).
    pub(crate) history_bytes: usize,
    /// Bytes the request log may take.
    pub(crate) request_log_bytes: usize,
    /// How often watches with `allowWatchBookmarks` get a bookmark.
    pub(crate) bookmark_interval: Duration,
    /// The largest request body accepted.
    pub(crate) max_body: usize,
    /// Authenticate bearer tokens and authorize with RBAC.
    pub(crate) rbac: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            history: 100_000,
            history_bytes: 256 * 1024 * 1024,
            request_log_bytes: 32 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(5),
            max_body: 3 * 1024 * 1024,
            rbac: false,
        }
    }
}

/// Everything the handlers share; each part reached through its method.
pub(crate) struct Inner {
    defs: Registry,
    store: Store,
    alloc: Allocators,
    settings: Settings,
    reviews: Reviews,
    faults: Faults,
    log: RequestLog,
    /// Bumped to end every open watch.
    watch_epoch: watch::Sender<u64>,
    /// Set when the server shuts down.
    closing: watch::Sender<bool>,
    generate: Mutex<u64>,
}

impl Inner {
    pub(crate) fn new(settings: Settings) -> Arc<Self> {
        let defs = crate::resources::builtin();
        let store = Store::new(defs.len(), settings.history, settings.history_bytes);
        for (index, def) in defs.iter().enumerate() {
            if let Some((_, path)) = crate::storage::dispatch::trigger_field(def) {
                store.set_trigger(index, path);
            }
        }
        let defs = Registry::new(defs);
        let log = RequestLog::with_budget(settings.request_log_bytes);
        Arc::new(Self {
            defs,
            store,
            alloc: Allocators::default(),
            settings,
            reviews: Reviews::default(),
            faults: Faults::default(),
            log,
            watch_epoch: watch::channel(0).0,
            closing: watch::channel(false).0,
            generate: Mutex::new(0x5eed),
        })
    }

    /// The served resources: the built-in ones and those of
    /// CustomResourceDefinitions.
    pub(crate) fn defs(&self) -> &Registry {
        &self.defs
    }

    /// The object store, its revision and its history.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The cluster IP and node port allocators.
    pub(crate) fn alloc(&self) -> &Allocators {
        &self.alloc
    }

    /// The server's tunables.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Tokens and the access policy the reviews answer from.
    pub(crate) fn reviews(&self) -> &Reviews {
        &self.reviews
    }

    /// The faults tests inject.
    pub(crate) fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The request log.
    pub(crate) fn log(&self) -> &RequestLog {
        &self.log
    }

    /// Bumped to end every open watch.
    pub(crate) fn watch_epoch(&self) -> &watch::Sender<u64> {
        &self.watch_epoch
    }

    /// Set when the server shuts down.
    pub(crate) fn closing(&self) -> &watch::Sender<bool> {
        &self.closing
    }

    /// A random-looking 5-character suffix for `generateName`, from the
    /// alphabet the API server uses.
    pub(crate) fn name_suffix(&self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut state = self.generate.lock().unwrap_or_else(|e| e.into_inner());
        let seed = uuid::Uuid::new_v4().as_u128() as u64;
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(seed | 1);
        let mut x = *state;
        (0..5)
            .map(|_| {
                let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
                x /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }
}

/// The parsed query string.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query(pub(crate) HashMap<String, String>);

/// The decoded `key=value` pairs of a query string, in order, repeated
/// keys kept (exec's `command=`).
pub(crate) fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    raw.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

impl Query {
    pub(crate) fn parse(raw: Option<&str>) -> Self {
        Self(query_pairs(raw).into_iter().collect())
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// A boolean parameter, parsed as Go's `strconv.ParseBool`.
    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(
            self.0.get(key).map(String::as_str),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True")
        )
    }

    pub(crate) fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            // kube-apiserver converts the parameter as Go's ParseInt and
            // answers with its error.
            Some(v) => v.parse().map(Some).map_err(|_| {
                let digits = v.strip_prefix('-').unwrap_or(v);
                let why = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    "value out of range"
                } else {
                    "invalid syntax"
                };
                ApiError::bad_request(format!("strconv.ParseInt: parsing {v:?}: {why}"))
            }),
        }
    }
}

/// A request on a resource, after routing.
#[derive(Debug, Clone)]
pub(crate) struct ResourceRequest {
    pub(crate) def: usize,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
    pub(crate) query: Query,
    pub(crate) user_agent: String,
    /// The user of a recognised bearer token (`None`: the administrator).
    pub(crate) user: Option<crate::controls::ReviewUser>,
    /// The warnings the answer carries (`Warning: 299` headers).
    pub(crate) warnings: Warnings,
    /// Set when the client asked for a custom resource version other than
    /// the storage version (`def` is then the storage version's).
    pub(crate) conversion: Option<std::sync::Arc<crate::storage::conversion::Conversion>>,
}

/// Warnings collected while a request is handled, shared by its clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Add `warnings`.
    pub(crate) fn extend(&self, warnings: Vec<String>) {
        if !warnings.is_empty() {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(warnings);
        }
    }

    /// The warnings so far.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl ResourceRequest {
    /// A request body as the resource served stores it.
    pub(crate) fn incoming(&self, body: bytes::Bytes) -> bytes::Bytes {
        match &self.conversion {
            Some(c) => c.incoming(body),
            None => body,
        }
    }

    /// The namespace key in the store ("" for cluster-scoped resources).
    pub(crate) fn ns_key(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }

    /// The field manager: the `fieldManager` parameter, else derived from
    /// the user agent as the API server does (the part before the first `/`).
    pub(crate) fn manager(&self) -> String {
        if let Some(m) = self.query.get("fieldManager") {
            return m.to_owned();
        }
        let ua = self.user_agent.split('/').next().unwrap_or_default();
        if ua.is_empty() {
            "unknown".to_owned()
        } else {
            ua.to_owned()
        }
    }

    pub(crate) fn dry_run(&self) -> bool {
        self.query.get("dryRun") == Some("All")
    }
}

/// A JSON object body of a `kind` object, or a 400 in kube-apiserver's
/// words (`the object provided is unrecognized ...`).
pub(crate) fn parse_object(body: &[u8], kind: &str) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {} ({})",
            go_json_error(body, &e),
            summarize(body)
        ))
    })?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(value)
}

/// A body as kube-apiserver quotes it in a decoding error: JSON up to 30
/// bytes, anything else in hex.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let cut = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(cut)),
        Some(_) => {
            let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// A JSON syntax error in the words of Go's `encoding/json`.
pub(crate) fn go_json_error(body: &[u8], e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".to_owned();
    }
    // The offending character, at serde's line and column (1-based).
    let text = String::from_utf8_lossy(body);
    let found = text.lines().nth(e.line().saturating_sub(1)).and_then(|l| {
        // serde counts the column in bytes.
        l.get(e.column().saturating_sub(1)..)?.chars().next()
    });
    let Some(c) = found else {
        return e.to_string();
    };
    let message = e.to_string();
    let context = if message.starts_with("expected `:`") {
        "after object key"
    } else if message.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if message.starts_with("expected `,` or `]`") {
        "after array element"
    } else if message.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if message.starts_with("trailing characters") {
        "after top-level value"
    } else if message.starts_with("control character") {
        "in string literal"
    } else if message.starts_with("invalid escape") {
        "in string escape code"
    } else {
        "looking for beginning of value"
    };
    let quoted = match c {
        '\'' => "'\\''".to_owned(),
        '\n' => "'\\n'".to_owned(),
        '\t' => "'\\t'".to_owned(),
        '\r' => "'\\r'".to_owned(),
        c if (c as u32) < 0x20 => format!("'\\x{:02x}'", c as u32),
        c if c.is_control() => format!("'\\u{:04x}'", c as u32),
        c => format!("'{c}'"),
    };
    format!("invalid character {quoted} {context}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> String {
        match parse_object(body.as_bytes(), "ConfigMap") {
            Err(e) => e.message,
            Ok(_) => String::from("parsed"),
        }
    }

    #[test]
    fn bad_json_is_told_in_go_words() {
        assert_eq!(
            message("{\"metadata\": "),
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"metadata\": )"
        );
        assert!(message("{\"a\" 1}").contains("invalid character '1' after object key"));
        assert!(
            message("{\"é\": x}").contains("invalid character 'x' looking for beginning of value")
        );
        assert!(message("nope").ends_with("(6e6f7065)"));
    }
}
