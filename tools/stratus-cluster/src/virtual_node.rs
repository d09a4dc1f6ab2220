//! A virtual node in this process beside the cluster (the mock provider),
//! until a signal.

use std::path::Path;

use crate::BoxError;

use super::state::State;

/// The virtual-kubelet command (`stratus_kubelet::app`, as a vendor's
/// binary runs it) over a MockPodProvider, registered as `node` (several
/// comma-separated names: that many nodes, one provider each) with the API
/// server of `kubeconfig`, each kubelet API on a free port of `address`,
/// no taint (pods select it without a toleration, as on the harness) and
/// no `--client-ca-file` (it trusts the client CA the API server publishes
/// in `kube-system/extension-apiserver-authentication`), until SIGINT or
/// SIGTERM or its own end.
pub async fn mock_virtual_kubelet(
    kubeconfig: &Path,
    node: &str,
    address: &str,
) -> Result<(), BoxError> {
    let command = stratus_kubelet::app::Command::new().provider("mock", |init, _| {
        let provider = stratus_testing::MockPodProvider::new().with_node_name(&init.node_name);
        async move {
            Ok(stratus_kubelet::app::Providers::pods(std::sync::Arc::new(
                provider,
            )))
        }
    });
    let args = vec![
        "virtual-kubelet".to_owned(),
        "--provider=mock".into(),
        format!("--nodename={node}"),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--node-ip={address}"),
        format!("--listen-address={address}"),
        "--kubelet-port=0".into(),
        "--disable-taint".into(),
        "--metrics-addr=".into(),
    ];
    run_until_signal(command, args).await
}

/// Run the virtual-kubelet `command` with `args` (the first is the
/// program's name) until it ends or SIGINT or SIGTERM stops it.
pub async fn run_until_signal(
    command: stratus_kubelet::app::Command,
    args: Vec<String>,
) -> Result<(), BoxError> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut running = tokio::spawn(command.run_with_args(args, stopped));
    tokio::select! {
        () = stratus_runtime::terminated() => {
            let _ = stop.send(true);
            let _ = running.await;
            Ok(())
        }
        ended = &mut running => Ok(ended??),
    }
}

/// `cluster virtual-node NAME`: [`mock_virtual_kubelet`] on the running
/// control plane with the administrator's kubeconfig, its kubelet API on
/// the node address, so that `kubectl logs`, `exec` and `port-forward`
/// through kube-apiserver prove the published client CA; its Node is
/// deleted when it ends.
pub(crate) async fn serve_virtual_node(name: &str) -> Result<(), crate::BoxError> {
    let state = State::load().ok_or("no control plane is up: run cargo xtask cluster up")?;
    let address = state
        .node_address
        .clone()
        .ok_or("the control plane was started without a node address")?;
    println!(
        "virtual node {name} (the virtual-kubelet command, MockPodProvider) serving until interrupted"
    );
    let result = mock_virtual_kubelet(&state.kubeconfig, name, &address).await;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(state.client().await?);
    let _ = nodes.delete(name, &Default::default()).await;
    result
}
