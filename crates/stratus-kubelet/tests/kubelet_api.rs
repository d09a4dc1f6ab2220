//! The kubelet API of a virtual node over real TLS, called directly (with
//! tokens and client certificates the harness reviews) and through the
//! harness API server's proxy with kube-rs (logs, exec, attach,
//! port-forward), against the MockPodProvider.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, AttachParams, LogParams, PostParams};
use stratus_kubelet::api::{ApiAuth, KubeletApi, KubeletServer};
use stratus_kubelet::node::NodeConfig;
use stratus_pod::{ContainerRef, PodLifecycleHandler};
use stratus_testing::apiserver::{AccessRequest, ReviewUser};
use stratus_testing::http_status::{get, send};
use stratus_testing::kubelet_api::virtual_node_with_api;
use stratus_testing::{ApiServer, MockPodProvider, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

const NODE: &str = "vk-api";

struct Setup {
    api: ApiServer,
    provider: MockPodProvider,
    kubelet: std::net::SocketAddr,
    reviews: Arc<Mutex<Vec<AccessRequest>>>,
    _stop: watch::Sender<bool>,
}

fn pod(name: &str, containers: &[&str], annotations: serde_json::Value) -> Pod {
    let containers: Vec<_> = containers
        .iter()
        .map(|c| serde_json::json!({"name": c, "image": "busybox", "env": [{"name": "GREETING", "value": "hello"}]}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"nodeName": NODE, "containers": containers},
    }))
    .unwrap()
}

/// A harness, a virtual node with the MockPodProvider serving its kubelet
/// API (reviewed by the harness; user "bob" is denied), and a running pod
/// `web` with container `app`.
async fn setup() -> Setup {
    let api = ApiServer::start().await.unwrap();
    let client = api.client();
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let seen = reviews.clone();
    api.set_access_policy(move |r: &AccessRequest| {
        seen.lock().unwrap().push(r.clone());
        if r.user == "bob" {
            (false, "bob may not".to_owned())
        } else {
            (true, String::new())
        }
    });
    let provider = MockPodProvider::new().with_node_name(NODE);
    let node = virtual_node_with_api(
        &api,
        NodeConfig::new(NODE, "mock"),
        Arc::new(provider.clone()),
    )
    .await
    .unwrap();
    let (stop, stopped) = watch::channel(false);
    let mut ready = node.ready();
    tokio::spawn(node.run(stopped));
    tokio::time::timeout(Duration::from_secs(10), ready.wait_for(|r| *r))
        .await
        .expect("node ready")
        .unwrap();
    let kubelet = kubelet_address(&client).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(
        &PostParams::default(),
        &pod(
            "web",
            &["app"],
            serde_json::json!({"mock.stratus.dev/log": "one\ntwo\nthree"}),
        ),
    )
    .await
    .unwrap();
    eventually("web runs", Duration::from_secs(10), || async {
        pods.get("web")
            .await
            .ok()
            .and_then(|p| p.status)
            .and_then(|s| s.phase)
            .as_deref()
            == Some("Running")
    })
    .await;
    Setup {
        api,
        provider,
        kubelet,
        reviews,
        _stop: stop,
    }
}

/// The kubelet endpoint the node registered.
async fn kubelet_address(client: &kube::Client) -> std::net::SocketAddr {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(NODE).await.unwrap();
    let port = node
        .status
        .and_then(|s| s.daemon_endpoints)
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port)
        .unwrap();
    std::net::SocketAddr::from(([127, 0, 0, 1], u16::try_from(port).unwrap()))
}

