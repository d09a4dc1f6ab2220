//! Test controls: review answers, fault injection and the request log.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An HTTP verb as the API server names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// Discovery and other non-resource requests.
    Other,
}

impl Verb {
    /// The verb's name, as in RBAC rules.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
            Self::Other => "other",
        }
    }
}

/// One served request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The verb.
    pub verb: Verb,
    /// The resource plural (`pods`), with `/subresource` if any; empty for
    /// non-resource requests.
    pub resource: String,
    /// The namespace, if any.
    pub namespace: Option<String>,
    /// The object name, if any.
    pub name: Option<String>,
    /// The client's User-Agent.
    pub user_agent: String,
    /// Who sent it: the user of its bearer token (a token of
    /// [`ApiServer::add_token`](super::ApiServer::add_token) or a
    /// ServiceAccount token from TokenRequest); empty otherwise.
    pub user: String,
    /// The HTTP status answered.
    pub status: u16,
    /// Time to the response head (a watch's stream is not included).
    pub latency: Duration,
    /// When the response head was ready: for a write, the moment it was
    /// committed and answered.
    pub answered_at: std::time::Instant,
}

/// The request log: the newest records within a budget of bytes (the
/// oldest are dropped past it).
pub(crate) struct RequestLog {
    records: Mutex<LogRecords>,
    budget: usize,
}

#[derive(Default)]
struct LogRecords {
    records: std::collections::VecDeque<RequestRecord>,
    bytes: usize,
}

/// The memory one record takes: its slot (counted twice: the log's
/// buffer grows by doubling) and its strings' allocations, as resident
/// memory ([`resident`](crate::storage::event::resident)).
fn record_bytes(r: &RequestRecord) -> usize {
    use crate::storage::event::malloc_chunk;
    crate::storage::event::resident(
        2 * std::mem::size_of::<RequestRecord>()
            + malloc_chunk(r.resource.capacity())
            + r.namespace
                .as_ref()
                .map_or(0, |s| malloc_chunk(s.capacity()))
            + r.name.as_ref().map_or(0, |s| malloc_chunk(s.capacity()))
            + malloc_chunk(r.user_agent.capacity())
            + malloc_chunk(r.user.capacity()),
    )
}

impl RequestLog {
    /// An empty log keeping at most `budget` bytes of records.
    pub(crate) fn with_budget(budget: usize) -> Self {
        Self {
            records: Mutex::new(LogRecords::default()),
            budget,
        }
    }

    pub(crate) fn push(&self, record: RequestRecord) {
        let mut log = self.records.lock().unwrap_or_else(|e| e.into_inner());
        log.bytes += record_bytes(&record);
        log.records.push_back(record);
        while log.bytes > self.budget {
            let Some(dropped) = log.records.pop_front() else {
                break;
            };
            log.bytes -= record_bytes(&dropped);
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<RequestRecord> {
        let log = self.records.lock().unwrap_or_else(|e| e.into_inner());
        log.records.iter().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        let mut log = self.records.lock().unwrap_or_else(|e| e.into_inner());
        log.records.clear();
        log.bytes = 0;
    }

    pub(crate) fn counts(&self) -> BTreeMap<Verb, usize> {
        let mut out = BTreeMap::new();
        for r in self
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .records
            .iter()
        {
            *out.entry(r.verb).or_default() += 1;
        }
        out
    }
}

/// What a fault does to a matching request.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Delay the request.
    Latency(Duration),
    /// Answer with this status code (a `Status` body with a matching reason).
    Error(u16),
    /// Answer 429 Too Many Requests with `Retry-After` in seconds.
    Throttle {
        /// Seconds for the `Retry-After` header.
        retry_after_secs: u64,
    },
}

/// A fault injected into matching requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Only this verb (any if `None`).
    pub verb: Option<Verb>,
    /// Only this resource (any if `None`): a plural such as `nodes`, which
    /// also covers its subresources, or `nodes/status` for the subresource
    /// alone.
    pub resource: Option<String>,
    /// What to do.
    pub action: FaultAction,
    /// The fraction of matching requests affected, 0.0 to 1.0.
    pub rate: f64,
    /// Stop after affecting this many requests (`None`: never stop).
    pub times: Option<u64>,
}

