//! Fuzz targets that send each input, as a query string, to a server
//! running in this process over real HTTP: the harness API server (lists,
//! watches, patches and deletes) and a virtual node's kubelet API on the
//! `MockPodProvider` (logs, port-forward, stats, pods). They find what a
//! parser-level target cannot: a number a handler or a provider turns into
//! a panic (`sinceSeconds=999999999999`, `timeoutSeconds=18446744073709551615`),
//! a parameter acted on before it was checked.
//!
//! A property broken is a panic (the finding): a 5xx kube-apiserver would
//! not answer (it answers 504 for a resourceVersion not reached, 500 for a
//! watch's resourceVersion that is not a number), or a connection the
//! server dropped (a handler that panicked). Each request waits at most [`PATIENCE`]: a
//! watch, a followed log or a wait for a revision is cut there, which is
//! an outcome, not a finding.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::Method;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;
use stratus_apiserver::ApiServer;
use stratus_pod::PodLifecycleHandler;
use stratus_testing::MockPodProvider;
use tokio::sync::watch;

/// How long one request may take before it is cut (a watch, a followed
/// log, a wait for a resourceVersion not reached).
const PATIENCE: Duration = Duration::from_millis(100);

/// The namespace the harness target works in.
const NAMESPACE: &str = "fuzz";

/// The servers, started on first use and kept for the process.
struct Live {
    runtime: tokio::runtime::Runtime,
    harness: kube::Client,
    kubelet: kube::Client,
    _servers: (ApiServer, ApiServer, watch::Sender<bool>),
}

fn live() -> &'static Live {
    static LIVE: OnceLock<Live> = OnceLock::new();
    LIVE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a Tokio runtime for the live fuzz targets");
        let (harness_server, harness, kubelet_site, kubelet, stop) = runtime.block_on(async {
            let harness_server = ApiServer::start().await.expect("the harness starts");
            let harness = no_retry(&harness_server);
            harness_server
                .seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
                .expect("the fuzz namespace");
            let (kubelet_site, kubelet, stop) = kubelet().await;
            (harness_server, harness, kubelet_site, kubelet, stop)
        });
        Live {
            runtime,
            harness,
            kubelet,
            _servers: (harness_server, kubelet_site, stop),
        }
    })
}

/// A client of `server` that answers the first response (kube's default
/// retries a 504 for minutes).
fn no_retry(server: &ApiServer) -> kube::Client {
    let mut config = server.config().expect("the harness's client config");
    config.default_retry = false;
    kube::Client::try_from(config).expect("a client of the harness")
}

/// A kubelet API on the `MockPodProvider` with the pod `default/web`
/// (container `app`) running, every caller allowed.
async fn kubelet() -> (ApiServer, kube::Client, watch::Sender<bool>) {
    use stratus_kubelet::api::{ApiAuth, KubeletApi, KubeletServer};
    let site = ApiServer::start()
        .await
        .expect("the kubelet's API server starts");
    let provider = MockPodProvider::new().with_node_name("fuzz-node");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "fuzz-web"},
        "spec": {"nodeName": "fuzz-node", "containers": [{"name": "app", "image": "busybox"}]},
    }))
    .expect("a pod");
    provider
        .create_pod(&pod)
        .await
        .expect("the provider runs the pod");
    let api = KubeletApi::new(
        "fuzz-node",
        Arc::new(provider),
        site.client(),
        ApiAuth::AllowAll,
    );
    let server = KubeletServer::builder(api)
        .bind("127.0.0.1:0".parse().expect("an address"))
        .start()
        .await
        .expect("the kubelet API starts");
    let addr = server.local_addr();
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(server.run(stopped));
    let mut config = kube::Config::new(format!("https://{addr}").parse().expect("a URL"));
    config.accept_invalid_certs = true;
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("a client of the kubelet API");
    (site, client, stop)
}

