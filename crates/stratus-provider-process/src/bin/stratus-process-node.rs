//! A virtual node whose pods run as local processes: Go virtual-kubelet's
//! flags (`--nodename`, `--kubeconfig`, `--provider-config FILE`,
//! `KUBELET_PORT`, ...) with the `process` provider registered and chosen.
//!
//! ```text
//! stratus-process-node --nodename vk-process --kubeconfig ~/.kube/config \
//!     --provider-config process.yaml --kubelet-port 10250
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use stratus_kubelet::app::{ProviderInit, Providers, register_provider};
use stratus_provider_process::{
    HostNode, PROVIDER_NAME, ProcessConfig, ProcessProvider, reap_leftovers,
};

fn main() -> ExitCode {
    let registered = register_provider(PROVIDER_NAME, |init: ProviderInit| async move {
        let default_root = std::env::temp_dir().join(format!("stratus-process-{}", init.node_name));
        let config = match &init.config_file {
            Some(path) => ProcessConfig::from_file(path, default_root),
            None => ProcessConfig::from_yaml("", default_root),
        }
        .map_err(|e| e.to_string())?;
        // What an earlier run of this node left running (it was killed
        // without deleting its pods) goes first.
        let reaped = reap_leftovers(&config);
        if reaped > 0 {
            eprintln!("killed {reaped} process groups left by an earlier run");
        }
        // The node reports the host's capacity (minus the reserve).
        let node = HostNode::new(&config);
        let provider = ProcessProvider::new(config)
            .with_resources(init.resources.clone())
            .with_node_name(&init.node_name);
        Ok(Providers::pods(Arc::new(provider)).with_node(Arc::new(node)))
    });
    if let Err(e) = registered {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    stratus_kubelet::app::Command::new()
        .default_provider(PROVIDER_NAME)
        .run_main()
}
