//! A virtual node whose pods run in another Kubernetes cluster: Go
//! virtual-kubelet's flags (`--nodename`, `--kubeconfig` for the home
//! cluster, `--provider-config FILE` naming the remote one, `KUBELET_PORT`,
//! ...) with the `kubernetes` provider registered and chosen.
//!
//! ```text
//! stratus-offload-node --nodename vk-burst --kubeconfig ~/.kube/config \
//!     --provider-config offload.yaml
//! ```

use std::process::ExitCode;

use stratus_kubelet::app::register_provider;
use stratus_provider_kubernetes::{PROVIDER_NAME, providers_from_init};

fn main() -> ExitCode {
    if let Err(e) = register_provider(PROVIDER_NAME, providers_from_init) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    stratus_kubelet::app::Command::new()
        .default_provider(PROVIDER_NAME)
        .run_main()
}