/// A client of the kubelet API itself, with a token or a certificate.
fn kubelet_client(
    addr: std::net::SocketAddr,
    token: Option<&str>,
    cert: Option<(String, String)>,
) -> kube::Client {
    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.accept_invalid_certs = true;
    if let Some(token) = token {
        config.auth_info.token = Some(token.to_owned().into());
    }
    if let Some((cert, key)) = cert {
        use base64::Engine;
        let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
        config.auth_info.client_certificate_data = Some(b64(cert));
        config.auth_info.client_key_data = Some(b64(key).into());
    }
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_authenticated_and_authorized() {
    let s = setup().await;
    s.api.add_token(
        "alice-token",
        ReviewUser {
            username: "alice".into(),
            uid: "u-alice".into(),
            groups: vec!["dev".into()],
        },
    );
    s.api.add_token(
        "bob-token",
        ReviewUser {
            username: "bob".into(),
            uid: "u-bob".into(),
            groups: vec![],
        },
    );
    let anonymous = kubelet_client(s.kubelet, None, None);
    let (code, body) = get(&anonymous, "/healthz").await;
    assert_eq!(code, 401, "anonymous access is off: {body}");
    let forged = kubelet_client(s.kubelet, Some("no-such-token"), None);
    assert_eq!(get(&forged, "/pods").await.0, 401);

    let bob = kubelet_client(s.kubelet, Some("bob-token"), None);
    let (code, body) = get(&bob, "/stats/summary").await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("bob may not"), "{body}");

    let alice = kubelet_client(s.kubelet, Some("alice-token"), None);
    assert_eq!(get(&alice, "/healthz").await, (200, "ok".to_owned()));
    let (code, body) = get(&alice, "/stats/summary").await;
    assert_eq!(code, 200, "{body}");
    let summary: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(summary["node"]["nodeName"], NODE);
    assert_eq!(summary["pods"][0]["podRef"]["name"], "web");
    assert_eq!(
        summary["pods"][0]["containers"][0]["memory"]["workingSetBytes"],
        8 * 1024 * 1024
    );
    let (code, body) = get(&alice, "/metrics/resource").await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("container_memory_working_set_bytes{container=\"app\",namespace=\"default\",pod=\"web\"} 8388608"),
        "{body}"
    );
    let (code, body) = get(&alice, "/pods").await;
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"][0]["metadata"]["name"], "web");
    let (code, body) = get(&alice, "/runningpods/").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"web\""), "{body}");

    // The reviews carry the kubelet's attributes: nodes/<subresource>, the
    // node's name, the verb of the method.
    let seen = s.reviews.lock().unwrap().clone();
    let of = |sub: &str| {
        seen.iter()
            .find(|r| r.user == "alice" && r.subresource == sub)
            .cloned()
            .unwrap_or_else(|| panic!("no review of nodes/{sub}: {seen:?}"))
    };
    for sub in ["stats", "metrics", "proxy"] {
        let r = of(sub);
        assert_eq!(
            (r.resource.as_str(), r.name.as_str(), r.verb.as_str()),
            ("nodes", NODE, "get")
        );
    }
    // Answers are cached: asking again makes no new review.
    let before = s.reviews.lock().unwrap().len();
    assert_eq!(get(&alice, "/stats/summary").await.0, 200);
    assert_eq!(s.reviews.lock().unwrap().len(), before);

    // A client certificate from the trusted CA authenticates too.
    let carol = kubelet_client(
        s.kubelet,
        None,
        Some(s.api.issue_client_certificate("carol", &["ops"]).unwrap()),
    );
    assert_eq!(get(&carol, "/healthz").await.0, 200);
    assert!(
        s.reviews
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.user == "carol" && r.groups == ["ops"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_kubelets_codes() {
    let s = setup().await;
    let admin = kubelet_client(
        s.kubelet,
        None,
        Some(s.api.issue_client_certificate("admin", &[]).unwrap()),
    );
    for (path, code) in [
        ("/containerLogs/default/web/app?tailLines=-1", 400),
        ("/containerLogs/default/web/app?limitBytes=0", 400),
        ("/containerLogs/default/web/app?follow=perhaps", 400),
        (
            "/containerLogs/default/web/app?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z",
            400,
        ),
        ("/containerLogs/default/web/nope", 404),
        ("/containerLogs/default/ghost/app", 404),
        ("/containerLogs/default/web/app?previous=true", 400),
        ("/exec/default/web/app?command=ls&stdout=1", 400), // not an upgrade
        ("/exec/default/web/app?stdout=1", 400),            // no command
        ("/portForward/default/web?port=0", 400),
        ("/configz", 404),
        ("/containerLogs/default/web", 404),
    ] {
        let (got, body) = get(&admin, path).await;
        assert_eq!(got, code, "{path}: {body}");
    }
    let post = http::Request::post("/pods").body(Vec::new()).unwrap();
    assert_eq!(send(&admin, post).await.0, 405);
    let (code, body) = get(&admin, "/containerLogs/default/web/app?limitBytes=10").await;
    assert_eq!(
        (code, body.as_str()),
        (200, "started co"),
        "limitBytes is enforced"
    );
    // Seconds reaching past the beginning of time select every line (they
    // panicked the provider).
    let (code, body) = get(
        &admin,
        "/containerLogs/default/web/app?sinceSeconds=999999999999",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(body.starts_with("started co"), "{body}");

    // A provider error reaches the client with its kind's code.
    s.provider.fail_next(
        "container_logs",
        stratus_pod::PodError::already_exists("the backend is confused"),
        1,
    );
    let (code, body) = get(&admin, "/containerLogs/default/web/app").await;
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("the backend is confused"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_capabilities_answer_501() {
    let bare = MockPodProvider::new().without_capabilities();
    let (client, _stop) = open_kubelet(&bare, None).await;
    for path in [
        "/containerLogs/default/web/app",
        "/stats/summary",
        "/metrics/resource",
        "/exec/default/web/app?command=ls&stdout=1",
        "/attach/default/web/app?stdout=1",
        "/portForward/default/web?port=80",
    ] {
        let (code, body) = get(&client, path).await;
        assert_eq!(code, 501, "{path}: {body}");
        assert!(
            body.contains("not supported by the provider of node direct"),
            "{body}"
        );
    }
    assert_eq!(get(&client, "/runningpods/").await.0, 200);
    // Missing optional capabilities leave the node healthy.
    assert_eq!(get(&client, "/healthz").await, (200, "ok".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_through_the_api_server() {
    let s = setup().await;
    let pods: Api<Pod> = Api::namespaced(s.api.client(), "default");
    let all = pods.logs("web", &LogParams::default()).await.unwrap();
    assert_eq!(all, "started container app\none\ntwo\nthree\n");
    let tail = pods
        .logs(
            "web",
            &LogParams {
                tail_lines: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tail, "two\nthree\n");
    let stamped = pods
        .logs(
            "web",
            &LogParams {
                timestamps: true,
                tail_lines: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(stamped.ends_with("Z three\n"), "{stamped:?}");

    // Follow: new lines arrive while the stream is open.
    let stream = pods
        .log_stream(
            "web",
            &LogParams {
                follow: true,
                tail_lines: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut lines = futures_util::AsyncBufReadExt::lines(stream);
    let app = ContainerRef::new("default", "web", "app");
    s.provider.append_log(&app, "four").unwrap();
    let next = tokio::time::timeout(
        Duration::from_secs(5),
        futures_util::StreamExt::next(&mut lines),
    )
    .await
    .expect("a followed line in time")
    .unwrap()
    .unwrap();
    assert_eq!(next, "four");

    // The API server's own checks: a container must be named when there
    // are several, and must exist.
    pods.create(
        &PostParams::default(),
        &pod("duo", &["a", "b"], serde_json::json!({})),
    )
    .await
    .unwrap();
    let err = pods.logs("duo", &LogParams::default()).await.unwrap_err();
    assert!(err.to_string().contains("choose one of: [a b]"), "{err}");
    let err = pods
        .logs(
            "web",
            &LogParams {
                container: Some("nope".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not valid for pod web"), "{err}");
    let err = pods
        .logs(
            "web",
            &LogParams {
                tail_lines: Some(-1),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("tailLines"), "{err}");
}

async fn read_all(reader: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut out = String::new();
    let mut reader = reader;
    tokio::time::timeout(Duration::from_secs(10), reader.read_to_string(&mut out))
        .await
        .expect("output in time")
        .unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_attach_through_the_api_server() {
    let s = setup().await;
    let pods: Api<Pod> = Api::namespaced(s.api.client(), "default");

    let mut echo = pods
        .exec(
            "web",
            ["echo", "hello", "world"],
            &AttachParams::default().stderr(false),
        )
        .await
        .unwrap();
    let status = echo.take_status().unwrap();
    let out = read_all(echo.stdout().unwrap()).await;
    assert_eq!(out, "hello world\n");
    let status = status.await.unwrap();
    assert_eq!(status.status.as_deref(), Some("Success"));

    let mut failing = pods
        .exec("web", ["sh", "-c", "exit 3"], &AttachParams::default())
        .await
        .unwrap();
    let status = failing.take_status().unwrap().await.unwrap();
    assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
    let causes = status.details.unwrap().causes.unwrap();
    assert_eq!(causes[0].message.as_deref(), Some("3"));

    let mut unknown = pods
        .exec("web", ["frobnicate"], &AttachParams::default())
        .await
        .unwrap();
    let status = unknown.take_status().unwrap();
    let err = read_all(unknown.stderr().unwrap()).await;
    assert_eq!(err, "mock: frobnicate: command not found\n");
    assert_eq!(
        status.await.unwrap().details.unwrap().causes.unwrap()[0]
            .message
            .as_deref(),
        Some("127")
    );

    // Stdin, closed with v5's close signal, ends `cat`.
    let mut cat = pods
        .exec(
            "web",
            ["cat"],
            &AttachParams::default().stdin(true).stderr(false),
        )
        .await
        .unwrap();
    let mut stdin = cat.stdin().unwrap();
    let stdout = cat.stdout().unwrap();
    stdin.write_all(b"through the kubelet\n").await.unwrap();
    stdin.shutdown().await.unwrap();
    assert_eq!(read_all(stdout).await, "through the kubelet\n");

    // A TTY with a resize.
    let mut tty = pods
        .exec("web", ["size"], &AttachParams::interactive_tty())
        .await
        .unwrap();
    let mut resize = tty.terminal_size().unwrap();
    futures_util::SinkExt::send(
        &mut resize,
        kube::api::TerminalSize {
            width: 132,
            height: 43,
        },
    )
    .await
    .unwrap();
    let out = read_all(tty.stdout().unwrap()).await;
    assert_eq!(out, "132x43\n");
    assert_eq!(
        s.provider.resizes().last().map(|r| (r.width, r.height)),
        Some((132, 43))
    );

    // Attach echoes stdin.
    let mut attached = pods
        .attach("web", &AttachParams::default().stdin(true).stderr(false))
        .await
        .unwrap();
    let mut stdin = attached.stdin().unwrap();
    let stdout = attached.stdout().unwrap();
    stdin.write_all(b"ping\n").await.unwrap();
    stdin.shutdown().await.unwrap();
    assert_eq!(read_all(stdout).await, "ping\n");
    assert_eq!(s.provider.calls_to("exec"), 5);
    assert_eq!(s.provider.calls_to("attach"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_through_the_api_server() {
    let s = setup().await;
    let pods: Api<Pod> = Api::namespaced(s.api.client(), "default");
    let mut forwarder = pods.portforward("web", &[8080, 9090]).await.unwrap();
    for port in [8080u16, 9090] {
        let mut stream = forwarder.take_stream(port).unwrap();
        let message = format!("hello port {port}");
        stream.write_all(message.as_bytes()).await.unwrap();
        let mut buf = vec![0; message.len()];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf))
            .await
            .expect("echo in time")
            .unwrap();
        assert_eq!(String::from_utf8(buf).unwrap(), message);
    }
    assert_eq!(s.provider.calls_to("port_forward"), 2);
    forwarder.abort();

    // An unknown pod's error arrives on the port's error channel.
    let mut ghost_forward = {
        let ghost = pod("ghost", &["app"], serde_json::json!({}));
        pods.create(&PostParams::default(), &ghost).await.unwrap();
        eventually("ghost runs", Duration::from_secs(10), || async {
            s.provider.pods().contains_key("default/ghost")
        })
        .await;
        s.provider.remove("default", "ghost");
        pods.portforward("ghost", &[80]).await.unwrap()
    };
    let error = ghost_forward.take_error(80).unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), error)
        .await
        .expect("an error in time");
    assert!(
        message
            .as_deref()
            .unwrap_or_default()
            .contains("pod default/ghost not found"),
        "{message:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_cancels_the_provider_call() {
    let s = setup().await;
    let pods: Api<Pod> = Api::namespaced(s.api.client(), "default");
    let session = pods
        .exec("web", ["sleep", "600"], &AttachParams::default())
        .await
        .unwrap();
    eventually("the exec runs", Duration::from_secs(5), || async {
        s.provider.active_sessions() == 1
    })
    .await;
    session.abort();
    drop(session);
    eventually(
        "the provider's exec is dropped",
        Duration::from_secs(5),
        || async { s.provider.active_sessions() == 0 },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_is_closed() {
    let provider = MockPodProvider::new();
    let pod = pod("web", &["app"], serde_json::json!({}));
    provider.create_pod(&pod).await.unwrap();
    let (client, _stop) = open_kubelet(&provider, Some(Duration::from_millis(300))).await;
    let request = http::Request::get("/exec/default/web/app?command=sleep&command=600&stdout=1")
        .body(Vec::new())
        .unwrap();
    let started = std::time::Instant::now();
    let mut socket = client.connect(request).await.unwrap().into_stream();
    let mut status = None;
    while let Some(Ok(message)) = futures_util::StreamExt::next(&mut socket).await {
        if let tokio_tungstenite::tungstenite::Message::Binary(b) = message
            && b.first() == Some(&3)
        {
            status = Some(String::from_utf8_lossy(&b[1..]).into_owned());
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    let status = status.expect("a status on the error channel");
    assert!(status.contains("idle"), "{status}");
    eventually("the exec is dropped", Duration::from_secs(5), || async {
        provider.active_sessions() == 0
    })
    .await;
}

/// A kubelet API of node `direct` serving anyone (with this stream idle
/// timeout), a client of it, and its stop switch.
async fn open_kubelet(
    provider: &MockPodProvider,
    idle: Option<Duration>,
) -> (kube::Client, watch::Sender<bool>) {
    let api = ApiServer::start().await.unwrap();
    let mut kubelet_api = KubeletApi::new(
        "direct",
        Arc::new(provider.clone()),
        api.client(),
        ApiAuth::AllowAll,
    );
    if let Some(idle) = idle {
        kubelet_api = kubelet_api.with_stream_idle_timeout(idle);
    }
    let server = KubeletServer::builder(kubelet_api)
        .bind("127.0.0.1:0".parse().unwrap())
        .start()
        .await
        .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        server.run(stopped).await;
        drop(api);
    });
    (kubelet_client(addr, None, None), stop)
}

async fn next_binary(
    socket: &mut tokio_tungstenite::WebSocketStream<
        hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>,
    >,
) -> Option<Vec<u8>> {
    loop {
        match tokio::time::timeout(
            Duration::from_secs(5),
            futures_util::StreamExt::next(socket),
        )
        .await
        .expect("a message in time")?
        {
            Ok(tokio_tungstenite::tungstenite::Message::Binary(b)) => return Some(b.to_vec()),
            Ok(tokio_tungstenite::tungstenite::Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_channel_protocols_directly() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let provider = MockPodProvider::new();
    provider
        .create_pod(&pod("web", &["app"], serde_json::json!({})))
        .await
        .unwrap();
    let (client, _stop) = open_kubelet(&provider, None).await;

    // v5: stdin, then the close signal; stdout comes back, then the status.
    let request = http::Request::get("/exec/default/web/app?command=cat&stdin=1&stdout=1")
        .body(Vec::new())
        .unwrap();
    let mut socket = client.connect(request).await.unwrap().into_stream();
    socket
        .send(Message::Binary(b"\x00over the wire".to_vec().into()))
        .await
        .unwrap();
    socket
        .send(Message::Binary(vec![255, 0].into()))
        .await
        .unwrap();
    assert_eq!(
        next_binary(&mut socket).await.unwrap(),
        b"\x01over the wire"
    );
    let status = next_binary(&mut socket).await.unwrap();
    assert_eq!(status[0], 3);
    assert!(String::from_utf8_lossy(&status[1..]).contains("Success"));
    assert!(next_binary(&mut socket).await.is_none(), "then a close");

    // A TTY: the resize channel reaches the provider.
    let request = http::Request::get("/exec/default/web/app?command=size&stdin=1&stdout=1&tty=1")
        .body(Vec::new())
        .unwrap();
    let mut socket = client.connect(request).await.unwrap().into_stream();
    socket
        .send(Message::Binary(
            b"\x04{\"Width\":120,\"Height\":40}".to_vec().into(),
        ))
        .await
        .unwrap();
    assert_eq!(next_binary(&mut socket).await.unwrap(), b"\x01120x40\n");

    // Port-forward over WebSocket: each channel first carries the port.
    let request = http::Request::get("/portForward/default/web?port=8080")
        .body(Vec::new())
        .unwrap();
    let mut socket = client.connect(request).await.unwrap().into_stream();
    let mut first = vec![
        next_binary(&mut socket).await.unwrap(),
        next_binary(&mut socket).await.unwrap(),
    ];
    first.sort();
    assert_eq!(first, [vec![0, 0x90, 0x1f], vec![1, 0x90, 0x1f]]);
    socket
        .send(Message::Binary(b"\x00echo me".to_vec().into()))
        .await
        .unwrap();
    assert_eq!(next_binary(&mut socket).await.unwrap(), b"\x00echo me");
}

/// The protocol a client offering HTTP/2 and HTTP/1.1 gets from a kubelet
/// API built with `http2` (`None`: the builder's default).
async fn negotiated(http2: Option<bool>) -> Option<Vec<u8>> {
    let api = ApiServer::start().await.unwrap();
    let kubelet_api = KubeletApi::new(
        "alpn",
        Arc::new(MockPodProvider::new()),
        api.client(),
        ApiAuth::AllowAll,
    );
    let mut builder = KubeletServer::builder(kubelet_api).bind("127.0.0.1:0".parse().unwrap());
    if let Some(offer) = http2 {
        builder = builder.http2(offer);
    }
    let server = builder.start().await.unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = watch::channel(false);
    let serving = tokio::spawn(server.run(stopped));
    let config = stratus_testing::insecure::client_config(&[b"h2", b"http/1.1"]).unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let protocol = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let _ = stop.send(true);
    let _ = serving.await;
    api.shutdown().await;
    protocol
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_offered_only_when_asked() {
    // As the Go virtual-kubelet's nodeutil: HTTP/1.1 only.
    assert_eq!(negotiated(None).await.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(
        negotiated(Some(false)).await.as_deref(),
        Some(&b"http/1.1"[..])
    );
    assert_eq!(negotiated(Some(true)).await.as_deref(), Some(&b"h2"[..]));
}
