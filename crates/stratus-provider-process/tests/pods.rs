//! Real processes on a virtual node, through the harness API server: the
//! pod-provider conformance suite, restart policies with back-off, init
//! containers, logs through the API server, graceful deletion, refusals.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use stratus_kubelet::node::NodeConfig;
use stratus_pod::PodLifecycleHandler;
use stratus_provider_process::{ProcessConfig, ProcessProvider};
use stratus_testing::ApiServer;
use stratus_testing::eventually;
use stratus_testing::pod_conformance::run_pod_conformance;
use tokio::sync::watch;

const NODE: &str = "vk-process";

fn root(test: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("stratus-process-{test}-{}", std::process::id()))
}

/// Fast back-off for tests; `nginx` stands for a long `sleep`.
fn config(test: &str) -> ProcessConfig {
    let mut config = ProcessConfig::new(root(test));
    config.backoff_initial = Duration::from_millis(300);
    config.backoff_max = Duration::from_secs(1);
    config
        .images
        .insert("nginx".into(), vec!["sleep".into(), "600".into()]);
    config
        .images
        .insert("busybox".into(), vec!["sh".into(), "-c".into()]);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_provider_conformance_suite_passes() {
    let report =
        run_pod_conformance(|| Arc::new(ProcessProvider::new(config("conformance"))) as _).await;
    report.assert_passed();
    let _ = std::fs::remove_dir_all(root("conformance"));
}

/// A virtual node running `provider` on a fresh API server.
struct Node {
    api: ApiServer,
    pods: Api<Pod>,
    _stop: watch::Sender<bool>,
}

impl Node {
    /// Create pod `name` with `spec`, bound to the node.
    async fn create(&self, name: &str, spec: serde_json::Value) {
        self.pods
            .create(&PostParams::default(), &pod(name, spec))
            .await
            .unwrap();
    }

    /// Delete pod `name` and wait until it is gone (its processes ended).
    async fn delete(&self, name: &str) {
        self.pods
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        eventually(
            &format!("{name} deleted"),
            Duration::from_secs(20),
            async || self.pods.get_opt(name).await.unwrap().is_none(),
        )
        .await;
    }

    /// Pod `name`'s phase.
    async fn phase(&self, name: &str) -> Option<String> {
        self.pods.get(name).await.unwrap().status?.phase
    }
}

async fn node(provider: ProcessProvider) -> Node {
    let api = ApiServer::start().await.unwrap();
    let node = stratus_testing::kubelet_api::virtual_node_with_api(
        &api,
        NodeConfig::new(NODE, "process"),
        Arc::new(provider) as Arc<dyn PodLifecycleHandler>,
    )
    .await
    .unwrap();
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(node.run(stopped));
    let pods = Api::namespaced(api.client(), "default");
    Node {
        api,
        pods,
        _stop: stop,
    }
}

fn pod(name: &str, spec: serde_json::Value) -> Pod {
    let mut spec = spec;
    spec["nodeName"] = NODE.into();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

fn container<'a>(pod: &'a Pod, name: &str) -> &'a k8s_openapi::api::core::v1::ContainerStatus {
    let status = pod.status.as_ref().unwrap();
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no status of {name}: {status:?}"))
}

