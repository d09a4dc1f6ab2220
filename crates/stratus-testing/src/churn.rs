//! Pod churn as controllers make it: pods force-deleted and created again
//! under the same name at once (a Job controller or an operator replacing
//! pods), many names in parallel. A virtual kubelet must end with every
//! pod running as its newest incarnation (UID), nothing left of the old
//! ones.
//!
//! ```no_run
//! # async fn run(client: kube::Client) {
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::Api;
//! use stratus_testing::churn::force_delete_and_recreate;
//!
//! let pods: Api<Pod> = Api::namespaced(client, "default");
//! let make = |name: &str| -> Pod {
//!     serde_json::from_value(serde_json::json!({
//!         "metadata": {"name": name},
//!         "spec": {"nodeName": "vk-0", "containers": [{"name": "app", "image": "nginx"}]},
//!     }))
//!     .unwrap()
//! };
//! // 20 names, 25 force-delete + re-create cycles each.
//! let recreated = force_delete_and_recreate(&pods, make, 20, 25).await;
//! assert!(recreated >= 500);
//! # }
//! ```

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

/// Create pods `r-0` … `r-{names-1}` made by `make`, then on each name in
/// parallel `cycles` times: wait 0–39 ms (sometimes before the provider
/// ran the pod, sometimes after), force-delete it (grace period 0) and
/// create it again at once. Returns how many re-creations the API
/// accepted; a refused one (the name still taken) is not retried.
pub async fn force_delete_and_recreate(
    pods: &Api<Pod>,
    make: impl Fn(&str) -> Pod,
    names: usize,
    cycles: usize,
) -> usize {
    let make = &make;
    let runs = (0..names).map(|i| async move {
        let name = format!("r-{i}");
        // A fixed xorshift per name: the same waits in every run.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ (i as u64 + 1);
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut recreated = 0;
        let _ = pods.create(&PostParams::default(), &make(&name)).await;
        let force = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        for _ in 0..cycles {
            tokio::time::sleep(Duration::from_millis(next() % 40)).await;
            let _ = pods.delete(&name, &force).await;
            if pods
                .create(&PostParams::default(), &make(&name))
                .await
                .is_ok()
            {
                recreated += 1;
            }
        }
        recreated
    });
    futures_util::future::join_all(runs).await.into_iter().sum()
}
