//! `cargo xtask bench apiserver`: the harness API server; each HTTP figure
//! is compared with the same operation on the in-memory store without HTTP.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_apiserver::bench_support as direct;
use stratus_testing::ApiServer;

use crate::measure::rss_bytes;
use stratus_cluster::BoxError;

async fn namespace(server: &ApiServer, name: &str) -> Result<(), BoxError> {
    let api: Api<Namespace> = Api::all(server.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    api.create(&PostParams::default(), &ns).await?;
    Ok(())
}

/// Run jobs `0..total` on one task per worker (`workers` holds each task's
/// state: its client), taking the next job number from a shared counter;
/// the answer is jobs per second.
async fn jobs_per_second<W, F, Fut>(total: usize, workers: Vec<W>, job: F) -> Result<f64, BoxError>
where
    W: Send + 'static,
    F: Fn(W, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<W, BoxError>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in workers {
        let (next, job) = (next.clone(), job.clone());
        tasks.push(tokio::spawn(async move {
            let mut worker = worker;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, BoxError>(());
                }
                worker = job(worker, i).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// The internal bench target that measures [`memory_under_writes`] in a
/// process of its own (memory freed by other phases would be reused and
/// hide what the writes take, and theirs would be hidden in turn).
pub(super) const MEMORY_CHILD: &str = "apiserver-memory";

/// Run [`memory_under_writes`] in a child process of this (release) binary.
fn memory_in_a_process_of_its_own() -> Result<(f64, f64), BoxError> {
    let output = Command::new(std::env::current_exe()?)
        .arg(MEMORY_CHILD)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!(
        "{}",
        stdout
            .lines()
            .filter(|l| !l.starts_with('{'))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    if !output.status.success() {
        return Err(format!(
            "the memory benchmark failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let last: serde_json::Value = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or("the memory benchmark printed no result")
        .and_then(|l| {
            serde_json::from_str(l).map_err(|_| "the memory benchmark's result is not JSON")
        })?;
    match (last["took"].as_f64(), last["budget"].as_f64()) {
        (Some(took), Some(budget)) => Ok((took, budget)),
        _ => Err("the memory benchmark's result lacks took/budget".into()),
    }
}

/// The resident memory 100,000 ConfigMap writes cost: a server with
/// 64 MiB of history and 32 MiB of request log against one with 1 MiB of
/// each (what the rest of the server and the clients take); and those
/// budgets together.
pub(super) async fn memory_under_writes() -> Result<(f64, f64), BoxError> {
    const HISTORY: usize = 64 << 20;
    const REQUEST_LOG: usize = 32 << 20;
    let start = rss_bytes();
    // Each measured after its writes, its server still holding its history
    // and request log. First the small budgets: the second run reuses what
    // the first freed, so the difference is what the larger budgets took.
    let small = writes(1 << 20, 1 << 20).await?;
    let large = writes(HISTORY, REQUEST_LOG).await?;
    let took = large.saturating_sub(small);
    println!(
        "100,000 writes: resident memory {:.1} MB with 1 MiB budgets, {:.1} MB more with {} MiB of history and {} MiB of request log",
        small.saturating_sub(start) as f64 / 1e6,
        took as f64 / 1e6,
        HISTORY >> 20,
        REQUEST_LOG >> 20
    );
    Ok((took as f64, (HISTORY + REQUEST_LOG) as f64))
}

/// 100,000 writes (100 ConfigMaps of 1 KiB, each applied 1,000 times) to a
/// server with these budgets, from 16 clients: the process's resident
/// memory after them, the server still holding its history and log.
async fn writes(history: usize, request_log: usize) -> Result<u64, BoxError> {
    const WRITES: usize = 100_000;
    const OBJECTS: usize = 100;
    let server = ApiServer::builder()
        .history_bytes(history)
        .request_log_bytes(request_log)
        .start()
        .await?;
    let apis = (0..16)
        .map(|_| Api::<ConfigMap>::namespaced(server.client(), "default"))
        .collect();
    jobs_per_second(WRITES, apis, |api, i| async move {
        let name = format!("steady-{}", i % OBJECTS);
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name},
            "data": {"k": format!("{i:>1024}")},
        }))?;
        api.patch(
            &name,
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&cm),
        )
        .await?;
        Ok(api)
    })
    .await?;
    let resident = rss_bytes();
    server.shutdown().await;
    Ok(resident)
}

fn small_cm(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"bench": "true"}}, "data": {"k": "v"}})
}

struct Row {
    metric: &'static str,
    unit: &'static str,
    http: f64,
    floor: Option<f64>,
    /// Higher is better (rates) or lower is better (latency, bytes).
    higher_is_better: bool,
}