impl Fault {
    /// A fault on every request matching `verb` and `resource`.
    pub fn new(verb: Option<Verb>, resource: Option<&str>, action: FaultAction) -> Self {
        Self {
            verb,
            resource: resource.map(str::to_owned),
            action,
            rate: 1.0,
            times: None,
        }
    }

    /// Affect only this fraction of matching requests.
    pub fn with_rate(mut self, rate: f64) -> Self {
        self.rate = rate.clamp(0.0, 1.0);
        self
    }

    /// Affect at most `n` requests.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }
}

#[derive(Default)]
struct FaultState {
    faults: Vec<(Fault, u64)>,
    paused_until: Option<Instant>,
    rng: u64,
}

/// The active faults.
#[derive(Default)]
pub(crate) struct Faults {
    state: Mutex<FaultState>,
}

/// The faults that apply to one request.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub(crate) delay: Duration,
    pub(crate) error: Option<FaultAction>,
    pub(crate) paused_for: Option<Duration>,
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn add(&self, fault: Fault) {
        self.lock().faults.push((fault, 0));
    }

    pub(crate) fn clear(&self) {
        let mut s = self.lock();
        s.faults.clear();
        s.paused_until = None;
    }

    pub(crate) fn pause(&self, d: Duration) {
        self.lock().paused_until = Some(Instant::now() + d);
    }

    /// The faults for one request on `resource` (`plural` or
    /// `plural/subresource`): a fault on `nodes` also hits `nodes/status`, a
    /// fault on `nodes/status` only the subresource.
    pub(crate) fn apply(&self, verb: Verb, resource: &str) -> Applied {
        let base = resource.split('/').next().unwrap_or_default();
        let mut s = self.lock();
        let mut out = Applied::default();
        if let Some(until) = s.paused_until {
            let now = Instant::now();
            if until > now {
                out.paused_for = Some(until - now);
                return out;
            }
            s.paused_until = None;
        }
        let mut rng = if s.rng == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            s.rng
        };
        for (fault, used) in s.faults.iter_mut() {
            if fault.verb.is_some_and(|v| v != verb)
                || fault
                    .resource
                    .as_deref()
                    .is_some_and(|r| r != resource && r != base)
                || fault.times.is_some_and(|t| *used >= t)
            {
                continue;
            }
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let roll = (rng >> 11) as f64 / (1u64 << 53) as f64;
            if roll >= fault.rate {
                continue;
            }
            // Latencies add up; of the error faults, the first that matches
            // answers, and only it counts the request towards its `times`.
            match &fault.action {
                FaultAction::Latency(d) => out.delay += *d,
                _ if out.error.is_some() => continue,
                other => out.error = Some(other.clone()),
            }
            *used += 1;
        }
        s.rng = rng;
        out
    }
}

/// A user as a TokenReview reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReviewUser {
    /// `username`.
    pub username: String,
    /// `uid`.
    pub uid: String,
    /// `groups`.
    pub groups: Vec<String>,
}

/// The attributes of a SubjectAccessReview, as the policy sees them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessRequest {
    /// `spec.user`.
    pub user: String,
    /// `spec.groups`.
    pub groups: Vec<String>,
    /// `resourceAttributes.verb` or `nonResourceAttributes.verb`.
    pub verb: String,
    /// `resourceAttributes.resource` (empty for non-resource requests).
    pub resource: String,
    /// `resourceAttributes.subresource`.
    pub subresource: String,
    /// `resourceAttributes.namespace`.
    pub namespace: String,
    /// `resourceAttributes.name`.
    pub name: String,
    /// `nonResourceAttributes.path`.
    pub path: String,
}

