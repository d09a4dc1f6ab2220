//! The virtual node's taint from Go's environment variables
//! (`VKUBELET_TAINT_KEY`, `VKUBELET_TAINT_VALUE`, `VKUBELET_TAINT_EFFECT`),
//! which win over the deprecated `--taint`, as Go's `getTaint` reads them.
//! The test runs itself again in a child process with the variables set
//! (setting them in this process would need `unsafe`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use stratus_kubelet::app::{CommandError, ProviderInit, register_pod_provider, run_with_args};
use stratus_testing::{ApiServer, MockPodProvider};
use tokio::sync::watch;

const TEST: &str = "the_taint_comes_from_the_environment_as_in_go";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_taint_comes_from_the_environment_as_in_go() {
    if std::env::var_os("VKUBELET_TAINT_KEY").is_none() {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([TEST, "--exact"])
            .env("VKUBELET_TAINT_KEY", "example.com/burst")
            .env("VKUBELET_TAINT_VALUE", "gpu")
            .env("VKUBELET_TAINT_EFFECT", "NoExecute")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&child.stdout);
        assert!(
            child.status.success() && out.contains("1 passed"),
            "the test with Go's taint variables: {out}{}",
            String::from_utf8_lossy(&child.stderr)
        );
        return;
    }
    let api = ApiServer::start().await.unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("vk-taint-{}.kubeconfig", std::process::id()));
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    register_pod_provider("taint-test", |init: ProviderInit| {
        Ok(Arc::new(MockPodProvider::new().with_node_name(&init.node_name)) as _)
    })
    .unwrap();
    let args = |node: &str| {
        vec![
            "virtual-kubelet".to_string(),
            "--provider=taint-test".into(),
            format!("--nodename={node}"),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--listen-address=127.0.0.1".into(),
            "--kubelet-port=0".into(),
            "--metrics-addr=".into(),
            "--taint=from-the-deprecated-flag".into(),
        ]
    };

    // An effect Go does not know is refused before anything starts.
    let (_keep, never) = watch::channel(false);
    let err = run_with_args(
        [
            "virtual-kubelet",
            "--provider=taint-test",
            "--taint-effect=Sometimes",
        ],
        never,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CommandError::Args(_)), "{err}");

    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(run_with_args(args("vk-taint"), stopped));
    let nodes: kube::Api<Node> = kube::Api::all(api.client());
    stratus_testing::eventually("vk-taint registered", Duration::from_secs(20), || async {
        nodes.get_opt("vk-taint").await.unwrap().is_some()
    })
    .await;
    let taints = nodes
        .get("vk-taint")
        .await
        .unwrap()
        .spec
        .unwrap()
        .taints
        .unwrap();
    assert_eq!(taints.len(), 1, "{taints:?}");
    assert_eq!(
        (
            taints[0].key.as_str(),
            taints[0].value.as_deref(),
            taints[0].effect.as_str()
        ),
        ("example.com/burst", Some("gpu"), "NoExecute")
    );
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(15), task)
        .await
        .expect("the command stops")
        .unwrap()
        .unwrap();
    std::fs::remove_file(&kubeconfig).ok();
}
