//! The kubelet API's paths, and what each asks of the authorizer. Pure:
//! no IO, unit-tested.

use http::Method;
use stratus_pod::ContainerRef;
use stratus_runtime::auth::{Attributes, verb_of};

/// One request of the kubelet API, parsed from its method and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /containerLogs/{namespace}/{pod}/{container}`.
    ContainerLogs(ContainerRef),
    /// `GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}`.
    Exec(ContainerRef),
    /// `GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}`.
    Attach(ContainerRef),
    /// `GET|POST /portForward/{namespace}/{pod}[/{uid}]`.
    PortForward {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        pod: String,
    },
    /// `GET /stats/summary`.
    StatsSummary,
    /// `GET /metrics/resource`.
    MetricsResource,
    /// `GET /pods`: the pods the API server bound to this node.
    Pods,
    /// `GET /runningpods/`: the pods the provider runs.
    RunningPods,
    /// `GET /healthz`.
    Healthz,
}

/// Why a request matches no route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// 404: no such path.
    NotFound,
    /// 405: the path exists, not with this method.
    MethodNotAllowed,
}

fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}

impl Route {
    /// Parse `method` and `path` as the kubelet routes them (a trailing
    /// slash is ignored, as with the kubelet's strict-slash router).
    ///
    /// ```
    /// use stratus_kubelet::api::Route;
    /// use stratus_pod::ContainerRef;
    ///
    /// let r = Route::parse(&http::Method::POST, "/exec/default/web/app").unwrap();
    /// assert_eq!(r, Route::Exec(ContainerRef::new("default", "web", "app")));
    /// assert!(Route::parse(&http::Method::GET, "/exec/default/web").is_err());
    /// ```
    pub fn parse(method: &Method, path: &str) -> Result<Route, RouteError> {
        let segs = segments(path);
        let s: Vec<&str> = segs.iter().map(String::as_str).collect();
        let container = |ns: &str, pod: &str, c: &str| ContainerRef::new(ns, pod, c);
        let (route, streaming) = match s.as_slice() {
            ["containerLogs", ns, pod, c] => (Route::ContainerLogs(container(ns, pod, c)), false),
            ["exec", ns, pod, c] | ["exec", ns, pod, _, c] => {
                (Route::Exec(container(ns, pod, c)), true)
            }
            ["attach", ns, pod, c] | ["attach", ns, pod, _, c] => {
                (Route::Attach(container(ns, pod, c)), true)
            }
            ["portForward", ns, pod] | ["portForward", ns, pod, _] => (
                Route::PortForward {
                    namespace: (*ns).to_owned(),
                    pod: (*pod).to_owned(),
                },
                true,
            ),
            ["stats", "summary"] => (Route::StatsSummary, false),
            ["metrics", "resource"] => (Route::MetricsResource, false),
            ["pods"] => (Route::Pods, false),
            ["runningpods"] => (Route::RunningPods, false),
            ["healthz"] => (Route::Healthz, false),
            _ => return Err(RouteError::NotFound),
        };
        let allowed = if streaming {
            *method == Method::GET || *method == Method::POST
        } else {
            *method == Method::GET || *method == Method::HEAD
        };
        if allowed {
            Ok(route)
        } else {
            Err(RouteError::MethodNotAllowed)
        }
    }
}

/// The subresource of `nodes` a kubelet path is authorized as (the
/// kubelet's mapping): `/stats*` → `stats`, `/metrics*` → `metrics`,
/// `/logs*` → `log`, `/spec*` → `spec`, `/checkpoint*` → `checkpoint`,
/// everything else → `proxy` (container logs, exec, attach,
/// port-forward, `/pods`, `/healthz` included).
///
/// ```
/// use stratus_kubelet::api::subresource_of;
/// assert_eq!(subresource_of("/stats/summary"), "stats");
/// assert_eq!(subresource_of("/metrics/resource"), "metrics");
/// assert_eq!(subresource_of("/containerLogs/default/web/app"), "proxy");
/// assert_eq!(subresource_of("/statsx"), "proxy");
/// ```
pub fn subresource_of(path: &str) -> &'static str {
    let under = |prefix: &str| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    if under("/stats") {
        "stats"
    } else if under("/metrics") {
        "metrics"
    } else if under("/logs") {
        "log"
    } else if under("/spec") {
        "spec"
    } else if under("/checkpoint") {
        "checkpoint"
    } else {
        "proxy"
    }
}