/// `data` as a query string: bytes a URI may not carry percent-encoded;
/// `&`, `=` and `%` kept so the input decides the parameters.
fn query(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len());
    for &b in data {
        if b.is_ascii_alphanumeric() || b"&=%-._~:,+!*()/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Send one request, reading at most [`PATIENCE`] of it: the status, or
/// `cut` when it did not finish in time. Panics when the server breaks a
/// property: a 5xx other than 504, or a dropped connection.
async fn probe(client: &kube::Client, method: Method, path: &str, body: Option<&str>) -> String {
    let mut request = http::Request::builder().method(method.clone()).uri(path);
    if body.is_some() {
        request = request.header(http::header::CONTENT_TYPE, "application/merge-patch+json");
    }
    let Ok(request) = request.body(kube::client::Body::from(
        body.unwrap_or_default().as_bytes().to_vec(),
    )) else {
        return "unsendable".into();
    };
    let exchange = async {
        let response = client.send(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect_bytes().await;
        Ok::<_, kube::Error>((status, body))
    };
    match tokio::time::timeout(PATIENCE, exchange).await {
        Err(_) => "cut".into(),
        Ok(Ok((status, body))) => {
            let body = String::from_utf8_lossy(&body.unwrap_or_default()).into_owned();
            assert!(
                status < 500 || status == 504 || kube_apiserver_500(&body),
                "{method} {path}: {status} {body}"
            );
            status.to_string()
        }
        Ok(Err(e)) => panic!("{method} {path}: the server dropped the request: {e}"),
    }
}

/// A 500 kube-apiserver answers too, which the harness copies: a watch
/// whose resourceVersion is not a number (`strconv.ParseUint`).
fn kube_apiserver_500(body: &str) -> bool {
    body.contains("resourceVersion: Invalid value") && body.contains("strconv.ParseUint")
}

/// The harness API server's query parameters on a list, a watch, a merge
/// patch, a delete and a collection delete of ConfigMaps.
pub(crate) fn harness_query(data: &[u8]) -> String {
    let live = live();
    let q = query(data);
    live.runtime.block_on(async {
        let client = &live.harness;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        // The object the patch and the delete act on, back if a previous
        // input deleted it.
        let keep: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "keep"}})).expect("a ConfigMap");
        match cms.create(&PostParams::default(), &keep).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("cannot create the fuzz ConfigMap: {e}"),
        }
        let base = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
        format!(
            "list {} / watch {} / patch {} / delete {} / collection {}",
            probe(client, Method::GET, &format!("{base}?{q}"), None).await,
            probe(client, Method::GET, &format!("{base}?watch=true&{q}"), None).await,
            probe(
                client,
                Method::PATCH,
                &format!("{base}/keep?{q}"),
                Some(r#"{"data":{"a":"b"}}"#)
            )
            .await,
            probe(client, Method::DELETE, &format!("{base}/keep?{q}"), None).await,
            probe(client, Method::DELETE, &format!("{base}?{q}"), None).await,
        )
    })
}

pub(crate) fn harness_query_seeds() -> Vec<Vec<u8>> {
    [
        "limit=1&continue=abc",
        "resourceVersion=0&resourceVersionMatch=NotOlderThan",
        "resourceVersion=99999999999999999999",
        "timeoutSeconds=18446744073709551615&allowWatchBookmarks=true",
        "limit=18446744073709551615",
        "gracePeriodSeconds=-9223372036854775808&propagationPolicy=Foreground",
        "dryRun=All&fieldManager=x&fieldValidation=Strict",
        "labelSelector=a%3Db&fieldSelector=metadata.name%3Dkeep",
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

/// The kubelet API's query parameters on logs, port-forward, stats and
/// the pod list, served by the `MockPodProvider`.
pub(crate) fn kubelet_live(data: &[u8]) -> String {
    let live = live();
    let q = query(data);
    live.runtime.block_on(async {
        let client = &live.kubelet;
        format!(
            "logs {} / forward {} / stats {} / pods {}",
            probe(
                client,
                Method::GET,
                &format!("/containerLogs/default/web/app?{q}"),
                None
            )
            .await,
            probe(
                client,
                Method::GET,
                &format!("/portForward/default/web?{q}"),
                None
            )
            .await,
            probe(client, Method::GET, &format!("/stats/summary?{q}"), None).await,
            probe(client, Method::GET, &format!("/pods?{q}"), None).await,
        )
    })
}

pub(crate) fn kubelet_live_seeds() -> Vec<Vec<u8>> {
    [
        "sinceSeconds=999999999999",
        "sinceSeconds=9223372036854775807&timestamps=true",
        "tailLines=18446744073709551615",
        "tailLines=9223372036854775807&limitBytes=9223372036854775807",
        "limitBytes=-1&sinceTime=0000-01-01T00:00:00Z",
        "follow=true&tailLines=1",
        "port=65536&port=0",
        "only_cpu_and_memory=true",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

/// Words the mutator inserts: the parameters, and numbers on the edges of
/// every integer type.
pub(crate) const EXTREME_DICTIONARY: &[&str] = &[
    "&",
    "=",
    "%",
    "-",
    "0",
    "-1",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999",
    "1e309",
    "limit=",
    "continue=",
    "timeoutSeconds=",
    "resourceVersion=",
    "resourceVersionMatch=",
    "gracePeriodSeconds=",
    "propagationPolicy=",
    "dryRun=",
    "sinceSeconds=",
    "sinceTime=",
    "tailLines=",
    "limitBytes=",
    "follow=true",
    "port=",
];
