//! MockPodProvider on its own: scripted exits, and a bad script refused
//! before anything runs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use stratus_pod::PodLifecycleHandler;
use stratus_testing::MockPodProvider;

fn pod(name: &str, exit_code: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "annotations": {
            "mock.stratus.dev/exit-code": exit_code, "mock.stratus.dev/run-for": "50ms"
        }},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn scripted_exits_and_bad_scripts() {
    let provider = MockPodProvider::new();
    let err = provider.create_pod(&pod("bad", "seven")).await.unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(provider.pods().is_empty(), "a refused pod is not stored");

    provider.create_pod(&pod("job", "2")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = provider
        .get_pod_status("default", "job")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let state = status.container_statuses.unwrap()[0].state.clone().unwrap();
    assert_eq!(state.terminated.unwrap().exit_code, 2);
}