/// The access-review attributes of `method` on `path` of node `node`:
/// resource `nodes` in the core group, the node's name, the verb of the
/// method, the subresource of the path.
///
/// ```
/// use stratus_kubelet::api::kubelet_attributes;
/// use stratus_runtime::auth::Attributes;
///
/// let a = kubelet_attributes("vk-0", &http::Method::POST, "/exec/default/web/app");
/// assert_eq!(a, Attributes::Resource {
///     verb: "create".into(), group: "".into(), resource: "nodes".into(),
///     subresource: "proxy".into(), namespace: "".into(), name: "vk-0".into(),
/// });
/// ```
pub fn kubelet_attributes(node: &str, method: &Method, path: &str) -> Attributes {
    Attributes::Resource {
        verb: verb_of(method).to_owned(),
        group: String::new(),
        resource: "nodes".into(),
        subresource: subresource_of(path).to_owned(),
        namespace: String::new(),
        name: node.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route() {
        let get = Method::GET;
        let c = ContainerRef::new("ns", "p", "c");
        assert_eq!(
            Route::parse(&get, "/containerLogs/ns/p/c"),
            Ok(Route::ContainerLogs(c.clone()))
        );
        assert_eq!(
            Route::parse(&get, "/exec/ns/p/uid-1/c"),
            Ok(Route::Exec(c.clone()))
        );
        assert_eq!(
            Route::parse(&Method::POST, "/attach/ns/p/c/"),
            Ok(Route::Attach(c))
        );
        assert_eq!(
            Route::parse(&get, "/portForward/ns/p"),
            Ok(Route::PortForward {
                namespace: "ns".into(),
                pod: "p".into()
            })
        );
        assert_eq!(
            Route::parse(&get, "/stats/summary/"),
            Ok(Route::StatsSummary)
        );
        assert_eq!(
            Route::parse(&get, "/metrics/resource"),
            Ok(Route::MetricsResource)
        );
        assert_eq!(Route::parse(&get, "/pods"), Ok(Route::Pods));
        assert_eq!(Route::parse(&get, "/runningpods/"), Ok(Route::RunningPods));
        assert_eq!(Route::parse(&get, "/healthz"), Ok(Route::Healthz));
    }

    #[test]
    fn bad_paths_and_methods() {
        assert_eq!(
            Route::parse(&Method::GET, "/containerLogs/ns/p"),
            Err(RouteError::NotFound)
        );
        assert_eq!(
            Route::parse(&Method::GET, "/configz"),
            Err(RouteError::NotFound)
        );
        assert_eq!(
            Route::parse(&Method::POST, "/pods"),
            Err(RouteError::MethodNotAllowed)
        );
        assert_eq!(
            Route::parse(&Method::DELETE, "/exec/ns/p/c"),
            Err(RouteError::MethodNotAllowed)
        );
    }

    #[test]
    fn percent_encoded_segments_are_decoded() {
        assert_eq!(
            Route::parse(&Method::GET, "/containerLogs/ns/p%2Dx/c"),
            Ok(Route::ContainerLogs(ContainerRef::new("ns", "p-x", "c")))
        );
    }

    #[test]
    fn subresources_follow_the_kubelet() {
        assert_eq!(subresource_of("/stats"), "stats");
        assert_eq!(subresource_of("/logs/syslog"), "log");
        assert_eq!(subresource_of("/spec/"), "spec");
        assert_eq!(subresource_of("/checkpoint/ns/p/c"), "checkpoint");
        assert_eq!(subresource_of("/pods"), "proxy");
        assert_eq!(subresource_of("/healthz"), "proxy");
        assert_eq!(subresource_of("/metricsx"), "proxy");
        assert_eq!(
            kubelet_attributes("n", &Method::GET, "/metrics/resource"),
            Attributes::Resource {
                verb: "get".into(),
                group: String::new(),
                resource: "nodes".into(),
                subresource: "metrics".into(),
                namespace: String::new(),
                name: "n".into(),
            }
        );
    }
}
