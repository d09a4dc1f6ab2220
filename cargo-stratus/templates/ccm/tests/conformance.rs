//! The Stratus cloud-provider conformance suite against this provider.
//!
//! Checks the contracts the controllers rely on (an existing instance
//! exists and has metadata with a provider ID of this provider's scheme,
//! a missing one is `false`/`Gone` rather than an error, load balancers are
//! idempotent and deleted, routes are listed once created, ...). Methods
//! still answering `NotImplemented` are listed as `left`, not failed; once
//! the provider is finished, replace `assert_passed` with `assert_complete`.
//!
//! Point the fixtures at a sandbox account: `existing` must name a running
//! instance, `missing` one that does not exist. Give the existing Node the
//! provider ID your kubelets register with (`.with_provider_id(...)`): the
//! suite then checks that `instance_metadata` gives back exactly that ID.

use stratus::testing::conformance::{CloudFixtures, run_cloud_conformance};
use {{crate_ident}}::{{Type}}Cloud;

#[tokio::test]
async fn the_provider_keeps_the_cloud_provider_contracts() {
    let cloud = {{Type}}Cloud::from_cloud_config(None).expect("the default configuration");
    let fixtures = CloudFixtures::new("conformance-node", "conformance-missing-node");
    let report = run_cloud_conformance(&cloud, &fixtures).await;
    println!("{report}");
    println!(
        "{} checks wait on methods left to implement (`cargo test -- --nocapture` shows them)",
        report.not_implemented().len()
    );
    report.assert_passed();
}
