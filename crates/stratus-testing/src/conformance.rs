//! The cloud-provider conformance suite: checks a provider against the
//! contracts of the `stratus-cloud` traits. A vendor runs it against their
//! provider (in a sandbox account); [`crate::FakeCloud`] passes it in CI.
//!
//! ```
//! use stratus_testing::conformance::{CloudFixtures, run_cloud_conformance};
//! use stratus_testing::{FakeCloud, FakeInstance};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let cloud = FakeCloud::new();
//! cloud.add_instance(FakeInstance::new("live-node"));
//! let report = run_cloud_conformance(&cloud, &CloudFixtures::new("live-node", "gone-node")).await;
//! report.assert_passed();
//! # });
//! ```

use std::fmt;

use k8s_openapi::api::core::v1::{Node, Service};
use stratus_cloud::{CloudProvider, InstanceState, ProviderId, Route, check_batch_len, helpers};

/// What the suite runs against.
#[derive(Debug, Clone)]
pub struct CloudFixtures {
    /// A Node whose instance exists and runs.
    pub existing: Node,
    /// A Node whose instance does not exist (deleted, or never created).
    pub missing: Node,
    /// A LoadBalancer Service to create a load balancer for (it is deleted
    /// at the end).
    pub service: Service,
    /// The cluster name passed to load-balancer and route calls.
    pub cluster_name: String,
    /// A pod CIDR for the route checks, inside the cluster CIDR.
    pub route_cidr: String,
}

impl CloudFixtures {
    /// Fixtures for an existing node named `existing` and a missing one named
    /// `missing`, a Service `default/stratus-conformance` with one port, the
    /// cluster `kubernetes`, and the route CIDR `10.244.99.0/24`.
    pub fn new(existing: &str, missing: &str) -> Self {
        let node = |name: &str| {
            let mut n = Node::default();
            n.metadata.name = Some(name.to_owned());
            n
        };
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "stratus-conformance", "namespace": "default", "uid": "5f0c7d1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}
        }))
        .unwrap_or_default();
        Self {
            existing: node(existing),
            missing: node(missing),
            service,
            cluster_name: "kubernetes".to_owned(),
            route_cidr: "10.244.99.0/24".to_owned(),
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The contract holds.
    Passed,
    /// The contract is broken; why.
    Failed(String),
    /// The capability is not offered.
    Skipped(String),
}

/// One check and its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// How it went.
    pub outcome: Outcome,
}

/// The suite's results.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every check, in order.
    pub checks: Vec<Check>,
}

impl Report {
    pub(crate) fn push(&mut self, name: &'static str, outcome: Outcome) {
        self.checks.push(Check { name, outcome });
    }

    pub(crate) fn result(&mut self, name: &'static str, result: Result<(), String>) {
        self.push(
            name,
            result.map_or_else(Outcome::Failed, |()| Outcome::Passed),
        );
    }

    /// The failed checks.
    pub fn failures(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed(_)))
            .collect()
    }

    /// Panic with every failure if any check failed (for tests).
    pub fn assert_passed(&self) {
        let failures = self.failures();
        assert!(failures.is_empty(), "conformance failed:\n{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.checks {
            match &c.outcome {
                Outcome::Passed => writeln!(f, "ok       {}", c.name)?,
                Outcome::Failed(why) => writeln!(f, "FAILED   {}: {why}", c.name)?,
                Outcome::Skipped(why) => writeln!(f, "skipped  {}: {why}", c.name)?,
            }
        }
        Ok(())
    }
}

