//! The manager run as `docs/deploy/daemonset.yaml` runs it, shared by the
//! tests of its flags and of its shipped RBAC.

/// The manager started through its command line with the documented
/// DaemonSet arguments (`docs/deploy/daemonset.yaml`: leader election,
/// per-controller ServiceAccounts, node CIDRs and cloud routes) plus
/// `extra`, against the cluster `kubeconfig` names, with a FakeCloud that
/// has the instance `node-a`.
pub(crate) struct DocumentedManager {
    /// The cloud the manager drives.
    pub(crate) cloud: stratus_testing::FakeCloud,
    /// The admin port (`--secure-port`).
    pub(crate) port: u16,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), stratus_ccm::app::CommandError>>,
}

impl DocumentedManager {
    pub(crate) fn start(kubeconfig: &std::path::Path, extra: &[&str]) -> Self {
        use std::sync::Arc;
        let cloud = stratus_testing::FakeCloud::new();
        cloud.add_instance(
            stratus_testing::FakeInstance::new("node-a").with_internal_ip("10.0.0.1"),
        );
        let port = super::common::free_port();
        let mut args = vec![
            "cloud-controller-manager".to_string(),
            // The documented argument list.
            "--cloud-provider=fake".into(),
            "--leader-elect=true".into(),
            "--use-service-account-credentials".into(),
            "--allocate-node-cidrs=true".into(),
            "--configure-cloud-routes=true".into(),
            "--cluster-cidr=172.17.0.0/16".into(),
            // The harness.
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let provider = cloud.clone();
        let command = stratus_ccm::app::Command::new().provider("fake", move |_options, _flags| {
            Ok(Arc::new(provider) as Arc<dyn stratus_cloud::CloudProvider>)
        });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(command.run_with_args(args, stopped));
        Self {
            cloud,
            port,
            stop,
            task,
        }
    }

    /// Register `node-a` and create the LoadBalancer Service `web`, then
    /// wait until the node is initialized, given a pod CIDR and a route
    /// (created in the cloud and written as `NetworkUnavailable=False`),
    /// and `web` has an ingress; `check` runs at each poll (to fail fast).
    pub(crate) async fn converge(
        &self,
        cluster: &stratus_testing::TestCluster,
        check: impl Fn(),
    ) -> stratus_testing::cluster::SimulatedKubelet {
        use k8s_openapi::api::core::v1::{Node, Service};
        use kube::api::{Api, PostParams};
        use std::time::Duration;
        let kubelet = cluster
            .add_node(
                stratus_testing::NodeSpec::new("node-a").with_heartbeat(Duration::from_secs(3600)),
            )
            .await
            .expect("node-a registers");
        let services: Api<Service> = Api::namespaced(cluster.client(), "default");
        services
            .create(
                &PostParams::default(),
                &super::common::load_balancer_service("web"),
            )
            .await
            .expect("web is created");
        let nodes: Api<Node> = Api::all(cluster.client());
        stratus_testing::eventually(
            "the node is initialized, given a pod CIDR and a route; web has a load balancer",
            Duration::from_secs(30),
            || async {
                check();
                let node = nodes.get("node-a").await.unwrap();
                // The route controller's write follows the cloud route.
                let route_written = node
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False");
                let spec = node.spec.unwrap_or_default();
                let web = services.get("web").await.unwrap();
                spec.provider_id.as_deref() == Some("fake://node-a")
                    && spec.pod_cidr.is_some()
                    && !self.cloud.routes_list().is_empty()
                    && route_written
                    && web
                        .status
                        .and_then(|s| s.load_balancer)
                        .and_then(|l| l.ingress)
                        .is_some_and(|i| !i.is_empty())
            },
        )
        .await;
        kubelet
    }

    /// Stop the manager; it must end without an error.
    pub(crate) async fn stop(self) {
        self.stop.send(true).expect("the manager is running");
        self.task
            .await
            .expect("the manager's task")
            .expect("the manager stops cleanly");
    }
}
