//! `stratus-process-node` end to end: Go virtual-kubelet's flags, the
//! operator's configuration file, a real pod, SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use stratus_testing::ApiServer;

const BINARY: &str = env!("CARGO_BIN_EXE_stratus-process-node");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_a_pod_from_its_configuration_file_and_stops_on_sigterm() {
    let api = ApiServer::start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("stratus-process-node-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let config = dir.join("process.yaml");
    std::fs::write(
        &config,
        format!(
            "rootDir: {}\nimages:\n  busybox: [sh, -c]\nmaxPods: 5\ncapacity: {{cpu: \"3\"}}\n\
             nodeLabels: {{zone: lab-1}}\nnodeTaints: [{{key: dedicated, value: batch, effect: NoSchedule}}]\n",
            dir.join("pods").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(BINARY)
        .args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--nodename=vk-process-bin",
            &format!("--provider-config={}", config.display()),
            "--listen-address=127.0.0.1",
            "--kubelet-port=0",
            "--authorization-mode=AlwaysAllow",
            "--metrics-addr=127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let nodes: Api<Node> = Api::all(api.client());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while nodes.get_opt("vk-process-bin").await.unwrap().is_none() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("the binary exited with {status}: {stderr}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the node did not register"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    assert_eq!(
        node.metadata.annotations.clone().unwrap()[stratus_provider_process::LIMITS_ANNOTATION],
        "memory=rlimit-data,cpu=none"
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
    std::fs::write(&config, "maxPod: 5\n").unwrap();
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
    let _ = std::fs::remove_dir_all(&dir);
}