async fn instances(cloud: &dyn CloudProvider, fx: &CloudFixtures, report: &mut Report) {
    let Some(instances) = cloud.instances_v2() else {
        report.push(
            "instances",
            Outcome::Skipped("the provider does not offer InstancesV2".into()),
        );
        return;
    };
    report.result(
        "instance_exists is true for an existing instance",
        match instances.instance_exists(&fx.existing).await {
            Ok(true) => Ok(()),
            Ok(false) => Err("answered false".into()),
            Err(e) => Err(format!("error: {e}")),
        },
    );
    report.result(
        "instance_exists is false (not an error) for a missing instance",
        match instances.instance_exists(&fx.missing).await {
            Ok(false) => Ok(()),
            Ok(true) => Err("answered true".into()),
            Err(e) => Err(format!("error instead of false: {e}")),
        },
    );
    report.result(
        "instance_state is Gone for a missing instance",
        match instances.instance_state(&fx.missing).await {
            Ok(InstanceState::Gone) => Ok(()),
            Ok(other) => Err(format!("answered {other:?}")),
            Err(e) => Err(format!("error: {e}")),
        },
    );
    report.result(
        "instance_shutdown answers for an existing instance",
        instances
            .instance_shutdown(&fx.existing)
            .await
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    let metadata = instances.instance_metadata(&fx.existing).await;
    report.result(
        "instance_metadata gives a provider ID that round-trips",
        match &metadata {
            Ok(Some(m)) => match m.provider_id.parse::<ProviderId>() {
                Ok(id)
                    if id.provider() == cloud.provider_name()
                        && id.to_string() == m.provider_id =>
                {
                    Ok(())
                }
                Ok(id) => Err(format!(
                    "provider ID {:?} has scheme {:?}, not {:?}",
                    m.provider_id,
                    id.provider(),
                    cloud.provider_name()
                )),
                Err(e) => Err(e.to_string()),
            },
            Ok(None) => Err("no metadata for an existing instance".into()),
            Err(e) => Err(format!("error: {e}")),
        },
    );
    report.result(
        "instance_metadata reports addresses",
        match &metadata {
            Ok(Some(m)) if !m.node_addresses.is_empty() => Ok(()),
            Ok(_) => Err("no addresses".into()),
            Err(e) => Err(format!("error: {e}")),
        },
    );
    report.result(
        "additional labels avoid the Kubernetes namespaces",
        match &metadata {
            Ok(Some(m)) => match m
                .additional_labels
                .keys()
                .find(|k| helpers::is_kubernetes_namespaced_label(k))
            {
                Some(k) => Err(format!("label {k:?} would be refused")),
                None => Ok(()),
            },
            _ => Ok(()),
        },
    );
    let Some(batch) = instances.batch() else {
        report.push(
            "batch answers match single answers",
            Outcome::Skipped("no batch capability".into()),
        );
        return;
    };
    let nodes = vec![fx.existing.clone(), fx.missing.clone()];
    report.result(
        "batch answers match single answers",
        async {
            if batch.max_batch_size() == 0 {
                return Err("max_batch_size is 0".to_owned());
            }
            let states = batch
                .instance_state_batch(&nodes)
                .await
                .map_err(|e| e.to_string())?;
            check_batch_len(nodes.len(), &states).map_err(|e| e.to_string())?;
            match (&states[0], &states[1]) {
                (Ok(InstanceState::Running | InstanceState::ShutDown), Ok(InstanceState::Gone)) => {
                }
                other => return Err(format!("states {other:?}")),
            }
            let metas = batch
                .instance_metadata_batch(&nodes[..1])
                .await
                .map_err(|e| e.to_string())?;
            check_batch_len(1, &metas).map_err(|e| e.to_string())?;
            let single = instances
                .instance_metadata(&fx.existing)
                .await
                .map_err(|e| e.to_string())?;
            match &metas[0] {
                Ok(m) if *m == single => Ok(()),
                other => Err(format!("batch metadata {other:?} differs from {single:?}")),
            }
        }
        .await,
    );
}

async fn load_balancers(cloud: &dyn CloudProvider, fx: &CloudFixtures, report: &mut Report) {
    let Some(lb) = cloud.load_balancer() else {
        report.push(
            "load balancers",
            Outcome::Skipped("the provider does not offer LoadBalancer".into()),
        );
        return;
    };
    let cluster = fx.cluster_name.as_str();
    let nodes = vec![fx.existing.clone()];
    let first = lb.ensure_load_balancer(cluster, &fx.service, &nodes).await;
    let second = lb.ensure_load_balancer(cluster, &fx.service, &nodes).await;
    report.result(
        "ensure_load_balancer is idempotent",
        match (&first, &second) {
            (Ok(a), Ok(b)) if helpers::load_balancer_status_equal(a, b) => Ok(()),
            (Ok(a), Ok(b)) => Err(format!("first {a:?}, then {b:?}")),
            (Err(e), _) | (_, Err(e)) => Err(format!("error: {e}")),
        },
    );
    report.result(
        "ensure_load_balancer returns an ingress",
        match &first {
            Ok(s) if s.ingress.as_ref().is_some_and(|i| !i.is_empty()) => Ok(()),
            Ok(_) => Err("empty status".into()),
            Err(e) => Err(format!("error: {e}")),
        },
    );
    report.result(
        "get_load_balancer finds what ensure created",
        match lb.get_load_balancer(cluster, &fx.service).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("not found".into()),
            Err(e) => Err(format!("error: {e}")),
        },
    );
    let up_to_date = lb
        .load_balancer_up_to_date(cluster, &fx.service, &nodes)
        .await;
    let implemented = !matches!(&up_to_date, Err(e) if e.is_not_implemented());
    if implemented {
        report.result(
            "load_balancer_up_to_date is true right after ensure",
            match up_to_date {
                Ok(true) => Ok(()),
                Ok(false) => Err("answered false".into()),
                Err(e) => Err(format!("error: {e}")),
            },
        );
    } else {
        report.push(
            "load_balancer_up_to_date",
            Outcome::Skipped("not implemented (the controller re-ensures instead)".into()),
        );
    }
    report.result(
        "update_load_balancer changes hosts",
        lb.update_load_balancer(cluster, &fx.service, &[])
            .await
            .map_err(|e| e.to_string()),
    );
    if implemented {
        report.result(
            "load_balancer_up_to_date is false once the hosts differ",
            match lb
                .load_balancer_up_to_date(cluster, &fx.service, &nodes)
                .await
            {
                Ok(false) => Ok(()),
                Ok(true) => Err("answered true for other hosts".into()),
                Err(e) => Err(format!("error: {e}")),
            },
        );
    }
    report.result(
        "ensure_load_balancer_deleted removes it",
        async {
            lb.ensure_load_balancer_deleted(cluster, &fx.service)
                .await
                .map_err(|e| e.to_string())?;
            match lb.get_load_balancer(cluster, &fx.service).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err("still there".into()),
                Err(e) => Err(format!("error: {e}")),
            }
        }
        .await,
    );
    report.result(
        "deleting a missing load balancer is Ok",
        match lb.ensure_load_balancer_deleted(cluster, &fx.service).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_implemented_elsewhere() => {
                Err("must not return ImplementedElsewhere".into())
            }
            Err(e) => Err(format!("error: {e}")),
        },
    );
    report.result("the load-balancer name is stable and non-empty", {
        let a = lb.get_load_balancer_name(cluster, &fx.service);
        let b = lb.get_load_balancer_name(cluster, &fx.service);
        if a.is_empty() || a != b {
            Err(format!("{a:?} / {b:?}"))
        } else {
            Ok(())
        }
    });
}

