//! The provider as the virtual-kubelet command builds it
//! (`--provider kubernetes --provider-config FILE`).

use std::sync::Arc;

use stratus_kubelet::app::{ProviderInit, Providers};

use crate::{KubernetesProvider, OffloadConfig, RemoteNode, remote_client};

/// Build the pod and node providers from the command's `init`: the
/// configuration file (default: the defaults, which name no remote
/// cluster and so fail), the remote client, the first remote listing's
/// watch and the remote capacity.
///
/// ```no_run
/// use stratus_kubelet::app::register_provider;
/// use stratus_provider_kubernetes::{PROVIDER_NAME, providers_from_init};
///
/// fn main() -> std::process::ExitCode {
///     register_provider(PROVIDER_NAME, providers_from_init).expect("registered once");
///     stratus_kubelet::app::Command::new().default_provider(PROVIDER_NAME).run_main()
/// }
/// ```
pub async fn providers_from_init(init: ProviderInit) -> Result<Providers, String> {
    let config = match &init.config_file {
        Some(path) => OffloadConfig::from_file(path),
        None => OffloadConfig::from_yaml(""),
    }
    .map_err(|e| e.to_string())?;
    let remote = remote_client(&config, &init.client)
        .await
        .map_err(|e| e.to_string())?;
    let node = RemoteNode::connect(remote.clone(), &init.node_name, &config)
        .await
        .map_err(|e| format!("the remote cluster: {e}"))?;
    let provider = KubernetesProvider::builder(remote, &init.node_name)
        .config(config)
        .host_ip(&init.internal_ip)
        .resources(init.resources.clone())
        .start();
    Ok(Providers::pods(Arc::new(provider)).with_node(Arc::new(node)))
}