async fn logs(node: &Node, pod: &str, query: &str) -> String {
    let request = http::Request::get(format!("/api/v1/namespaces/default/pods/{pod}/log?{query}"))
        .body(Vec::new())
        .unwrap();
    node.api.client().request_text(request).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_restarts_with_back_off_and_logs() {
    let node = node(ProcessProvider::new(config("restarts"))).await;
    // An init container writes a file the app container reads from a
    // shared emptyDir; a second container fails with 3 and is restarted.
    let spec = serde_json::json!({
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 2,
        "volumes": [{"name": "shared", "emptyDir": {}}],
        "initContainers": [{
            "name": "init", "image": "busybox",
            "args": ["echo prepared > shared/ready"],
            "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
        }],
        "containers": [
            {
                "name": "app", "image": "busybox",
                "args": ["cat \"$STRATUS_CONTAINER_ROOT/data/ready\"; echo \"hello $GREETING\"; sleep 600"],
                "env": [{"name": "GREETING", "value": "world"}],
                "volumeMounts": [{"name": "shared", "mountPath": "/data"}],
            },
            {"name": "flaky", "image": "busybox", "args": ["echo attempt; exit 3"]},
        ],
    });
    node.create("web", spec).await;
    eventually(
        "web Running with flaky restarted twice",
        Duration::from_secs(30),
        async || {
            let p = node.pods.get("web").await.unwrap();
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && container(&p, "flaky").restart_count >= 2
                && container(&p, "app")
                    .state
                    .as_ref()
                    .is_some_and(|s| s.running.is_some())
        },
    )
    .await;
    let p = node.pods.get("web").await.unwrap();
    let init = container(&p, "init");
    assert_eq!(
        init.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        0
    );
    let flaky = container(&p, "flaky");
    let last = flaky
        .last_state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (3, Some("Error")));
    let conditions = p.status.as_ref().unwrap().conditions.clone().unwrap();
    let initialized = conditions
        .iter()
        .find(|c| c.type_ == "Initialized")
        .unwrap();
    assert_eq!(initialized.status, "True");

    // Logs through the API server, the kubelet API and the provider.
    assert_eq!(
        logs(&node, "web", "container=app").await,
        "prepared\nhello world\n"
    );
    assert_eq!(
        logs(&node, "web", "container=flaky&previous=true").await,
        "attempt\n"
    );
    let stamped = logs(&node, "web", "container=app&timestamps=true&tailLines=1").await;
    assert!(stamped.ends_with(" hello world\n"), "{stamped}");

    // Graceful deletion: every process ends and the pod goes away.
    node.delete("web").await;
    assert!(!root("restarts").join("default_web").exists());
    let _ = std::fs::remove_dir_all(root("restarts"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_fails_the_pod_with_the_exit_code() {
    let node = node(ProcessProvider::new(config("never"))).await;
    let spec = serde_json::json!({
        "restartPolicy": "Never",
        "containers": [
            {"name": "ok", "image": "busybox", "args": ["exit 0"]},
            {"name": "bad", "image": "busybox", "args": ["exit 3"]},
            {"name": "missing", "image": "x", "command": ["/no/such/program"]},
        ],
    });
    node.create("job", spec).await;
    eventually("job Failed", Duration::from_secs(20), async || {
        node.phase("job").await.as_deref() == Some("Failed")
    })
    .await;
    let p = node.pods.get("job").await.unwrap();
    let code = |name: &str| {
        let t = container(&p, name)
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        (t.exit_code, t.reason.unwrap())
    };
    assert_eq!(code("ok"), (0, "Completed".into()));
    assert_eq!(code("bad"), (3, "Error".into()));
    assert_eq!(code("missing"), (128, "StartError".into()));
    assert_eq!(container(&p, "bad").restart_count, 0);
    let _ = std::fs::remove_dir_all(root("never"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_ignoring_sigterm_is_killed_at_the_deadline_with_its_children() {
    let node = node(ProcessProvider::new(config("grace"))).await;
    // The shell ignores TERM and starts a child that does too; it writes
    // both PIDs for the test to look for (`$$$$` is the shell's `$$` once
    // the kubelet's `$(VAR)` expansion has unescaped it).
    let spec = serde_json::json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "stubborn", "image": "busybox",
            "args": ["trap '' TERM; (trap '' TERM; sleep 600) & echo \"$$$$ $!\"; wait"],
        }],
    });
    node.create("stubborn", spec).await;
    let pids_of = async || -> Vec<u32> {
        let text = logs(&node, "stubborn", "container=stubborn").await;
        text.split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .collect()
    };
    eventually("the PIDs logged", Duration::from_secs(20), async || {
        pids_of().await.len() == 2
    })
    .await;
    let pids = pids_of().await;
    let alive = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    assert!(pids.iter().all(|p| alive(*p)));
    let started = std::time::Instant::now();
    node.pods
        .delete("stubborn", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "no process of the pod is left",
        Duration::from_secs(20),
        async || !pids.iter().any(|p| alive(*p)),
    )
    .await;
    // Not before the grace period: TERM was ignored, KILL came at 1 s.
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    eventually("the pod is gone", Duration::from_secs(20), async || {
        node.pods.get_opt("stubborn").await.unwrap().is_none()
    })
    .await;
    let _ = std::fs::remove_dir_all(root("grace"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_node_cannot_run_gets_a_clear_status_and_event() {
    let node = node(ProcessProvider::new(config("refused"))).await;
    // A 10 MB variable never reaches a node: the API server refuses the
    // request (413, its 3 MiB limit). One of 2 MiB does, and the node
    // refuses it (its limit is 1 MiB of environment).
    let huge = pod(
        "too-big",
        serde_json::json!({"containers": [{"name": "a", "image": "busybox",
        "env": [{"name": "BIG", "value": "x".repeat(10 * 1024 * 1024)}]}]}),
    );
    let err = node
        .pods
        .create(&PostParams::default(), &huge)
        .await
        .unwrap_err();
    // 413, or the connection closed by the server before the whole body
    // was sent (it stops reading at the limit).
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 413)
            || matches!(err, kube::Error::HyperError(_) | kube::Error::Service(_)),
        "{err}"
    );
    assert!(node.pods.get_opt("too-big").await.unwrap().is_none());
    let cases = [
        (
            "unmapped",
            serde_json::json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "ruby"}]}),
            "image \"ruby\" is not mapped",
        ),
        (
            "hostpath",
            serde_json::json!({"restartPolicy": "Never",
            "volumes": [{"name": "host", "hostPath": {"path": "/etc"}}],
            "containers": [{"name": "a", "image": "busybox", "args": ["true"]}]}),
            "is not under a prefix this node allows",
        ),
        (
            "huge-env",
            serde_json::json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "busybox",
            "args": ["true"], "env": [{"name": "BIG", "value": "x".repeat(2 * 1024 * 1024)}]}]}),
            "the environment is",
        ),
        (
            "gpu",
            serde_json::json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "busybox",
            "args": ["true"], "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}),
            "resource \"nvidia.com/gpu\" (a device or extended resource) is not offered",
        ),
        (
            "block",
            serde_json::json!({"restartPolicy": "Never",
            "volumes": [{"name": "disk", "emptyDir": {}}],
            "containers": [{"name": "a", "image": "busybox", "args": ["true"],
            "volumeDevices": [{"name": "disk", "devicePath": "/dev/xvda"}]}]}),
            "volumeDevices (raw block devices) are not supported",
        ),
        (
            "capable",
            serde_json::json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "busybox",
            "args": ["true"], "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}),
            "capabilities [\"NET_ADMIN\"] cannot be granted",
        ),
    ];
    for (name, spec, message) in &cases {
        node.create(name, spec.clone()).await;
        eventually(
            &format!("{name} Failed"),
            Duration::from_secs(20),
            async || {
                let p = node.pods.get(name).await.unwrap();
                let s = p.status.unwrap_or_default();
                s.phase.as_deref() == Some("Failed")
                    && s.reason.as_deref() == Some("ProviderFailed")
                    && s.message.as_deref().is_some_and(|m| m.contains(message))
            },
        )
        .await;
        let events: Api<Event> = Api::namespaced(node.api.client(), "default");
        let listed = events.list(&ListParams::default()).await.unwrap().items;
        assert!(
            listed
                .iter()
                .any(|e| e.involved_object.name.as_deref() == Some(name)
                    && e.message.as_deref().is_some_and(|m| m.contains(message))),
            "an event for {name}"
        );
    }
    let _ = std::fs::remove_dir_all(root("refused"));
}

