//! The Stratus pod-provider conformance suite against this provider: Go
//! virtual-kubelet's e2e cases (the node registers and is Ready, a pod
//! runs and is listed, labels reach the provider, graceful and forced
//! deletion, missing optional and mandatory Secrets and ConfigMaps, the
//! kubelet API's `/pods`, stats and metrics when offered) on an in-memory
//! API server. Cases that end on a method answering `NotImplemented` are
//! listed as `left`, not failed; once the provider is finished, replace
//! `assert_passed` with `assert_complete`.

use std::sync::Arc;

use stratus::testing::pod_conformance::run_pod_conformance;
use {{crate_ident}}::{Config, {{Type}}Provider};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_passes_the_virtual_kubelet_cases() {
    let report = run_pod_conformance(|| {
        Arc::new({{Type}}Provider::with_config("vk-conformance", Config::default())) as _
    })
    .await;
    println!("{report}");
    println!(
        "{} checks wait on methods left to implement (`cargo test -- --nocapture` shows them)",
        report.not_implemented().len()
    );
    report.assert_passed();
}
