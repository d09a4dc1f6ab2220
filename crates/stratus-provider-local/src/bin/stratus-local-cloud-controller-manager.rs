//! `stratus-local-cloud-controller-manager`: the cloud controller manager of
//! the local cloud, a vendor's `main.rs` in full: register the provider,
//! hand over to the manager command.
//!
//! ```text
//! stratus-local-cloud-controller-manager --cloud-provider=local \
//!     --cloud-config=local-cloud.yaml --kubeconfig=KUBECONFIG
//! ```
//!
//! `local-cloud.yaml` says where the cloud's API is (`endpoint:
//! http://127.0.0.1:7080`); without `--cloud-config` that address is used.

use std::process::ExitCode;

use stratus_ccm::app::register_cloud_provider;
use stratus_provider_local::{LocalProvider, PROVIDER_NAME};

fn main() -> ExitCode {
    let registered = register_cloud_provider(PROVIDER_NAME, |config| {
        LocalProvider::from_config(config).map(LocalProvider::into_dyn)
    });
    if let Err(e) = registered {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    stratus_ccm::app::run_main()
}