async fn read_all(mut from: impl tokio::io::AsyncRead + Unpin) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = String::new();
    from.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_port_forward_reach_the_real_processes() {
    use kube::api::AttachParams;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let node = node(ProcessProvider::new(config("exec"))).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spec = serde_json::json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "web", "image": "python:3", "command": ["python3", "-u", "-m", "http.server"],
            "args": [port.to_string(), "--bind", "127.0.0.1"],
            "env": [{"name": "GREETING", "value": "from the pod"}],
        }],
    });
    node.create("web", spec).await;
    eventually("the server listens", Duration::from_secs(30), async || {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;

    // Exec: the container's environment and directory, stdin, exit codes.
    let mut session = node
        .pods
        .exec(
            "web",
            ["sh", "-c", "echo \"$GREETING\"; pwd; cat"],
            &AttachParams::default().stdin(true).stderr(false),
        )
        .await
        .unwrap();
    let mut stdin = session.stdin().unwrap();
    let stdout = session.stdout().unwrap();
    stdin.write_all(b"typed in\n").await.unwrap();
    stdin.shutdown().await.unwrap();
    let out = read_all(stdout).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "from the pod");
    assert!(lines[1].ends_with("/containers/web"), "{out}");
    assert_eq!(lines[2], "typed in");
    let mut failing = node
        .pods
        .exec("web", ["sh", "-c", "exit 3"], &AttachParams::default())
        .await
        .unwrap();
    let status = failing.take_status().unwrap().await.unwrap();
    assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
    assert_eq!(
        status.details.unwrap().causes.unwrap()[0]
            .message
            .as_deref(),
        Some("3")
    );

    // A terminal: the command sees a TTY, whose size follows the client's.
    let mut tty = node
        .pods
        .exec(
            "web",
            ["sh", "-c", "sleep 1; tty; stty size"],
            &AttachParams::interactive_tty(),
        )
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
    assert!(out.contains("/dev/pts/"), "{out:?}");
    assert!(out.contains("43 132"), "{out:?}");
    assert!(
        out.contains("\r\n"),
        "a terminal ends lines with CR LF: {out:?}"
    );

    // Port-forward to the real server.
    let mut forwarder = node.pods.portforward("web", &[port]).await.unwrap();
    let mut stream = forwarder.take_stream(port).unwrap();
    stream
        .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("</html>") {
            match stream.read(&mut chunk).await.unwrap() {
                0 => break,
                n => answer.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer in time");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    forwarder.abort();
    // The server logged the request.
    eventually(
        "the request in the log",
        Duration::from_secs(10),
        async || {
            logs(&node, "web", "container=web")
                .await
                .contains("\"GET / HTTP/1.0\" 200")
        },
    )
    .await;
    node.delete("web").await;
    let _ = std::fs::remove_dir_all(root("exec"));
}

/// A node with an address of its own: its pods know it as `status.podIP`
/// from their first start, a server binding `$(POD_IP)` is probed and
/// port-forwarded there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_knows_its_nodes_address_from_the_start_and_is_probed_there() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const ADDRESS: &str = "127.0.33.7";
    let mut config = config("address");
    config.pod_ip = ADDRESS.into();
    let node = node(ProcessProvider::new(config)).await;
    let port = std::net::TcpListener::bind((ADDRESS, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    node.create(
        "web",
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "web", "image": "python:3",
                "command": ["python3", "-u", "-m", "http.server", "$(PORT)", "--bind", "$(POD_IP)"],
                "env": [
                    {"name": "PORT", "value": port.to_string()},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "readinessProbe": {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1},
            }],
        }),
    )
    .await;
    eventually(
        "web Ready: probed at the pod's IP",
        Duration::from_secs(30),
        async || {
            let p = node.pods.get("web").await.unwrap();
            condition(&p, "Ready").as_deref() == Some("True")
        },
    )
    .await;
    let pod = node.pods.get("web").await.unwrap();
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()),
        Some(ADDRESS)
    );
    // Listening at the node's address only, not on 127.0.0.1.
    assert!(
        tokio::net::TcpStream::connect((ADDRESS, port))
            .await
            .is_ok()
    );
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
    );
    let mut forwarder = node.pods.portforward("web", &[port]).await.unwrap();
    let mut stream = forwarder.take_stream(port).unwrap();
    stream
        .write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("an answer in time")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    drop(stream);
    drop(forwarder);
    node.delete("web").await;
    let _ = std::fs::remove_dir_all(root("address"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_volumes_are_files_and_follow_their_sources() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::AttachParams;
    let api = ApiServer::start().await.unwrap();
    let client = api.client();
    let resources = Arc::new(stratus_kubelet::resources::ApiResources::new(
        client.clone(),
        Duration::from_secs(60),
    ));
    let provider = ProcessProvider::new(config("volumes")).with_resources(resources);
    let vk = stratus_testing::kubelet_api::virtual_node_with_api(
        &api,
        NodeConfig::new(NODE, "process"),
        Arc::new(provider) as Arc<dyn PodLifecycleHandler>,
    )
    .await
    .unwrap();
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(vk.run(stopped));
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let settings: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "settings"}, "data": {"greeting": "hello", "other": "x"},
    }))
    .unwrap();
    maps.create(&PostParams::default(), &settings)
        .await
        .unwrap();
    let token: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "token"}, "stringData": {"value": "s3cret"},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &token)
        .await
        .unwrap();
    let node = Node {
        pods: Api::namespaced(client.clone(), "default"),
        api,
        _stop: watch::channel(false).0,
    };
    let spec = serde_json::json!({
        "terminationGracePeriodSeconds": 1,
        "volumes": [
            {"name": "config", "configMap": {"name": "settings", "items": [{"key": "greeting", "path": "greeting.txt"}]}},
            {"name": "secret", "secret": {"secretName": "token", "defaultMode": 0o400}},
            {"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        ],
        "containers": [{
            "name": "app", "image": "busybox", "args": ["sleep 600"],
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/config"},
                {"name": "secret", "mountPath": "/etc/secret"},
                {"name": "info", "mountPath": "/etc/info"},
            ],
        }],
    });
    node.create("reader", spec).await;
    eventually("reader Running", Duration::from_secs(30), async || {
        node.phase("reader").await.as_deref() == Some("Running")
    })
    .await;
    let read = async |script: &str| {
        let mut session = node
            .pods
            .exec(
                "reader",
                ["sh", "-c", script],
                &AttachParams::default().stderr(false),
            )
            .await
            .unwrap();
        read_all(session.stdout().unwrap()).await
    };
    let files = "cd \"$STRATUS_CONTAINER_ROOT/etc\"; cat config/greeting.txt; echo; ls config; cat secret/value; echo; stat -L -c %a secret/value; cat info/name";
    assert_eq!(
        read(files).await,
        "hello\ngreeting.txt\ns3cret\n400\nreader"
    );

    // The ConfigMap changes (once the node watches the namespace's
    // ConfigMaps, which it starts within its 5 s rescan): the file follows,
    // all at once.
    eventually(
        "the node watches ConfigMaps",
        Duration::from_secs(20),
        async || {
            node.api
                .requests()
                .iter()
                .any(|r| r.verb == stratus_testing::Verb::Watch && r.resource == "configmaps")
        },
    )
    .await;
    let mut changed = settings.clone();
    changed.data = Some([("greeting".to_string(), "bonjour".to_string())].into());
    maps.replace("settings", &PostParams::default(), &changed)
        .await
        .unwrap();
    eventually(
        "the new greeting in the file",
        Duration::from_secs(20),
        async || read("cat \"$STRATUS_CONTAINER_ROOT/etc/config/greeting.txt\"").await == "bonjour",
    )
    .await;
    node.delete("reader").await;
    let _ = std::fs::remove_dir_all(root("volumes"));
}

fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_restart_the_unhealthy_and_gate_readiness() {
    let node = node(ProcessProvider::new(config("probes"))).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Liveness on a port nobody listens on: killed and restarted.
    node.create(
        "unhealthy",
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": "busybox", "args": ["sleep 600"],
                "livenessProbe": {"tcpSocket": {"port": closed}, "periodSeconds": 1, "failureThreshold": 2},
            }],
        }),
    )
    .await;
    // Readiness on a file the container writes after two seconds.
    node.create(
        "gated",
        serde_json::json!({
            "containers": [{
                "name": "app", "image": "busybox", "args": ["sleep 2; touch ready; sleep 600"],
                "readinessProbe": {"exec": {"command": ["test", "-f", "ready"]}, "periodSeconds": 1},
            }],
        }),
    )
    .await;
    eventually(
        "gated Running but not Ready",
        Duration::from_secs(20),
        async || {
            let p = node.pods.get("gated").await.unwrap();
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && condition(&p, "Ready").as_deref() == Some("False")
                && !container(&p, "app").ready
        },
    )
    .await;
    eventually(
        "gated Ready once its probe passes",
        Duration::from_secs(20),
        async || {
            let p = node.pods.get("gated").await.unwrap();
            condition(&p, "Ready").as_deref() == Some("True") && container(&p, "app").ready
        },
    )
    .await;
    eventually(
        "unhealthy restarted by its liveness probe",
        Duration::from_secs(30),
        async || {
            let p = node.pods.get("unhealthy").await.unwrap();
            let app = container(&p, "app");
            app.restart_count >= 1
                && app
                    .last_state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .and_then(|t| t.message.as_deref())
                    .is_some_and(|m| m.contains("failed liveness probe"))
        },
    )
    .await;
    // Nothing outlives the test: the shells' children go with their groups.
    for name in ["unhealthy", "gated"] {
        node.pods
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("both deleted", Duration::from_secs(40), async || {
        node.pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    let _ = std::fs::remove_dir_all(root("probes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pre_stop_hook_runs_before_sigterm_and_logs_follow() {
    let node = node(ProcessProvider::new(config("prestop"))).await;
    let marker = root("prestop-marker");
    let _ = std::fs::remove_file(&marker);
    node.create(
        "hooked",
        serde_json::json!({
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "app", "image": "busybox",
                "args": ["trap 'echo TERM >> \"$MARKER\"; exit 0' TERM; i=0; while true; do i=$((i+1)); echo \"line $i\"; sleep 0.2; done"],
                "env": [{"name": "MARKER", "value": marker.display().to_string()}],
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo pre-stop >> \"$MARKER\""]}}},
            }],
        }),
    )
    .await;
    eventually("hooked Running", Duration::from_secs(20), async || {
        node.phase("hooked").await.as_deref() == Some("Running")
    })
    .await;
    // Follow: lines keep arriving while the process writes them.
    let mut lines = node
        .pods
        .log_stream(
            "hooked",
            &kube::api::LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    use futures_util::AsyncBufReadExt;
    let mut seen = Vec::new();
    let mut buffer = String::new();
    while seen.len() < 8 {
        buffer.clear();
        let n = tokio::time::timeout(Duration::from_secs(5), lines.read_line(&mut buffer))
            .await
            .expect("a new line in time")
            .unwrap();
        assert!(n > 0, "the followed log ended early");
        seen.push(buffer.trim_end().to_owned());
    }
    let numbers: Vec<u32> = seen
        .iter()
        .filter_map(|l| l.strip_prefix("line ")?.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 8, "{seen:?}");
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{seen:?}");
    node.delete("hooked").await;
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "pre-stop\nTERM\n"
    );
    let _ = std::fs::remove_file(&marker);
    let _ = std::fs::remove_dir_all(root("prestop"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_come_from_the_processes() {
    let provider = ProcessProvider::new(config("stats")).with_node_name(NODE);
    let node = node(provider).await;
    node.create(
        "busy",
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "spin", "image": "busybox", "args": ["while true; do :; done"]}],
        }),
    )
    .await;
    eventually("busy Running", Duration::from_secs(20), async || {
        node.phase("busy").await.as_deref() == Some("Running")
    })
    .await;
    let summary = async || -> serde_json::Value {
        let request = http::Request::get(format!("/api/v1/nodes/{NODE}/proxy/stats/summary"))
            .body(Vec::new())
            .unwrap();
        serde_json::from_str(&node.api.client().request_text(request).await.unwrap()).unwrap()
    };
    // Two summaries a second apart: the spinning shell uses about a core.
    let _ = summary().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s = summary().await;
    assert_eq!(s["node"]["nodeName"], NODE);
    assert!(s["node"]["memory"]["workingSetBytes"].as_u64().unwrap() > 0);
    let pod = &s["pods"][0];
    assert_eq!(pod["podRef"]["name"], "busy");
    let spin = &pod["containers"][0];
    assert_eq!(spin["name"], "spin");
    let cores = spin["cpu"]["usageNanoCores"].as_u64().unwrap();
    assert!(
        cores > 200_000_000,
        "a busy loop uses a good part of a core: {cores}"
    );
    assert!(spin["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0);
    assert!(spin["memory"]["workingSetBytes"].as_u64().unwrap() > 0);
    let request = http::Request::get(format!("/api/v1/nodes/{NODE}/proxy/metrics/resource"))
        .body(Vec::new())
        .unwrap();
    let metrics = node.api.client().request_text(request).await.unwrap();
    assert!(
        metrics.contains("container_cpu_usage_seconds_total{container=\"spin\""),
        "{metrics}"
    );
    node.delete("busy").await;
    let _ = std::fs::remove_dir_all(root("stats"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_paths_under_an_allowed_prefix_are_mounted() {
    let shared = root("hostpath-shared");
    std::fs::create_dir_all(&shared).unwrap();
    let mut config = config("hostpath");
    config.host_path_prefixes.push(shared.clone());
    let node = node(ProcessProvider::new(config)).await;
    node.create(
        "writer",
        serde_json::json!({
            "restartPolicy": "Never",
            "volumes": [{"name": "out", "hostPath": {"path": shared.join("out").display().to_string(), "type": "DirectoryOrCreate"}}],
            "containers": [{
                "name": "app", "image": "busybox", "args": ["echo written > host/result"],
                "volumeMounts": [{"name": "out", "mountPath": "/host"}],
            }],
        }),
    )
    .await;
    eventually("writer Succeeded", Duration::from_secs(20), async || {
        node.phase("writer").await.as_deref() == Some("Succeeded")
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(shared.join("out/result")).unwrap(),
        "written\n"
    );
    // A path outside the prefixes, or climbing out of one, is refused.
    for (name, path) in [
        ("outside", "/etc".to_string()),
        ("climbing", format!("{}/../..", shared.display())),
    ] {
        node.create(
            name,
            serde_json::json!({
                "restartPolicy": "Never",
                "volumes": [{"name": "h", "hostPath": {"path": path}}],
                "containers": [{"name": "app", "image": "busybox", "args": ["true"]}],
            }),
        )
        .await;
        eventually(
            &format!("{name} refused"),
            Duration::from_secs(20),
            async || {
                let p = node.pods.get(name).await.unwrap();
                p.status
                    .and_then(|s| s.message)
                    .is_some_and(|m| m.contains("is not under a prefix this node allows"))
            },
        )
        .await;
    }
    let _ = std::fs::remove_dir_all(&shared);
    let _ = std::fs::remove_dir_all(root("hostpath"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_reaches_the_processs_stdin_and_output() {
    use kube::api::AttachParams;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let node = node(ProcessProvider::new(config("attach"))).await;
    node.create(
        "echoer",
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": "busybox", "stdin": true,
                "args": ["while read line; do echo \"got $line\"; echo \"err $line\" >&2; done"],
            }],
        }),
    )
    .await;
    eventually("echoer Running", Duration::from_secs(20), async || {
        node.phase("echoer").await.as_deref() == Some("Running")
    })
    .await;
    let mut attached = node
        .pods
        .attach("echoer", &AttachParams::default().stdin(true))
        .await
        .unwrap();
    let mut stdin = attached.stdin().unwrap();
    let mut stdout = tokio::io::BufReader::new(attached.stdout().unwrap());
    let mut stderr = tokio::io::BufReader::new(attached.stderr().unwrap());
    stdin.write_all(b"ping\n").await.unwrap();
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(10), stdout.read_line(&mut line))
        .await
        .expect("output in time")
        .unwrap();
    assert_eq!(line, "got ping\n");
    line.clear();
    tokio::time::timeout(Duration::from_secs(10), stderr.read_line(&mut line))
        .await
        .expect("error output in time")
        .unwrap();
    assert_eq!(line, "err ping\n");
    drop(stdin);
    drop(attached);
    // A container without stdin refuses input.
    node.create(
        "deaf",
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "busybox", "args": ["sleep 600"]}],
        }),
    )
    .await;
    eventually("deaf Running", Duration::from_secs(20), async || {
        node.phase("deaf").await.as_deref() == Some("Running")
    })
    .await;
    let mut refused = node
        .pods
        .attach("deaf", &AttachParams::default().stdin(true))
        .await
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), refused.take_status().unwrap())
        .await
        .expect("a status in time");
    assert!(
        format!("{status:?}").contains("does not read stdin"),
        "{status:?}"
    );
    node.delete("echoer").await;
    node.delete("deaf").await;
    let _ = std::fs::remove_dir_all(root("attach"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limits_bind_the_process_and_what_exec_starts() {
    use kube::api::AttachParams;
    let node = node(ProcessProvider::new(config("memory"))).await;
    // 256 MiB asked of a container limited to 64 MiB fails; 8 MiB does not.
    // (The limit lands just after the process starts: the programs wait a
    // moment first, as any real program's start-up does.)
    let grab = |mib: u32| {
        format!(
            "import time; time.sleep(0.5); b = bytearray({mib} * 1024 * 1024); print('got {mib} MiB')"
        )
    };
    let spec = serde_json::json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "greedy", "image": "python:3", "command": ["python3", "-c", grab(256)],
             "resources": {"limits": {"memory": "64Mi"}}},
            {"name": "modest", "image": "python:3", "command": ["python3", "-c", grab(8)],
             "resources": {"limits": {"memory": "64Mi"}}},
            {"name": "unbound", "image": "python:3", "command": ["python3", "-c", grab(256)]},
            {"name": "shell", "image": "nginx", "resources": {"limits": {"memory": "64Mi"}}},
        ],
    });
    node.create("limited", spec).await;
    eventually(
        "the three programs ended",
        Duration::from_secs(30),
        async || {
            let Ok(p) = node.pods.get("limited").await else {
                return false;
            };
            p.status
                .and_then(|s| s.container_statuses)
                .is_some_and(|cs| {
                    cs.iter()
                        .filter(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
                        .count()
                        == 3
                })
        },
    )
    .await;
    let p = node.pods.get("limited").await.unwrap();
    let exit = |name: &str| {
        container(&p, name)
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap()
            .exit_code
    };
    assert_ne!(exit("greedy"), 0);
    assert!(
        logs(&node, "limited", "container=greedy")
            .await
            .contains("MemoryError")
    );
    assert_eq!(exit("modest"), 0);
    assert_eq!(exit("unbound"), 0);
    assert!(
        logs(&node, "limited", "container=unbound")
            .await
            .contains("got 256 MiB")
    );
    // A command exec'd in the container is bound too.
    let mut session = node
        .pods
        .exec(
            "limited",
            [
                "sh",
                "-c",
                "sleep 0.5; grep 'Max data size' /proc/self/limits",
            ],
            &AttachParams::default().container("shell").stderr(false),
        )
        .await
        .unwrap();
    let out = read_all(session.stdout().unwrap()).await;
    assert!(out.contains(&(64u64 << 20).to_string()), "{out}");
    // A limit that is not a size is refused with a clear status.
    node.create(
        "nonsense",
        serde_json::json!({"restartPolicy": "Never", "containers": [
            {"name": "a", "image": "nginx", "resources": {"limits": {"memory": "lots"}}}]}),
    )
    .await;
    eventually("nonsense refused", Duration::from_secs(20), async || {
        node.pods
            .get("nonsense")
            .await
            .ok()
            .and_then(|p| p.status?.message)
            .is_some_and(|m| m.contains("memory limit \"lots\""))
    })
    .await;
    let _ = std::fs::remove_dir_all(root("memory"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_start_in_order_restart_always_and_stop_after_the_app() {
    let node = node(ProcessProvider::new(config("sidecar"))).await;
    let shared = serde_json::json!([{"name": "shared", "mountPath": "/shared"}]);
    let spec = serde_json::json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 2,
        "volumes": [{"name": "shared", "emptyDir": {}}],
        "initContainers": [
            // A sidecar that fails once, then serves (writes a heartbeat).
            {"name": "proxy", "image": "busybox", "restartPolicy": "Always", "volumeMounts": shared,
             "args": ["if [ ! -f shared/crashed ]; then touch shared/crashed; exit 1; fi; \
                       touch shared/ready; while true; do date +%s%N > shared/beat; sleep 0.1; done"]},
            // An ordinary init container after it: starts once the sidecar did.
            {"name": "setup", "image": "busybox", "volumeMounts": shared,
             "args": ["while [ ! -f shared/crashed ]; do sleep 0.05; done; echo set up > shared/setup"]},
        ],
        "containers": [{
            "name": "job", "image": "busybox", "volumeMounts": shared,
            "args": ["while [ ! -f shared/ready ]; do sleep 0.05; done; cat shared/setup; \
                      a=$(cat shared/beat); sleep 0.5; b=$(cat shared/beat); [ \"$a\" != \"$b\" ]"],
        }],
    });
    node.create("with-proxy", spec).await;
    eventually(
        "with-proxy Running and initialized",
        Duration::from_secs(30),
        async || {
            let p = node.pods.get("with-proxy").await.unwrap();
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && condition(&p, "Initialized").as_deref() == Some("True")
        },
    )
    .await;
    // The job ends well (the sidecar was beating beside it): the pod
    // succeeds although the sidecar never exits on its own.
    eventually(
        "with-proxy Succeeded",
        Duration::from_secs(30),
        async || node.phase("with-proxy").await.as_deref() == Some("Succeeded"),
    )
    .await;
    // Then the sidecar is stopped (SIGTERM, within the grace period).
    eventually("the sidecar stopped", Duration::from_secs(10), async || {
        let p = node.pods.get("with-proxy").await.unwrap();
        container(&p, "proxy")
            .state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some())
    })
    .await;
    let p = node.pods.get("with-proxy").await.unwrap();
    let terminated = |name: &str| {
        container(&p, name)
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap_or_else(|| panic!("{name} still runs"))
    };
    assert_eq!(terminated("job").exit_code, 0);
    assert_eq!(terminated("setup").exit_code, 0);
    // The sidecar restarted under its own Always (the pod's is Never) and
    // was stopped once the job ended.
    let proxy = container(&p, "proxy");
    assert_eq!(proxy.restart_count, 1, "{proxy:?}");
    terminated("proxy");
    assert_eq!(logs(&node, "with-proxy", "container=job").await, "set up\n");

    // Deleting a pod whose sidecar serves a long-running app ends both.
    node.create(
        "serving",
        serde_json::json!({
            "terminationGracePeriodSeconds": 2,
            "initContainers": [{"name": "proxy", "image": "nginx", "restartPolicy": "Always"}],
            "containers": [{"name": "app", "image": "nginx"}],
        }),
    )
    .await;
    eventually("serving Running", Duration::from_secs(30), async || {
        node.phase("serving").await.as_deref() == Some("Running")
    })
    .await;
    let begun = std::time::Instant::now();
    node.delete("serving").await;
    assert!(begun.elapsed() < Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(root("sidecar"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_limits_are_cgroups_where_the_node_may_make_them() {
    use kube::api::AttachParams;
    use stratus_pod::NodeProvider;
    let config = config("cpu");
    // What the node says it enforces decides what to expect here.
    let mut described = k8s_openapi::api::core::v1::Node::default();
    stratus_provider_process::HostNode::new(&config).configure_node(&mut described);
    let enforced = described.metadata.annotations.unwrap()
        [stratus_provider_process::LIMITS_ANNOTATION]
        .clone();
    let node = node(ProcessProvider::new(config)).await;
    node.create(
        "capped",
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "250m"}}}],
        }),
    )
    .await;
    eventually("capped Running", Duration::from_secs(20), async || {
        node.phase("capped").await.as_deref() == Some("Running")
    })
    .await;
    let uid = node.pods.get("capped").await.unwrap().metadata.uid.unwrap();
    // An exec'd command shares the container's cgroup; its quota file
    // says the limit.
    let mut session = node
        .pods
        .exec(
            "capped",
            [
                "sh",
                "-c",
                "sleep 0.5; g=$(grep -E '^[0-9]+:([^:]*,)?cpu(,[^:]*)?:' /proc/self/cgroup | cut -d: -f3); \
                 echo \"$g\"; for m in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do \
                 [ -f \"$m$g/cpu.cfs_quota_us\" ] && cat \"$m$g/cpu.cfs_quota_us\" && break; done; \
                 u=$(grep '^0::' /proc/self/cgroup | cut -d: -f3); echo \"$u\"; \
                 cat \"/sys/fs/cgroup$u/cpu.max\" 2>/dev/null; true",
            ],
            &AttachParams::default().stderr(false),
        )
        .await
        .unwrap();
    let out = read_all(session.stdout().unwrap()).await;
    if enforced.ends_with("cpu=cgroup-v1") {
        assert!(out.contains(&format!("stratus-process/{uid}/app")), "{out}");
        assert!(out.lines().any(|l| l == "25000"), "{out}");
    } else if enforced.ends_with("cpu=cgroup-v2") {
        assert!(out.contains(&format!("stratus-process/{uid}/app")), "{out}");
        assert!(out.lines().any(|l| l == "25000 100000"), "{out}");
    } else {
        assert_eq!(enforced, "memory=rlimit-data,cpu=none");
        assert!(!out.contains("stratus-process"), "{out}");
    }
    // The pod's cgroups go with it.
    node.delete("capped").await;
    if enforced.ends_with("cpu=cgroup-v1") {
        let pod_cgroups = std::fs::read_to_string("/proc/self/cgroup")
            .unwrap()
            .lines()
            .any(|l| l.contains(&format!("stratus-process/{uid}")));
        assert!(!pod_cgroups);
        let left = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
            .iter()
            .any(|m| {
                std::path::Path::new(m)
                    .join("stratus-process")
                    .join(&uid)
                    .exists()
            });
        assert!(!left, "the pod's cgroup was left behind");
    }
    let _ = std::fs::remove_dir_all(root("cpu"));
}

