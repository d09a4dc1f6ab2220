//! FakeCloud's knobs, and the cloud-provider conformance suite.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Service};
use stratus_cloud::{
    CloudError, CloudErrorKind, CloudProvider, InstanceMetadata, InstanceState, InstancesV2,
    LoadBalancerClasses,
};
use stratus_testing::conformance::{CloudFixtures, Outcome, run_cloud_conformance};
use stratus_testing::{FakeCloud, FakeInstance};

fn node(name: &str, provider_id: Option<&str>) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    if let Some(id) = provider_id {
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some(id.into()),
            ..Default::default()
        });
    }
    n
}

fn service(name: &str) -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn fake_cloud_passes_conformance() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("live").with_internal_ip("10.0.0.1"));
    let report = run_cloud_conformance(&cloud, &CloudFixtures::new("live", "gone")).await;
    report.assert_passed();
    assert!(
        report
            .checks
            .iter()
            .filter(|c| c.outcome == Outcome::Passed)
            .count()
            >= 15,
        "{report}"
    );
    // Without batching, the batch check is skipped, not failed.
    cloud.set_batching(false, 1);
    let report = run_cloud_conformance(&cloud, &CloudFixtures::new("live", "gone")).await;
    report.assert_passed();
    assert!(
        report
            .checks
            .iter()
            .any(|c| matches!(c.outcome, Outcome::Skipped(_)))
    );
}

/// A provider that breaks the contract Go's V2 path trips on: an error
/// instead of `false` for a deleted instance.
struct Broken(FakeCloud);

#[async_trait]
impl InstancesV2 for Broken {
    async fn instance_exists(&self, node: &Node) -> stratus_cloud::Result<bool> {
        match self.0.instances_v2().unwrap().instance_exists(node).await? {
            true => Ok(true),
            false => Err(CloudError::other(std::io::Error::other(
                "instance lookup failed",
            ))),
        }
    }
    async fn instance_shutdown(&self, node: &Node) -> stratus_cloud::Result<bool> {
        self.0.instances_v2().unwrap().instance_shutdown(node).await
    }
    async fn instance_metadata(
        &self,
        node: &Node,
    ) -> stratus_cloud::Result<Option<InstanceMetadata>> {
        self.0.instances_v2().unwrap().instance_metadata(node).await
    }
}

impl CloudProvider for Broken {
    fn provider_name(&self) -> &str {
        "fake"
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }
}

#[tokio::test]
async fn conformance_catches_a_broken_provider() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("live"));
    let report = run_cloud_conformance(&Broken(cloud), &CloudFixtures::new("live", "gone")).await;
    let failed: Vec<&str> = report.failures().iter().map(|c| c.name).collect();
    assert!(
        failed.contains(&"instance_exists is false (not an error) for a missing instance"),
        "{report}"
    );
    assert!(
        failed.contains(&"instance_state is Gone for a missing instance"),
        "{report}"
    );
}

#[tokio::test]
async fn scripted_errors_are_not_sticky() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("n1"));
    cloud.fail_next("instance_metadata", CloudErrorKind::Other, 2);
    let v2 = cloud.instances_v2().unwrap();
    assert!(v2.instance_metadata(&node("n1", None)).await.is_err());
    assert!(v2.instance_metadata(&node("n1", None)).await.is_err());
    assert!(v2.instance_metadata(&node("n1", None)).await.is_ok());
    cloud.fail_next(
        "ensure_load_balancer",
        CloudErrorKind::RetryAfter(Duration::from_secs(3)),
        1,
    );
    let err = cloud
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("k", &service("a"), &[])
        .await
        .unwrap_err();
    assert_eq!(err.retry_delay(), Some(Duration::from_secs(3)));
}

