//! The template of a vendor's virtual kubelet (Go: `cmd/virtual-kubelet`
//! with a provider registered): register the provider under its name, then
//! hand over to the command, which parses Go virtual-kubelet's flags
//! (`--nodename`, `--provider`, `--provider-config`, `--kubeconfig`,
//! `KUBELET_PORT`, `VKUBELET_POD_IP`, `APISERVER_CERT_LOCATION`, ...), serves
//! the kubelet API (logs, exec, attach, port-forward, stats) with Kubernetes
//! authentication and runs the node until SIGTERM.
//!
//! This sample registers `MockPodProvider`, the harness's in-memory provider
//! (pods start Running with fake IPs); a vendor registers its own
//! `PodLifecycleHandler` instead:
//!
//! ```text
//! sample-virtual-kubelet --provider mock --kubeconfig target/stratus-demo.kubeconfig --nodename vk-mock \
//!     --client-ca-file ca.crt --tls-cert-file tls.crt --tls-private-key-file tls.key
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use stratus::kubelet::app::{ProviderInit, register_pod_provider};
use stratus::testing::MockPodProvider;

fn main() -> ExitCode {
    let registered = register_pod_provider("mock", |init: ProviderInit| {
        // A real provider reads `init.config_file` and builds its client.
        Ok(Arc::new(MockPodProvider::new().with_node_name(&init.node_name)) as _)
    });
    if let Err(e) = registered {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    stratus::kubelet::app::run_main()
}