/// The processes running `sleep 6017` (the churn test's image).
fn churn_processes() -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x006017\x00")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_deleted_and_recreated_pods_run_as_themselves_and_nothing_else_runs() {
    let mut config = config("churn");
    config
        .images
        .insert("churn".into(), vec!["sleep".into(), "6017".into()]);
    let provider = ProcessProvider::new(config);
    let node = node(provider.clone()).await;
    let make = |name: &str| {
        pod(
            name,
            serde_json::json!({"containers": [{"name": "app", "image": "churn"}]}),
        )
    };
    let recreated =
        stratus_testing::churn::force_delete_and_recreate(&node.pods, make, 20, 25).await;
    assert!(recreated >= 500, "{recreated} pods re-created");
    stratus_testing::poll(
        "every re-created pod Running as itself, one process each",
        Duration::from_secs(60),
    )
    .every(Duration::from_millis(250))
    .until(|| async {
        let list = node.pods.list(&ListParams::default()).await.unwrap();
        let held = provider.get_pods().await.unwrap();
        let mut problems = Vec::new();
        for p in &list.items {
            let name = p.metadata.name.clone().unwrap_or_default();
            let status = p.status.clone().unwrap_or_default();
            let running = status
                .container_statuses
                .iter()
                .flatten()
                .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
            if status.phase.as_deref() != Some("Running") || !running {
                problems.push(format!(
                    "{name} is {:?} (containers running: {running})",
                    status.phase
                ));
            }
            if !held
                .iter()
                .any(|h| h.metadata.name == p.metadata.name && h.metadata.uid == p.metadata.uid)
            {
                problems.push(format!(
                    "{name} ({:?}) is not in the provider",
                    p.metadata.uid
                ));
            }
        }
        if held.len() != list.items.len() {
            problems.push(format!(
                "the provider holds {} pods, the API {}",
                held.len(),
                list.items.len()
            ));
        }
        let processes = churn_processes();
        if processes != list.items.len() {
            problems.push(format!(
                "{processes} processes for {} pods",
                list.items.len()
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    })
    .await
    .unwrap();
    // Deleted for good: no process outlives its pod.
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for i in 0..20 {
        node.pods.delete(&format!("r-{i}"), &force).await.unwrap();
    }
    eventually(
        "no churn process left",
        Duration::from_secs(20),
        async || churn_processes() == 0,
    )
    .await;
    drop(node);
    let _ = std::fs::remove_dir_all(root("churn"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_delete_of_an_earlier_pod_leaves_its_successor_running() {
    let provider = ProcessProvider::new(config("retried-delete"));
    let incarnation = |uid: &str| {
        let mut pod = pod(
            "app",
            serde_json::json!({"containers": [{"name": "app", "image": "nginx"}]}),
        );
        pod.metadata.namespace = Some("default".into());
        pod.metadata.uid = Some(uid.into());
        pod.metadata.deletion_grace_period_seconds = Some(0);
        pod
    };
    let (old, new) = (incarnation("uid-1"), incarnation("uid-2"));
    provider.create_pod(&old).await.unwrap();
    provider.delete_pod(&old).await.unwrap();
    eventually("the first pod gone", Duration::from_secs(10), async || {
        provider.get_pod("default", "app").await.unwrap().is_none()
    })
    .await;
    provider.create_pod(&new).await.unwrap();
    // The virtual kubelet retries the delete of the first pod (its first
    // answer was lost): the second must keep running.
    provider.delete_pod(&old).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let running = provider.get_pod("default", "app").await.unwrap();
    assert_eq!(
        running.and_then(|p| p.metadata.uid).as_deref(),
        Some("uid-2"),
        "the successor was deleted by its predecessor's retried delete"
    );
    provider.delete_pod(&new).await.unwrap();
    eventually("the second pod gone", Duration::from_secs(10), async || {
        provider.get_pod("default", "app").await.unwrap().is_none()
    })
    .await;
    let _ = std::fs::remove_dir_all(root("retried-delete"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_recreated_while_its_predecessor_stops_starts_when_the_predecessor_ends() {
    let node = node(ProcessProvider::new(config("successor"))).await;
    // The first pod ignores TERM: it stops when KILL comes, 11 s after the
    // stop. Its successor under the same name is refused (the name still
    // runs) until then, and the refusals' backoff grows meanwhile (its
    // retries come at 10.2 s, then 20.5 s).
    let spec = serde_json::json!({
        "terminationGracePeriodSeconds": 11,
        "containers": [{"name": "app", "image": "busybox", "args": ["trap '' TERM; sleep 600 & wait"]}],
    });
    node.create("app", spec.clone()).await;
    eventually(
        "the first pod Running",
        Duration::from_secs(20),
        async || node.phase("app").await.as_deref() == Some("Running"),
    )
    .await;
    let first = node.pods.get("app").await.unwrap().metadata.uid;
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    node.pods.delete("app", &force).await.unwrap();
    // (The successor stops at once when the test deletes it.)
    let mut successor = spec;
    successor["terminationGracePeriodSeconds"] = 1.into();
    node.create("app", successor).await;
    let replaced = std::time::Instant::now();
    let second = node.pods.get("app").await.unwrap().metadata.uid;
    assert_ne!(first, second);
    eventually(
        "the successor Running",
        Duration::from_secs(30),
        async || node.phase("app").await.as_deref() == Some("Running"),
    )
    .await;
    let waited = replaced.elapsed();
    // It ran once the first pod's processes ended (its end is what lets
    // the successor in), not at the next backoff retry.
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(16),
        "the successor ran {waited:?} after it was created"
    );
    let events: Api<Event> = Api::namespaced(node.api.client(), "default");
    let refused = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some("ProviderCreateFailed"));
    assert!(refused, "the successor was never refused");
    node.delete("app").await;
    let _ = std::fs::remove_dir_all(root("successor"));
}

/// With `PodNetwork::PodCidr` the node learns its pod CIDR from its Node
/// (as node-IPAM writes it) and each pod gets an address of its own from
/// it, known before it starts; a pod whose address is not yet this
/// machine's (no route) waits in `ContainerCreating` and starts once it is;
/// a deleted pod's address is free for the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_addresses_of_their_own_from_the_node_s_pod_cidr() {
    const CIDR: &str = "198.19.50.0/24";
    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args([
                    "-4", "route", "del", "local", CIDR, "dev", "lo", "table", "local",
                ])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    let _cleanup = Cleanup;
    let mut config = config("cidr");
    config.pod_network = stratus_provider_process::PodNetwork::PodCidr(Default::default());
    let host = stratus_provider_process::HostNode::new(&config);
    let api = ApiServer::start().await.unwrap();
    let node = stratus_testing::kubelet_api::virtual_node_builder_with_api(
        &api,
        NodeConfig::new(NODE, "process"),
        Arc::new(ProcessProvider::new(config)) as Arc<dyn PodLifecycleHandler>,
    )
    .await
    .unwrap()
    .node_provider(Arc::new(host))
    .build()
    .unwrap();
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(node.run(stopped));
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(api.client());
    eventually("the node registered", Duration::from_secs(10), async || {
        nodes.get_opt(NODE).await.unwrap().is_some()
    })
    .await;
    // What the node-IPAM controller writes.
    let cidr = serde_json::json!({"spec": {"podCIDR": CIDR, "podCIDRs": [CIDR]}});
    nodes
        .patch(
            NODE,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(cidr),
        )
        .await
        .unwrap();
    let node = Node {
        pods: Api::namespaced(api.client(), "default"),
        api,
        _stop,
    };
    let server = |port: u16| {
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "web", "image": "python:3",
                "command": ["python3", "-u", "-m", "http.server", port.to_string(), "--bind", "$(POD_IP)"],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "readinessProbe": {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1},
            }],
        })
    };
    node.create("a", server(8080)).await;
    node.create("b", server(8080)).await;
    let ip_of = async |name: &str| {
        let ip = async || node.pods.get(name).await.unwrap().status?.pod_ip;
        eventually(
            &format!("{name}'s IP"),
            Duration::from_secs(10),
            async || ip().await.is_some(),
        )
        .await;
        ip().await.unwrap()
    };
    let (a, b) = (ip_of("a").await, ip_of("b").await);
    let mut both = [a.clone(), b.clone()];
    both.sort();
    assert_eq!(both, ["198.19.50.2", "198.19.50.3"]);
    // Not routed here yet: the containers wait.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pod = node.pods.get("a").await.unwrap();
    let waiting = container(&pod, "web")
        .state
        .as_ref()
        .and_then(|s| s.waiting.clone());
    assert_eq!(
        waiting.and_then(|w| w.reason).as_deref(),
        Some("ContainerCreating")
    );
    // The route in (what the local cloud does for the node's CIDR): both
    // start, each server on its own address and the same port.
    let added = std::process::Command::new("ip")
        .args([
            "-4", "route", "replace", "local", CIDR, "dev", "lo", "table", "local",
        ])
        .status()
        .unwrap();
    assert!(added.success());
    for name in ["a", "b"] {
        eventually(
            &format!("{name} Ready"),
            Duration::from_secs(30),
            async || {
                condition(&node.pods.get(name).await.unwrap(), "Ready").as_deref() == Some("True")
            },
        )
        .await;
    }
    for ip in [&a, &b] {
        assert!(
            tokio::net::TcpStream::connect((ip.as_str(), 8080))
                .await
                .is_ok()
        );
    }
    // a's address goes back to the pool with a, and to the next pod.
    node.delete("a").await;
    node.create("c", server(8081)).await;
    assert_eq!(ip_of("c").await, a);
    for name in ["b", "c"] {
        node.delete(name).await;
    }
    let _ = std::fs::remove_dir_all(root("cidr"));
}