/// One test's use of its server: a new client's first request, a create
/// and a get.
async fn one_test(client: kube::Client, name: String) -> Result<(), BoxError> {
    let api = Api::<ConfigMap>::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(small_cm(&name))?;
    api.create(&PostParams::default(), &cm).await?;
    api.get(&name).await?;
    Ok(())
}

/// The median of 50 runs of starting a server and answering its first
/// request (a new client listing ConfigMaps), and the median of the same
/// first request to a server already started, in ms.
async fn server_per_test() -> Result<(f64, f64), BoxError> {
    const RUNS: usize = 50;
    let first_request = |client: kube::Client| async move {
        Api::<ConfigMap>::namespaced(client, "default")
            .list(&Default::default())
            .await
    };
    let mut started_ms = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let server = ApiServer::start().await?;
        first_request(server.client()).await?;
        started_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        server.shutdown().await;
    }
    let running = ApiServer::start().await?;
    let mut floor_ms = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        first_request(running.client()).await?;
        floor_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    running.shutdown().await;
    started_ms.sort_by(f64::total_cmp);
    floor_ms.sort_by(f64::total_cmp);
    Ok((started_ms[RUNS / 2], floor_ms[RUNS / 2]))
}

/// Wall time of 50 tests run at once, each with a server of its own, and of
/// the same 50 sharing one server, in ms.
async fn fifty_tests_in_parallel() -> Result<(f64, f64), BoxError> {
    const TESTS: usize = 50;
    let started = Instant::now();
    let tests: Vec<_> = (0..TESTS)
        .map(|i| {
            tokio::spawn(async move {
                let server = ApiServer::start().await?;
                one_test(server.client(), format!("own-{i}")).await?;
                server.shutdown().await;
                Ok::<_, BoxError>(())
            })
        })
        .collect();
    for t in tests {
        t.await??;
    }
    let own = started.elapsed().as_secs_f64() * 1000.0;
    let shared = ApiServer::start().await?;
    let started = Instant::now();
    let tests: Vec<_> = (0..TESTS)
        .map(|i| tokio::spawn(one_test(shared.client(), format!("shared-{i}"))))
        .collect();
    for t in tests {
        t.await??;
    }
    let together = started.elapsed().as_secs_f64() * 1000.0;
    shared.shutdown().await;
    Ok((own, together))
}