async fn routes(cloud: &dyn CloudProvider, fx: &CloudFixtures, report: &mut Report) {
    let Some(routes) = cloud.routes() else {
        report.push(
            "routes",
            Outcome::Skipped("the provider does not offer Routes".into()),
        );
        return;
    };
    let cluster = fx.cluster_name.as_str();
    let target = fx.existing.metadata.name.clone().unwrap_or_default();
    let route = Route {
        target_node: target.clone(),
        destination_cidr: fx.route_cidr.clone(),
        ..Default::default()
    };
    let hint = "stratus-conformance-route";
    report.result(
        "created routes are listed",
        async {
            routes
                .create_route(cluster, hint, &route)
                .await
                .map_err(|e| e.to_string())?;
            let listed = routes
                .list_routes(cluster)
                .await
                .map_err(|e| e.to_string())?;
            match listed.iter().find(|r| r.destination_cidr == fx.route_cidr) {
                Some(r) if r.target_node == target => Ok(()),
                Some(r) => Err(format!("target {:?}, wanted {target:?}", r.target_node)),
                None => Err("the route is not listed".into()),
            }
        }
        .await,
    );
    report.result(
        "deleted routes are not listed",
        async {
            let listed = routes
                .list_routes(cluster)
                .await
                .map_err(|e| e.to_string())?;
            let Some(r) = listed
                .into_iter()
                .find(|r| r.destination_cidr == fx.route_cidr)
            else {
                return Err("nothing to delete".into());
            };
            routes
                .delete_route(cluster, &r)
                .await
                .map_err(|e| e.to_string())?;
            let listed = routes
                .list_routes(cluster)
                .await
                .map_err(|e| e.to_string())?;
            if listed.iter().any(|r| r.destination_cidr == fx.route_cidr) {
                Err("still listed".into())
            } else {
                Ok(())
            }
        }
        .await,
    );
}

/// Run every check against `cloud`.
pub async fn run_cloud_conformance(cloud: &dyn CloudProvider, fixtures: &CloudFixtures) -> Report {
    let mut report = Report::default();
    report.result(
        "the provider name is a valid provider-ID scheme",
        ProviderId::new(cloud.provider_name(), "x")
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    instances(cloud, fixtures, &mut report).await;
    load_balancers(cloud, fixtures, &mut report).await;
    routes(cloud, fixtures, &mut report).await;
    report
}