#[tokio::test]
async fn throttling_and_latency() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("n1"));
    cloud.set_rate_limit(1.0, 2);
    let v2 = cloud.instances_v2().unwrap();
    let n = node("n1", None);
    assert!(v2.instance_exists(&n).await.is_ok());
    assert!(v2.instance_exists(&n).await.is_ok());
    let err = v2.instance_exists(&n).await.unwrap_err();
    assert!(
        matches!(err.kind(), CloudErrorKind::Throttled { retry_after: Some(d) } if d <= Duration::from_secs(1))
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(v2.instance_exists(&n).await.is_ok());

    let slow = FakeCloud::new();
    slow.set_latency(Duration::from_millis(30));
    let started = Instant::now();
    let _ = slow.instances_v2().unwrap().instance_exists(&n).await;
    assert!(started.elapsed() >= Duration::from_millis(30));
}

#[tokio::test]
async fn instances_by_provider_id_then_name_and_states() {
    let cloud = FakeCloud::new();
    let mut inst = FakeInstance::new("renamed");
    inst.provider_id = "fake://i-42".into();
    cloud.add_instance(inst);
    let v2 = cloud.instances_v2().unwrap();
    // Found by provider ID even though the node name differs.
    assert!(
        v2.instance_exists(&node("other-name", Some("fake://i-42")))
            .await
            .unwrap()
    );
    assert!(v2.instance_exists(&node("renamed", None)).await.unwrap());
    cloud.set_instance_state("renamed", InstanceState::ShutDown);
    assert_eq!(
        v2.instance_state(&node("renamed", None)).await.unwrap(),
        InstanceState::ShutDown
    );
    cloud.remove_instance("renamed");
    assert_eq!(
        v2.instance_state(&node("renamed", None)).await.unwrap(),
        InstanceState::Gone
    );
    // Legacy interface: garbage provider IDs are invalid input.
    let legacy = cloud.instances().unwrap();
    assert!(
        legacy
            .instance_exists_by_provider_id("not a provider id")
            .await
            .unwrap_err()
            .is_invalid_input()
    );
    assert!(
        !legacy
            .instance_exists_by_provider_id("fake://nope")
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn batches_and_call_log() {
    let cloud = FakeCloud::new();
    for i in 0..5 {
        cloud.add_instance(FakeInstance::new(format!("n{i}")));
    }
    cloud.set_batching(true, 3);
    let v2 = cloud.instances_v2().unwrap();
    let batch = v2.batch().unwrap();
    let nodes: Vec<Node> = (0..3).map(|i| node(&format!("n{i}"), None)).collect();
    let answers = batch.instance_metadata_batch(&nodes).await.unwrap();
    assert_eq!(answers.len(), 3);
    let too_many: Vec<Node> = (0..5).map(|i| node(&format!("n{i}"), None)).collect();
    assert!(
        batch
            .instance_state_batch(&too_many)
            .await
            .unwrap_err()
            .is_invalid_input()
    );
    let calls = cloud.calls();
    assert_eq!(calls[0].method, "instance_metadata_batch");
    assert_eq!(calls[0].batch_size, 3);
    cloud.set_batching(false, 3);
    assert!(v2.batch().is_none());
}

#[tokio::test]
async fn load_balancers_classes_and_elsewhere() {
    let cloud = FakeCloud::new();
    let lb = cloud.load_balancer().unwrap();
    let svc = service("web");
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &[node("b", None), node("a", None)])
        .await
        .unwrap();
    let ip = status.ingress.unwrap()[0].ip.clone().unwrap();
    let name = lb.get_load_balancer_name("kubernetes", &svc);
    let stored = cloud.load_balancers()[&name].clone();
    assert_eq!(stored.hosts, ["a", "b"]);
    assert_eq!(cloud.load_balancers_with_host("a"), 1);
    assert_eq!(cloud.load_balancers_with_host("c"), 0);
    assert_eq!(stored.ports, [(80, "TCP".to_owned(), 30080)]);
    lb.update_load_balancer("kubernetes", &svc, &[node("c", None)])
        .await
        .unwrap();
    assert_eq!(cloud.load_balancers()[&name].hosts, ["c"]);
    assert_eq!(cloud.load_balancers_with_host("a"), 0);
    assert_eq!(cloud.load_balancers_with_host("c"), 1);
    let again = lb
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert_eq!(
        again.ingress.unwrap()[0].ip.as_deref(),
        Some(ip.as_str()),
        "the address is kept"
    );

    cloud.implement_elsewhere("default/other");
    assert!(
        lb.ensure_load_balancer("kubernetes", &service("other"), &[])
            .await
            .unwrap_err()
            .is_implemented_elsewhere()
    );
    assert!(lb.classes().serves(None));
    cloud.set_load_balancer_classes(LoadBalancerClasses::named(["fake.example/internal"]));
    assert!(!lb.classes().serves(None));
    assert!(lb.classes().serves(Some("fake.example/internal")));
}

/// A provider as `cargo xtask new-provider` writes it: every capability
/// offered, every method answering `NotImplemented`.
struct Unwritten;

#[async_trait]
impl InstancesV2 for Unwritten {
    async fn instance_exists(&self, _: &Node) -> stratus_cloud::Result<bool> {
        Err(CloudError::not_implemented())
    }
    async fn instance_shutdown(&self, _: &Node) -> stratus_cloud::Result<bool> {
        Err(CloudError::not_implemented())
    }
    async fn instance_metadata(&self, _: &Node) -> stratus_cloud::Result<Option<InstanceMetadata>> {
        Err(CloudError::not_implemented())
    }
}

#[async_trait]
impl stratus_cloud::Routes for Unwritten {
    async fn list_routes(&self, _: &str) -> stratus_cloud::Result<Vec<stratus_cloud::Route>> {
        Err(CloudError::not_implemented())
    }
    async fn create_route(
        &self,
        _: &str,
        _: &str,
        _: &stratus_cloud::Route,
    ) -> stratus_cloud::Result<()> {
        Err(CloudError::not_implemented())
    }
    async fn delete_route(&self, _: &str, _: &stratus_cloud::Route) -> stratus_cloud::Result<()> {
        Err(CloudError::not_implemented())
    }
}

impl CloudProvider for Unwritten {
    fn provider_name(&self) -> &str {
        "unwritten"
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }
    fn routes(&self) -> Option<&dyn stratus_cloud::Routes> {
        Some(self)
    }
}

#[tokio::test]
async fn methods_left_not_implemented_are_listed_not_failed() {
    let report = run_cloud_conformance(&Unwritten, &CloudFixtures::new("live", "gone")).await;
    report.assert_passed();
    let left: Vec<&str> = report.not_implemented().iter().map(|c| c.name).collect();
    assert!(
        left.contains(&"instance_exists is true for an existing instance"),
        "{report}"
    );
    assert!(left.contains(&"created routes are listed"), "{report}");
    assert!(
        report.to_string().contains("left     instance_metadata"),
        "{report}"
    );
    let complete = std::panic::catch_unwind(|| report.assert_complete());
    assert!(complete.is_err(), "an unwritten provider is not complete");
    // A finished provider is complete.
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("live"));
    run_cloud_conformance(&cloud, &CloudFixtures::new("live", "gone"))
        .await
        .assert_complete();
}

