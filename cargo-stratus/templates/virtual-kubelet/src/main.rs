//! The {{name}} virtual kubelet: registers the provider, then the Stratus
//! command parses Go virtual-kubelet's flags (`--provider={{name}}`,
//! `--provider-config`, `--nodename`, `--kubeconfig`, `KUBELET_PORT`,
//! `VKUBELET_POD_IP`, ...), registers the Node, serves the kubelet API and
//! runs the pods until SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;

use stratus::kubelet::app::register_pod_provider;
use {{crate_ident}}::{{Type}}Provider;

fn main() -> ExitCode {
    let registered = register_pod_provider({{Type}}Provider::NAME, |init| {
        let provider = {{Type}}Provider::new(&init).map_err(|e| e.to_string())?;
        Ok(Arc::new(provider) as _)
    });
    if let Err(e) = registered {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    // `--version` prints this crate's version, and the Node reports it.
    stratus::kubelet::app::Command::new()
        .with_version(env!("CARGO_PKG_VERSION"))
        .run_main()
}
