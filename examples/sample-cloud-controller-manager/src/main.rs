//! The template of a vendor's cloud controller manager (Go's
//! `sample/basic_main.go`): register the provider under its name, then hand
//! over to the manager command, which parses Go's flags
//! (`--cloud-provider`, `--kubeconfig`, `--controllers`, ...), elects a
//! leader and runs the controllers.
//!
//! This sample registers `FakeCloud`, the harness's in-memory cloud; a
//! vendor registers its own `CloudProvider` instead:
//!
//! ```text
//! sample-cloud-controller-manager --cloud-provider=fake --kubeconfig=target/stratus-demo.kubeconfig --cluster-cidr=10.244.0.0/16
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use stratus::ccm::app::register_cloud_provider;
use stratus::cloud::CloudProvider;
use stratus::testing::{FakeCloud, FakeInstance};

fn main() -> ExitCode {
    let registered = register_cloud_provider("fake", |_config| {
        // A real provider reads its configuration (the `--cloud-config`
        // file's bytes) here and builds its API client.
        let cloud = FakeCloud::new();
        for i in 0..3 {
            cloud.add_instance(FakeInstance::new(format!("node-{i}")));
        }
        Ok(Arc::new(cloud) as Arc<dyn CloudProvider>)
    });
    if let Err(e) = registered {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    stratus::ccm::app::run_main()
}