/// A provider without InstancesV2, load balancers or routes (the fake
/// cloud with that capability switched off) passes conformance with those
/// checks skipped, not failed; the rest still run.
#[tokio::test]
async fn conformance_skips_the_capabilities_a_provider_lacks() {
    use stratus_testing::fake_cloud::Capability;
    for (missing, check) in [
        (Capability::InstancesV2, "instance"),
        (Capability::LoadBalancer, "load balancer"),
        (Capability::Routes, "route"),
    ] {
        let cloud = FakeCloud::new().without(missing);
        cloud.add_instance(FakeInstance::new("live").with_internal_ip("10.0.0.1"));
        let report = run_cloud_conformance(&cloud, &CloudFixtures::new("live", "gone")).await;
        report.assert_passed();
        let skipped: Vec<_> = report
            .checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Skipped(_)))
            .collect();
        assert!(
            skipped.iter().any(|c| c.name.contains(check)),
            "{missing:?}: {report}"
        );
        assert!(
            report
                .checks
                .iter()
                .any(|c| c.outcome == Outcome::Passed && !c.name.contains(check)),
            "{missing:?}: the other checks ran: {report}"
        );
    }
}

/// The mistakes real vendors make in `InstancesV2`, one at a time.
#[derive(Clone, Copy, Debug)]
enum Mistake {
    /// `instance_metadata` renders the ID otherwise than the Node carries
    /// it (`fake:///live` for `fake://live`).
    ProviderId,
    /// An address that is not an IP.
    Address,
    /// No zone though the provider has zones.
    Zone,
    /// An instance type the API server refuses as a label value.
    InstanceType,
    /// A running instance reported shut down.
    Shutdown,
}

