//! `stratus-process-node` end to end: Go virtual-kubelet's flags, the
//! operator's configuration file, a real pod, SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use stratus_testing::{ApiServer, Check, eventually};

const BINARY: &str = env!("CARGO_BIN_EXE_stratus-process-node");

/// A harness API server, and a directory with its kubeconfig and a
/// process-node configuration whose pods live in `pods/`.
struct Setup {
    api: ApiServer,
    dir: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
    config: std::path::PathBuf,
}

impl Setup {
    /// `config` is the configuration file after its `rootDir` line.
    async fn new(test: &str, config: &str) -> Self {
        let api = ApiServer::start().await.unwrap();
        let dir = std::env::temp_dir().join(format!("stratus-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        api.write_kubeconfig(&kubeconfig).unwrap();
        // The harness calls the kubelet API with a client certificate of
        // this CA (as kube-apiserver does with its kubelet client).
        std::fs::write(dir.join("client-ca.pem"), api.kubelet_client_ca_pem()).unwrap();
        let file = dir.join("process.yaml");
        let text = format!("rootDir: {}\n{config}", dir.join("pods").display());
        std::fs::write(&file, text).unwrap();
        Self {
            api,
            dir,
            kubeconfig,
            config: file,
        }
    }

    /// The binary as node `node`, its kubelet API and metrics on free
    /// loopback ports.
    fn start(&self, node: &str) -> std::process::Child {
        Command::new(BINARY)
            .args([
                &format!("--kubeconfig={}", self.kubeconfig.display()),
                &format!("--nodename={node}"),
                &format!("--provider-config={}", self.config.display()),
                "--listen-address=127.0.0.1",
                "--kubelet-port=0",
                "--authorization-mode=AlwaysAllow",
                &format!(
                    "--client-ca-file={}",
                    self.dir.join("client-ca.pem").display()
                ),
                "--metrics-addr=127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_a_pod_from_its_configuration_file_and_stops_on_sigterm() {
    let setup = Setup::new(
        "process-node",
        "images:\n  busybox: [sh, -c]\nmaxPods: 5\ncapacity: {cpu: \"3\"}\n\
         nodeLabels: {zone: lab-1}\nnodeTaints: [{key: dedicated, value: batch, effect: NoSchedule}]\n",
    )
    .await;
    let Setup {
        api,
        dir,
        kubeconfig,
        config,
    } = &setup;
    let mut child = setup.start("vk-process-bin");
    let nodes: Api<Node> = Api::all(api.client());
    eventually("the node to register", Duration::from_secs(20), || {
        let exited = child.try_wait().unwrap().map(|status| {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            format!("the binary exited with {status}: {stderr}")
        });
        let nodes = nodes.clone();
        async move {
            match exited {
                Some(why) => Check::Failed(why),
                None => nodes
                    .get_opt("vk-process-bin")
                    .await
                    .unwrap()
                    .is_some()
                    .into(),
            }
        }
    })
    .await;
    let node = nodes.get("vk-process-bin").await.unwrap();
    // The host's capacity, the configured pod limit, and what it enforces.
    let capacity = node.status.clone().unwrap().capacity.unwrap();
    assert_eq!(capacity["pods"].0, "5");
    assert_eq!(capacity["cpu"].0, "3");
    assert!(capacity.contains_key("memory"));
    assert_eq!(node.metadata.labels.clone().unwrap()["zone"], "lab-1");
    let taints = node.spec.clone().unwrap().taints.unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "dedicated" && t.value.as_deref() == Some("batch")),
        "{taints:?}"
    );
    let limits = node.metadata.annotations.clone().unwrap()
        [stratus_provider_process::LIMITS_ANNOTATION]
        .clone();
    assert!(
        [
            "memory=rlimit-data,cpu=cgroup-v1",
            "memory=rlimit-data,cpu=cgroup-v2",
            "memory=rlimit-data,cpu=none"
        ]
        .contains(&limits.as_str()),
        "{limits}"
    );
    let taint = &node.spec.unwrap().taints.unwrap()[0];
    assert_eq!(
        (taint.key.as_str(), taint.value.as_deref()),
        ("virtual-kubelet.io/provider", Some("process"))
    );
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hello"},
        "spec": {"nodeName": "vk-process-bin", "restartPolicy": "Never",
                 "containers": [{"name": "app", "image": "busybox", "args": ["echo hello from $HOSTNAME"]}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    stratus_testing::eventually("hello Succeeded", Duration::from_secs(20), || async {
        pods.get("hello")
            .await
            .unwrap()
            .status
            .and_then(|s| s.phase)
            .as_deref()
            == Some("Succeeded")
    })
    .await;
    assert_eq!(
        pods.logs("hello", &Default::default()).await.unwrap(),
        "hello from hello\n"
    );
    // Status updates since registration kept the host's capacity.
    let status = nodes.get("vk-process-bin").await.unwrap().status.unwrap();
    assert_eq!(status.capacity.unwrap()["pods"].0, "5");
    assert_eq!(status.allocatable.unwrap()["pods"].0, "5");
    let (status, stderr) =
        stratus_testing::process::terminate(&mut child, Duration::from_secs(10)).await;
    assert!(status.success(), "{status}: {stderr}");

    // A configuration file with a typo stops the binary with the reason.
    std::fs::write(config, "maxPod: 5\n").unwrap();
    let out = Command::new(BINARY)
        .args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            &format!("--provider-config={}", config.display()),
            "--kubelet-port=0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid process provider configuration"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Whether process `pid` still runs (a zombie waiting for its reaper does
/// not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1.to_owned();
            after.split_whitespace().next().map(str::to_owned)
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_kills_what_its_killed_predecessor_left_running() {
    let setup = Setup::new("process-crash", "images: {busybox: [sh, -c]}\n").await;
    let (api, dir, root) = (&setup.api, &setup.dir, setup.dir.join("pods"));
    let start = || setup.start("vk-crash");
    let mut first = start();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    // An exec probe that is still running when the node dies: a command
    // started in the container, recorded too.
    let probe_pid_file = dir.join("probe.pid");
    let probe = format!("echo $$ > {}; exec sleep 600", probe_pid_file.display());
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sleeper"},
        "spec": {"nodeName": "vk-crash", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "app", "image": "busybox", "args": ["sleep 600"],
                                 "readinessProbe": {"exec": {"command": ["sh", "-c", probe]},
                                                    "timeoutSeconds": 600, "periodSeconds": 600}}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // The container's process group, as the node recorded it.
    let recorded = || -> Option<i32> {
        let pod_dir = std::fs::read_dir(&root).ok()?.flatten().next()?.path();
        let text = std::fs::read_to_string(pod_dir.join("run").join("app")).ok()?;
        text.split_whitespace().next()?.parse().ok()
    };
    let mut group = None;
    stratus_testing::eventually("the container recorded", Duration::from_secs(20), || {
        group = recorded();
        let found = group.is_some();
        async move { found }
    })
    .await;
    let group = group.unwrap();
    assert!(alive(group));
    let mut probe_pid = None;
    stratus_testing::eventually("the probe running", Duration::from_secs(20), || {
        probe_pid = std::fs::read_to_string(&probe_pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .filter(|pid| alive(*pid));
        let found = probe_pid.is_some();
        async move { found }
    })
    .await;
    let probe_pid = probe_pid.unwrap();
    // The probe writes its pid file as soon as it runs, the node records
    // it a moment later: the node dies only once both groups are on record.
    let probe_recorded = || {
        std::fs::read_dir(&root)
            .ok()
            .and_then(|mut pods| pods.next())
            .and_then(Result::ok)
            .is_some_and(|pod| {
                let record = pod.path().join("run").join(format!(".exec-{probe_pid}"));
                std::fs::read_to_string(record).is_ok_and(|text| text.ends_with('\n'))
            })
    };
    stratus_testing::eventually("the probe recorded", Duration::from_secs(20), || {
        let found = probe_recorded();
        async move { found }
    })
    .await;

    // The node dies without a chance to stop its pods: they outlive it.
    first.kill().unwrap();
    first.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(alive(group), "the container died with the node");
    assert!(alive(probe_pid), "the probe died with the node");

    // Its successor kills them first, then runs the pod again.
    let mut second = start();
    stratus_testing::eventually("the leftovers killed", Duration::from_secs(20), || {
        let gone = !alive(group) && !alive(probe_pid);
        async move { gone }
    })
    .await;
    stratus_testing::eventually("the pod running again", Duration::from_secs(20), || {
        let again = recorded().is_some_and(|g| g != group && alive(g));
        async move { again }
    })
    .await;
    let (status, stderr) =
        stratus_testing::process::terminate(&mut second, Duration::from_secs(10)).await;
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("killed 2 process groups left by an earlier run"),
        "{stderr}"
    );
    // The pod stays (a stopped node leaves its pods to its successor);
    // this test has none, so it ends the group itself.
    if let Some(g) = recorded() {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{g}")])
            .status();
    }
    let _ = std::fs::remove_dir_all(dir);
}