/// A SubjectAccessReview policy: allowed, and a reason.
pub(crate) type AccessPolicy = Arc<dyn Fn(&AccessRequest) -> (bool, String) + Send + Sync>;

/// How TokenReviews and SubjectAccessReviews are answered.
pub(crate) struct Reviews {
    /// Each known bearer token: its user, and when it expires (tokens of
    /// TokenRequest; `add_token` tokens never do).
    tokens: Mutex<BTreeMap<String, (ReviewUser, Option<std::time::Instant>)>>,
    pub(crate) policy: Mutex<AccessPolicy>,
    /// A test replaced the default allow-all policy (rules reviews can no
    /// longer list what is allowed).
    pub(crate) custom_policy: std::sync::atomic::AtomicBool,
}

impl Reviews {
    /// Make `token` authenticate as `user` until `expires` (for ever if
    /// `None`).
    pub(crate) fn issue(&self, token: &str, user: ReviewUser, expires: Option<std::time::Instant>) {
        self.tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.to_owned(), (user, expires));
    }

    /// The user `token` authenticates as, if it is known and not expired.
    pub(crate) fn user_of(&self, token: &str) -> Option<ReviewUser> {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let (user, expires) = tokens.get(token)?;
        match expires {
            Some(at) if *at <= std::time::Instant::now() => None,
            _ => Some(user.clone()),
        }
    }
}

impl Default for Reviews {
    fn default() -> Self {
        Self {
            tokens: Mutex::new(BTreeMap::new()),
            policy: Mutex::new(Arc::new(|_| {
                (true, "allowed by the harness default policy".to_owned())
            })),
            custom_policy: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_log_keeps_the_newest_records_within_its_budget() {
        let record = |name: &str| RequestRecord {
            verb: Verb::Get,
            resource: "pods".into(),
            namespace: Some("default".into()),
            name: Some(name.into()),
            user_agent: "test".into(),
            user: String::new(),
            status: 200,
            latency: Duration::ZERO,
            answered_at: std::time::Instant::now(),
        };
        let one = record_bytes(&record("p-0"));
        let log = RequestLog::with_budget(10 * one);
        for i in 0..25 {
            log.push(record(&format!("p-{}", i % 10)));
        }
        let kept = log.snapshot();
        assert_eq!(kept.len(), 10);
        assert_eq!(
            kept[0].name.as_deref(),
            Some("p-5"),
            "the oldest went first"
        );
        log.clear();
        assert!(log.snapshot().is_empty());
    }

    #[test]
    fn faults_match_and_expire() {
        let faults = Faults::default();
        faults.add(Fault::new(Some(Verb::Create), Some("pods"), FaultAction::Error(500)).times(2));
        faults.add(Fault::new(
            None,
            None,
            FaultAction::Latency(Duration::from_millis(5)),
        ));
        assert_eq!(
            faults.apply(Verb::Create, "pods").error,
            Some(FaultAction::Error(500))
        );
        assert_eq!(faults.apply(Verb::Create, "nodes").error, None);
        assert_eq!(
            faults.apply(Verb::Create, "pods").delay,
            Duration::from_millis(5)
        );
        assert!(
            faults.apply(Verb::Create, "pods").error.is_none(),
            "expired after 2"
        );
        faults.pause(Duration::from_secs(60));
        assert!(faults.apply(Verb::Get, "pods").paused_for.is_some());
        faults.clear();
        assert!(faults.apply(Verb::Get, "pods").paused_for.is_none());
    }

    #[test]
    fn fault_rate_is_roughly_honoured() {
        let faults = Faults::default();
        faults.add(Fault::new(None, None, FaultAction::Error(503)).with_rate(0.25));
        let hits = (0..4000)
            .filter(|_| faults.apply(Verb::Get, "x").error.is_some())
            .count();
        assert!((700..1300).contains(&hits), "{hits}");
    }
}
