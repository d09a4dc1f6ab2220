//! The {{name}} cloud controller manager: registers the provider, then the
//! Stratus manager command parses the flags of Go's cloud controller
//! managers (`--cloud-provider={{name}}`, `--cloud-config`, `--kubeconfig`,
//! `--controllers`, leader election, ...) and runs the controllers.

use std::process::ExitCode;
use std::sync::Arc;

use stratus::ccm::app::register_cloud_provider;
use stratus::cloud::CloudProvider;
use {{crate_ident}}::{{Type}}Cloud;

fn main() -> ExitCode {
    let registered = register_cloud_provider({{Type}}Cloud::NAME, |config| {
        Ok(Arc::new({{Type}}Cloud::from_cloud_config(config)?) as Arc<dyn CloudProvider>)
    });
    if let Err(e) = registered {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    // `--version` prints this crate's version.
    stratus::ccm::app::Command::new()
        .with_version(env!("CARGO_PKG_VERSION"))
        .run_main()
}
