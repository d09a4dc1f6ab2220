//! Query parameters of the kubelet API, parsed and checked as the kubelet
//! does; a bad value is a [`ParamError`] (answered 400). Pure, unit-tested.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::ContainerLogOptions;

/// A query parameter with a bad value (answered 400 Bad Request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParamError(pub String);

/// The decoded `key=value` pairs of a query string, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Decode `query` (`None`: no query string). `+` is a space.
    ///
    /// ```
    /// use stratus_kubelet::api::Query;
    /// let q = Query::parse(Some("command=ls&command=-l&tty=1"));
    /// assert_eq!(q.all("command"), ["ls", "-l"]);
    /// assert_eq!(q.get("tty"), Some("1"));
    /// ```
    pub fn parse(query: Option<&str>) -> Self {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        Self(
            query
                .unwrap_or_default()
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `key` as a boolean the way Go parses it (`1`, `t`, `true`, ... and
    /// their opposites; absent or empty is false).
    ///
    /// ```
    /// use stratus_kubelet::api::Query;
    /// let q = Query::parse(Some("a=1&b=False&c=maybe"));
    /// assert_eq!(q.flag("a"), Ok(true));
    /// assert_eq!(q.flag("b"), Ok(false));
    /// assert_eq!(q.flag("missing"), Ok(false));
    /// assert!(q.flag("c").is_err());
    /// ```
    pub fn flag(&self, key: &str) -> Result<bool, ParamError> {
        self.get(key)
            .map(|v| parse_bool(key, v))
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// The pairs, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Go's `strconv.ParseBool`, which the kubelet's parameter decoding uses.
fn parse_bool(key: &str, value: &str) -> Result<bool, ParamError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" | "" => Ok(false),
        other => Err(ParamError(format!(
            "{key}: Invalid value: {other:?}: must be a boolean"
        ))),
    }
}

fn parse_int(key: &str, value: &str) -> Result<i64, ParamError> {
    value.parse().map_err(|_| {
        ParamError(format!(
            "{key}: Invalid value: {value:?}: must be an integer"
        ))
    })
}

/// The log options of a `/containerLogs` request: `tailLines`,
/// `limitBytes`, `follow`, `previous`, `sinceSeconds`, `sinceTime`
/// (RFC 3339), `timestamps`, checked as the API server checks
/// `PodLogOptions`.
///
/// ```
/// use stratus_kubelet::api::{Query, log_options};
///
/// let o = log_options(&Query::parse(Some("tailLines=5&follow=true"))).unwrap();
/// assert_eq!(o.tail_lines, Some(5));
/// assert!(o.follow);
/// assert!(log_options(&Query::parse(Some("tailLines=-1"))).is_err());
/// assert!(log_options(&Query::parse(Some("follow=maybe"))).is_err());
/// ```
pub fn log_options(query: &Query) -> Result<ContainerLogOptions, ParamError> {
    let int = |key: &str| query.get(key).map(|v| parse_int(key, v)).transpose();
    let flag = |key: &str| query.flag(key);
    let since_time = match query.get("sinceTime") {
        Some(v) => Some(Time(v.parse().map_err(|_| {
            ParamError(format!(
                "sinceTime: Invalid value: {v:?}: must be an RFC 3339 time"
            ))
        })?)),
        None => None,
    };
    let options = ContainerLogOptions {
        tail_lines: int("tailLines")?,
        limit_bytes: int("limitBytes")?,
        timestamps: flag("timestamps")?,
        follow: flag("follow")?,
        previous: flag("previous")?,
        since_seconds: int("sinceSeconds")?,
        since_time,
    };
    options.validate().map_err(|e| ParamError(e.to_string()))?;
    Ok(options)
}

/// What an exec or attach request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// The command (exec only; repeated `command`).
    pub command: Vec<String>,
    /// Send the client's input.
    pub stdin: bool,
    /// Return standard output.
    pub stdout: bool,
    /// Return standard error (never with a TTY).
    pub stderr: bool,
    /// Allocate a terminal.
    pub tty: bool,
}

/// The stream options of an exec (`exec = true`) or attach request:
/// `input`, `output`, `error` — the names kube-apiserver sends a kubelet
/// (`input=1&output=1&error=1`) — or the client-side names `stdin`,
/// `stdout`, `stderr` (either spelling, each `1` or `true`), `tty` and, for
/// exec, one or more `command`. At least one stream is required; with a
/// TTY, standard error is merged into standard output and not requested
/// separately (the kubelet drops it the same way).
///
/// ```
/// use stratus_kubelet::api::{Query, stream_options};
///
/// // As kube-apiserver forwards `kubectl exec -it`.
/// let o = stream_options(&Query::parse(Some("command=sh&input=1&output=1&tty=1&error=1")), true).unwrap();
/// assert!(o.tty && o.stdin && o.stdout && !o.stderr);
/// let o = stream_options(&Query::parse(Some("command=sh&stdin=1&stdout=1&tty=1&stderr=1")), true).unwrap();
/// assert_eq!(o.command, ["sh"]);
/// assert!(o.tty && o.stdin && o.stdout && !o.stderr);
/// assert!(stream_options(&Query::parse(Some("command=sh")), true).is_err()); // no stream
/// assert!(stream_options(&Query::parse(Some("stdout=1")), true).is_err()); // no command
/// ```
pub fn stream_options(query: &Query, exec: bool) -> Result<StreamOptions, ParamError> {
    // kube-apiserver's names (`api.ExecStdinParam` ...), then the clients'.
    let flag = |kubelet: &str, client: &str| {
        Ok::<_, ParamError>(query.flag(kubelet)? || query.flag(client)?)
    };
    let mut options = StreamOptions {
        command: query
            .all("command")
            .into_iter()
            .map(str::to_owned)
            .collect(),
        stdin: flag("input", "stdin")?,
        stdout: flag("output", "stdout")?,
        stderr: flag("error", "stderr")?,
        tty: query.flag("tty")?,
    };
    if exec && options.command.is_empty() {
        return Err(ParamError("you must specify at least one command".into()));
    }
    if !(options.stdin || options.stdout || options.stderr) {
        return Err(ParamError(
            "you must specify at least 1 of stdin, stdout, stderr".into(),
        ));
    }
    if options.tty && options.stderr {
        options.stderr = false;
    }
    Ok(options)
}

/// The most ports one port-forward request may name (each takes two of
/// the protocol's 255 channels).
pub const MAX_PORTS: usize = 64;

/// The ports of a port-forward request: `port` (repeated; what the API
/// server sends the kubelet) or `ports` (comma-separated; what clients send
/// the API server), each in 1–65535. At least one is required over
/// WebSocket.
///
/// ```
/// use stratus_kubelet::api::{Query, forward_ports};
/// assert_eq!(forward_ports(&Query::parse(Some("port=80&port=443"))).unwrap(), [80, 443]);
/// assert_eq!(forward_ports(&Query::parse(Some("ports=80,8080"))).unwrap(), [80, 8080]);
/// assert!(forward_ports(&Query::parse(Some("port=0"))).is_err());
/// assert!(forward_ports(&Query::parse(None)).is_err());
/// ```
pub fn forward_ports(query: &Query) -> Result<Vec<u16>, ParamError> {
    let mut ports = Vec::new();
    for value in query.all("port").into_iter().chain(query.all("ports")) {
        for p in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p.parse::<u16>() {
                Ok(port) if port > 0 => ports.push(port),
                _ => {
                    return Err(ParamError(format!(
                        "invalid port {p:?}: must be a number in 1-65535"
                    )));
                }
            }
        }
    }
    if ports.is_empty() {
        return Err(ParamError("query parameter \"port\" is required".into()));
    }
    if ports.len() > MAX_PORTS {
        return Err(ParamError(format!(
            "at most {MAX_PORTS} ports can be forwarded in one request"
        )));
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_parameters() {
        let q = Query::parse(Some(
            "tailLines=0&limitBytes=10&previous=1&timestamps=True&sinceTime=2026-01-02T03:04:05Z",
        ));
        let o = log_options(&q).unwrap();
        assert_eq!(o.tail_lines, Some(0));
        assert_eq!(o.limit_bytes, Some(10));
        assert!(o.previous && o.timestamps && !o.follow);
        assert!(o.since_time.is_some());
        for bad in [
            "limitBytes=0",
            "sinceSeconds=0",
            "sinceSeconds=x",
            "sinceTime=yesterday",
            "sinceSeconds=5&sinceTime=2026-01-02T03:04:05Z",
            "timestamps=yes",
        ] {
            assert!(log_options(&Query::parse(Some(bad))).is_err(), "{bad}");
        }
    }

    #[test]
    fn stream_parameters() {
        let o = stream_options(&Query::parse(Some("stdout=true&stderr=1")), false).unwrap();
        assert!(o.stdout && o.stderr && !o.stdin && !o.tty);
        assert!(o.command.is_empty());
        assert!(stream_options(&Query::parse(Some("stdout=2")), false).is_err());
        let o = stream_options(
            &Query::parse(Some("command=echo&command=a+b%26c&stdout=1")),
            true,
        )
        .unwrap();
        assert_eq!(o.command, ["echo", "a b&c"]);
    }

    #[test]
    fn ports() {
        assert!(forward_ports(&Query::parse(Some("port=65536"))).is_err());
        assert!(forward_ports(&Query::parse(Some("port=-1"))).is_err());
        assert_eq!(
            forward_ports(&Query::parse(Some("ports=1,65535"))).unwrap(),
            [1, 65535]
        );
    }
}