struct Mistaken(FakeCloud, Mistake);

#[async_trait]
impl InstancesV2 for Mistaken {
    async fn instance_exists(&self, node: &Node) -> stratus_cloud::Result<bool> {
        self.0.instances_v2().unwrap().instance_exists(node).await
    }
    async fn instance_shutdown(&self, node: &Node) -> stratus_cloud::Result<bool> {
        let answer = self
            .0
            .instances_v2()
            .unwrap()
            .instance_shutdown(node)
            .await?;
        Ok(answer || matches!(self.1, Mistake::Shutdown))
    }
    async fn instance_metadata(
        &self,
        node: &Node,
    ) -> stratus_cloud::Result<Option<InstanceMetadata>> {
        let mut meta = self
            .0
            .instances_v2()
            .unwrap()
            .instance_metadata(node)
            .await?;
        if let Some(m) = meta.as_mut() {
            match self.1 {
                Mistake::ProviderId => m.provider_id = "fake:///live".into(),
                Mistake::Address => m.node_addresses[0].address = "10.0.0.999".into(),
                Mistake::Zone => m.zone.clear(),
                Mistake::InstanceType => m.instance_type = "m5 large (8 vCPU)".into(),
                Mistake::Shutdown => {}
            }
        }
        Ok(meta)
    }
}

impl CloudProvider for Mistaken {
    fn provider_name(&self) -> &str {
        "fake"
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }
    fn zones(&self) -> Option<&dyn stratus_cloud::Zones> {
        self.0.zones()
    }
}

/// Each vendor mistake fails the suite, which names the contract and the
/// value; the same cloud without the mistake passes.
#[tokio::test]
async fn conformance_names_each_vendor_mistake() {
    let fixtures = CloudFixtures::new("live", "gone").with_provider_id("fake://live");
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("live").with_internal_ip("10.0.0.1"));
    run_cloud_conformance(&cloud, &fixtures)
        .await
        .assert_passed();
    for (mistake, contract, value) in [
        (
            Mistake::ProviderId,
            "instance_metadata keeps the provider ID the Node carries",
            "fake:///live",
        ),
        (
            Mistake::Address,
            "instance_metadata reports valid addresses of known types",
            "10.0.0.999",
        ),
        (
            Mistake::Zone,
            "a provider with zones gives each instance a zone and a region",
            "zone \"\"",
        ),
        (
            Mistake::InstanceType,
            "instance type, zone and region are valid label values",
            "m5 large (8 vCPU)",
        ),
        (
            Mistake::Shutdown,
            "instance_shutdown is false for a running instance",
            "answered true",
        ),
    ] {
        let report = run_cloud_conformance(&Mistaken(cloud.clone(), mistake), &fixtures).await;
        let failed: Vec<String> = report.failure_messages();
        assert_eq!(failed.len(), 1, "{mistake:?}: {report}");
        assert!(
            failed[0].starts_with(contract) && failed[0].contains(value),
            "{mistake:?}: {report}"
        );
    }
}