pub(super) async fn run() -> Result<(), BoxError> {
    const WRITES: usize = 20_000;
    const CLIENTS: usize = 16;
    const WATCHERS: usize = 10;
    const WATCH_EVENTS: usize = 10_000;
    const PODS: usize = 10_000;

    // Memory under a steady stream of writes: 100,000 ConfigMap writes
    // (100 objects of 1 KiB, each changed 1,000 times); what a history of
    // 64 MiB and a request log of 32 MiB took (unbounded, the history alone
    // would grow past 500 MB). The "floor" of this row is those budgets:
    // below 1, the server kept within them.
    let (history_growth, history_budget) = memory_in_a_process_of_its_own()?;
    let mut rows = vec![Row {
        metric: "rss_growth_after_100000_writes",
        unit: "B",
        http: history_growth,
        floor: Some(history_budget),
        higher_is_better: false,
    }];

    let server = ApiServer::builder().history(2_000_000).start().await?;
    for ns in ["bench-http", "bench-direct", "bench-watch", "bench-list"] {
        namespace(&server, ns).await?;
    }

    // Small creates from concurrent kube clients.
    let apis = (0..CLIENTS)
        .map(|_| Api::<ConfigMap>::namespaced(server.client(), "bench-http"))
        .collect();
    let http_creates = jobs_per_second(WRITES, apis, |api, i| async move {
        let cm: ConfigMap = serde_json::from_value(small_cm(&format!("cm-{i}")))?;
        api.create(&PostParams::default(), &cm).await?;
        Ok(api)
    })
    .await?;
    let started = Instant::now();
    for i in 0..WRITES {
        direct::create(
            &server,
            "configmaps",
            "bench-direct",
            &serde_json::to_vec(&small_cm(&format!("cm-{i}")))?,
        )?;
    }
    let floor_creates = WRITES as f64 / started.elapsed().as_secs_f64();
    rows.push(Row {
        metric: "creates_per_sec",
        unit: "/s",
        http: http_creates,
        floor: Some(floor_creates),
        higher_is_better: true,
    });

    // The same creates with protobuf bodies and answers, as kubectl 1.32+
    // and client-go write.
    namespace(&server, "bench-proto").await?;
    let bodies: Vec<Vec<u8>> = (0..WRITES)
        .map(|i| {
            let mut cm = small_cm(&format!("cm-{i}"));
            cm["apiVersion"] = json!("v1");
            cm["kind"] = json!("ConfigMap");
            stratus_apiserver::protobuf::encode_object(&cm)
        })
        .collect::<Result<_, _>>()?;
    let bodies = Arc::new(bodies);
    let clients = (0..CLIENTS)
        .map(|_| (server.client(), bodies.clone()))
        .collect();
    let protobuf_creates = jobs_per_second(WRITES, clients, |(client, bodies), i| async move {
        let req = http::Request::post("/api/v1/namespaces/bench-proto/configmaps")
            .header("Content-Type", "application/vnd.kubernetes.protobuf")
            .header("Accept", "application/vnd.kubernetes.protobuf")
            .body(kube::client::Body::from(bodies[i].clone()))?;
        let resp = client.send(req).await?;
        if resp.status() != http::StatusCode::CREATED {
            return Err(format!("protobuf create answered {}", resp.status()).into());
        }
        Ok((client, bodies))
    })
    .await?;
    rows.push(Row {
        metric: "protobuf_creates_per_sec",
        unit: "/s",
        http: protobuf_creates,
        floor: Some(floor_creates),
        higher_is_better: true,
    });

    // The same JSON creates with RBAC on, by a ServiceAccount-like user
    // whose RoleBinding allows them. RBAC serves HTTPS, so the floor is the
    // same creates over HTTPS with RBAC off: the ratio is RBAC's own cost.
    let tls_server = ApiServer::builder().tls().start().await?;
    namespace(&tls_server, "bench-tls").await?;
    let apis = (0..CLIENTS)
        .map(|_| Api::<ConfigMap>::namespaced(tls_server.client(), "bench-tls"))
        .collect();
    let tls_creates = jobs_per_second(WRITES, apis, |api, i| async move {
        let cm: ConfigMap = serde_json::from_value(small_cm(&format!("cm-{i}")))?;
        api.create(&PostParams::default(), &cm).await?;
        Ok(api)
    })
    .await?;
    tls_server.shutdown().await;
    let rbac_server = ApiServer::builder().rbac().start().await?;
    namespace(&rbac_server, "bench-rbac").await?;
    rbac_server.add_token(
        "bench-token",
        stratus_testing::ReviewUser {
            username: "system:serviceaccount:bench-rbac:writer".into(),
            uid: "bench".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ],
        },
    );
    rbac_server.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "writer", "namespace": "bench-rbac"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch"]}]
    }))?;
    rbac_server.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "writer", "namespace": "bench-rbac"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
        "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "bench-rbac"}]
    }))?;
    let mut apis = Vec::new();
    for _ in 0..CLIENTS {
        apis.push(Api::<ConfigMap>::namespaced(
            rbac_server.client_with_token("bench-token")?,
            "bench-rbac",
        ));
    }
    let rbac_creates = jobs_per_second(WRITES, apis, |api, i| async move {
        let cm: ConfigMap = serde_json::from_value(small_cm(&format!("cm-{i}")))?;
        api.create(&PostParams::default(), &cm).await?;
        Ok(api)
    })
    .await?;
    rows.push(Row {
        metric: "rbac_creates_per_sec",
        unit: "/s",
        http: rbac_creates,
        floor: Some(tls_creates),
        higher_is_better: true,
    });
    rbac_server.shutdown().await;

    // Merge patches from concurrent kube clients.
    let apis = (0..CLIENTS)
        .map(|_| Api::<ConfigMap>::namespaced(server.client(), "bench-http"))
        .collect();
    let http_patches = jobs_per_second(WRITES, apis, |api, i| async move {
        api.patch(
            &format!("cm-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await?;
        Ok(api)
    })
    .await?;
    let started = Instant::now();
    let body = serde_json::to_vec(&json!({"data": {"k": "w"}}))?;
    for i in 0..WRITES {
        direct::merge_patch(
            &server,
            "configmaps",
            "bench-direct",
            &format!("cm-{i}"),
            &body,
        )?;
    }
    let floor_patches = WRITES as f64 / started.elapsed().as_secs_f64();
    rows.push(Row {
        metric: "patches_per_sec",
        unit: "/s",
        http: http_patches,
        floor: Some(floor_patches),
        higher_is_better: true,
    });

    // Watch events delivered to 10 watchers.
    let from = server.revision();
    let received = Arc::new(AtomicUsize::new(0));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let client = server.client();
        let received = received.clone();
        let path =
            format!("/api/v1/namespaces/bench-watch/configmaps?watch=true&resourceVersion={from}");
        watchers.push(tokio::spawn(async move {
            let req = http::Request::get(path).body(Vec::new())?;
            let mut stream = client.request_stream(req).await?;
            let mut seen = 0;
            use futures_util::AsyncBufReadExt;
            let mut line = Vec::new();
            while seen < WATCH_EVENTS {
                line.clear();
                let n = stream.read_until(b'\n', &mut line).await?;
                if n == 0 {
                    break;
                }
                if line.ends_with(b"\n") {
                    seen += 1;
                }
            }
            received.fetch_add(seen, Ordering::Relaxed);
            Ok::<_, BoxError>(())
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    for i in 0..WATCH_EVENTS {
        direct::create(
            &server,
            "configmaps",
            "bench-watch",
            &serde_json::to_vec(&small_cm(&format!("w-{i}")))?,
        )?;
    }
    for w in watchers {
        w.await??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let delivered = received.load(Ordering::Relaxed);
    if delivered != WATCHERS * WATCH_EVENTS {
        return Err(format!(
            "watchers received {delivered} of {} events",
            WATCHERS * WATCH_EVENTS
        )
        .into());
    }
    let http_watch = delivered as f64 / elapsed;
    let started = Instant::now();
    let mut read = 0;
    for _ in 0..WATCHERS {
        read += direct::read_events(&server, from);
    }
    let floor_watch = read as f64 / started.elapsed().as_secs_f64();
    rows.push(Row {
        metric: "watch_events_per_sec_10_watchers",
        unit: "/s",
        http: http_watch,
        floor: Some(floor_watch),
        higher_is_better: true,
    });

    // A list of 10,000 pods.
    let rss_before = rss_bytes();
    for i in 0..PODS {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("pod-{i}"), "labels": {"app": "bench"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "registry.example/app:1.0", "ports": [{"containerPort": 8080}]}]}});
        direct::create(&server, "pods", "bench-list", &serde_json::to_vec(&pod)?)?;
    }
    let rss_after = rss_bytes();
    let client = server.client();
    let mut http_ms = Vec::new();
    let mut floor_ms = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let req = http::Request::get("/api/v1/namespaces/bench-list/pods").body(Vec::new())?;
        let text = client.request_text(req).await?;
        std::hint::black_box(text.len());
        http_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let started = Instant::now();
        std::hint::black_box(direct::list(&server, "pods", "bench-list")?);
        floor_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    http_ms.sort_by(f64::total_cmp);
    floor_ms.sort_by(f64::total_cmp);
    rows.push(Row {
        metric: "list_10000_pods_ms",
        unit: "ms",
        http: http_ms[2],
        floor: Some(floor_ms[2]),
        higher_is_better: false,
    });

    let (count, bytes) = direct::stored_bytes(&server, "pods", "bench-list")?;
    rows.push(Row {
        metric: "stored_json_bytes_per_pod",
        unit: "B",
        http: bytes as f64 / count as f64,
        floor: None,
        higher_is_better: false,
    });
    rows.push(Row {
        metric: "rss_bytes_per_stored_pod",
        unit: "B",
        http: rss_after.saturating_sub(rss_before) as f64 / PODS as f64,
        floor: None,
        higher_is_better: false,
    });

    // A server per test, as a kube-rs test file uses it: start and the
    // first request, against the first request of a new client to a server
    // already running; then 50 such tests at once.
    let (start_ms, first_request_ms) = server_per_test().await?;
    rows.push(Row {
        metric: "server_start_and_first_request_ms",
        unit: "ms",
        http: start_ms,
        floor: Some(first_request_ms),
        higher_is_better: false,
    });
    let (parallel_ms, shared_ms) = fifty_tests_in_parallel().await?;
    rows.push(Row {
        metric: "fifty_tests_each_own_server_ms",
        unit: "ms",
        http: parallel_ms,
        floor: Some(shared_ms),
        higher_is_better: false,
    });

    // Report.
    let mut json_out = BTreeMap::new();
    println!(
        "{:<34} {:>14} {:>14} {:>8}",
        "metric", "http", "floor", "ratio"
    );
    for r in &rows {
        json_out.insert(r.metric.to_owned(), r.http);
        match r.floor {
            Some(floor) => {
                // Time per operation measured over the floor's: above 1 is
                // slower than the floor.
                let ratio = if r.higher_is_better {
                    floor / r.http
                } else {
                    r.http / floor
                };
                json_out.insert(format!("{}_floor", r.metric), floor);
                json_out.insert(format!("{}_ratio_measured_over_floor", r.metric), ratio);
                println!(
                    "{:<34} {:>12.1}{:<2} {:>12.1}{:<2} {:>8.3}",
                    r.metric, r.http, r.unit, floor, r.unit, ratio
                );
            }
            None => println!(
                "{:<34} {:>12.1}{:<2} {:>14} {:>8}",
                r.metric, r.http, r.unit, "-", "-"
            ),
        }
    }
    std::fs::create_dir_all("target/bench")?;
    std::fs::write(
        "target/bench/apiserver.json",
        serde_json::to_vec_pretty(&json_out)?,
    )?;
    println!(
        "\nwrote target/bench/apiserver.json (ratio = time per operation measured over the floor's; above 1 is slower)"
    );
    crate::measure::draw_ratios("apiserver", &json_out)?;
    server.shutdown().await;
    Ok(())
}
