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
    /// The existing Node carries `provider_id` in `spec.providerID`, as a
    /// kubelet started with `--provider-id` (or an earlier manager) set it:
    /// the provider's metadata for it must give that same ID (the field is
    /// immutable; a Node whose ID the provider renders otherwise can never
    /// be matched to its instance again).
    pub fn with_provider_id(mut self, provider_id: impl Into<String>) -> Self {
        self.existing
            .spec
            .get_or_insert_with(Default::default)
            .provider_id = Some(provider_id.into());
        self
    }

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
    /// The provider offers the capability but answers `NotImplemented`
    /// where the check needs an answer: a method left to write (a
    /// generated provider starts with all of them).
    NotImplemented(String),
}

/// Why a check did not pass: a broken contract, or a method that answers
/// `NotImplemented`.
#[derive(Debug)]
pub(crate) enum Miss {
    Broken(String),
    NotImplemented(String),
}

impl From<String> for Miss {
    fn from(why: String) -> Self {
        Self::Broken(why)
    }
}

impl From<&str> for Miss {
    fn from(why: &str) -> Self {
        Self::Broken(why.to_owned())
    }
}

impl From<stratus_cloud::CloudError> for Miss {
    fn from(e: stratus_cloud::CloudError) -> Self {
        Self::from(&e)
    }
}

impl From<&stratus_cloud::CloudError> for Miss {
    fn from(e: &stratus_cloud::CloudError) -> Self {
        if e.is_not_implemented() {
            Self::NotImplemented(format!("answers NotImplemented ({e})"))
        } else {
            Self::Broken(format!("error: {e}"))
        }
    }
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
        self.checked(name, result.map_err(Miss::Broken));
    }

    pub(crate) fn checked(&mut self, name: &'static str, result: Result<(), Miss>) {
        let outcome = match result {
            Ok(()) => Outcome::Passed,
            Err(Miss::Broken(why)) => Outcome::Failed(why),
            Err(Miss::NotImplemented(why)) => Outcome::NotImplemented(why),
        };
        self.push(name, outcome);
    }

    /// The failed checks.
    pub fn failures(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed(_)))
            .collect()
    }

    /// Each failed check as `name: why`, the contract and what broke it.
    pub fn failure_messages(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter_map(|c| match &c.outcome {
                Outcome::Failed(why) => Some(format!("{}: {why}", c.name)),
                _ => None,
            })
            .collect()
    }

    /// The checks the provider could not take because a method it offers
    /// answers `NotImplemented`: what is left to write.
    pub fn not_implemented(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::NotImplemented(_)))
            .collect()
    }

    /// Panic with every failure if any check failed (for tests). Checks
    /// left `NotImplemented` do not fail it; see
    /// [`Report::assert_complete`].
    pub fn assert_passed(&self) {
        let failures = self.failures();
        assert!(failures.is_empty(), "conformance failed:\n{self}");
    }

    /// Panic if any check failed or was left `NotImplemented` (for a
    /// provider that is meant to be finished).
    pub fn assert_complete(&self) {
        self.assert_passed();
        assert!(
            self.not_implemented().is_empty(),
            "conformance incomplete: methods answer NotImplemented:\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.checks {
            match &c.outcome {
                Outcome::Passed => writeln!(f, "ok       {}", c.name)?,
                Outcome::Failed(why) => writeln!(f, "FAILED   {}: {why}", c.name)?,
                Outcome::Skipped(why) => writeln!(f, "skipped  {}: {why}", c.name)?,
                Outcome::NotImplemented(why) => writeln!(f, "left     {}: {why}", c.name)?,
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
    report.checked(
        "instance_exists is true for an existing instance",
        match instances.instance_exists(&fx.existing).await {
            Ok(true) => Ok(()),
            Ok(false) => Err("answered false".into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    report.checked(
        "instance_exists is false (not an error) for a missing instance",
        match instances.instance_exists(&fx.missing).await {
            Ok(false) => Ok(()),
            Ok(true) => Err("answered true".into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    report.checked(
        "instance_state is Gone for a missing instance",
        match instances.instance_state(&fx.missing).await {
            Ok(InstanceState::Gone) => Ok(()),
            Ok(other) => Err(format!("answered {other:?}").into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    report.checked(
        "instance_shutdown is false for a running instance",
        match instances.instance_shutdown(&fx.existing).await {
            Ok(false) => Ok(()),
            Ok(true) => Err("answered true: the node would be tainted as shut down".into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    let metadata = instances.instance_metadata(&fx.existing).await;
    report.checked(
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
                )
                .into()),
                Err(e) => Err(e.to_string().into()),
            },
            Ok(None) => Err("no metadata for an existing instance".into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    let node_id = fx
        .existing
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .filter(|id| !id.is_empty());
    match &node_id {
        None => report.push(
            "instance_metadata keeps the provider ID the Node carries",
            Outcome::Skipped(
                "the existing Node carries no provider ID (CloudFixtures::with_provider_id)".into(),
            ),
        ),
        Some(id) => report.checked(
            "instance_metadata keeps the provider ID the Node carries",
            match &metadata {
                Ok(Some(m)) if m.provider_id.is_empty() || m.provider_id == *id => Ok(()),
                Ok(Some(m)) => Err(format!(
                    "the Node carries {id:?}, instance_metadata gives {:?}: the controllers could never match them",
                    m.provider_id
                )
                .into()),
                Ok(None) => Err("no metadata for an existing instance".into()),
                Err(e) => Err(Miss::from(e)),
            },
        ),
    }
    report.checked(
        "instance_metadata reports valid addresses of known types",
        match &metadata {
            Ok(Some(m)) if m.node_addresses.is_empty() => Err("no addresses".into()),
            Ok(Some(m)) => m
                .node_addresses
                .iter()
                .find_map(helpers::node_address_problem)
                .map_or(Ok(()), |why| Err(why.into())),
            Ok(None) => Err("no metadata for an existing instance".into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    report.checked(
        "instance type, zone and region are valid label values",
        match &metadata {
            Ok(Some(m)) => [
                ("instance type", &m.instance_type),
                ("zone", &m.zone),
                ("region", &m.region),
            ]
            .into_iter()
            .find(|(_, v)| !helpers::is_label_value(v))
            .map_or(Ok(()), |(what, v)| {
                Err(format!(
                    "{what} {v:?} is not a valid label value: the Node's labels would be refused"
                )
                .into())
            }),
            _ => Ok(()),
        },
    );
    if cloud.zones().is_some() {
        report.checked(
            "a provider with zones gives each instance a zone and a region",
            match &metadata {
                Ok(Some(m)) if m.zone.is_empty() || m.region.is_empty() => Err(format!(
                    "zone {:?}, region {:?}: the topology labels would be missing",
                    m.zone, m.region
                )
                .into()),
                Ok(_) => Ok(()),
                Err(e) => Err(Miss::from(e)),
            },
        );
    }
    report.checked(
        "additional labels avoid the Kubernetes namespaces",
        match &metadata {
            Ok(Some(m)) => match m
                .additional_labels
                .keys()
                .find(|k| helpers::is_kubernetes_namespaced_label(k))
            {
                Some(k) => Err(format!("label {k:?} would be refused").into()),
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
    report.checked(
        "batch answers match single answers",
        async {
            if batch.max_batch_size() == 0 {
                return Err("max_batch_size is 0".into());
            }
            let states = batch.instance_state_batch(&nodes).await?;
            check_batch_len(nodes.len(), &states)?;
            match (&states[0], &states[1]) {
                (Ok(InstanceState::Running | InstanceState::ShutDown), Ok(InstanceState::Gone)) => {
                }
                other => return Err(format!("states {other:?}").into()),
            }
            let metas = batch.instance_metadata_batch(&nodes[..1]).await?;
            check_batch_len(1, &metas)?;
            let single = instances.instance_metadata(&fx.existing).await?;
            match &metas[0] {
                Ok(m) if *m == single => Ok(()),
                other => Err(format!("batch metadata {other:?} differs from {single:?}").into()),
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
    report.checked(
        "ensure_load_balancer is idempotent",
        match (&first, &second) {
            (Ok(a), Ok(b)) if helpers::load_balancer_status_equal(a, b) => Ok(()),
            (Ok(a), Ok(b)) => Err(format!("first {a:?}, then {b:?}").into()),
            (Err(e), _) | (_, Err(e)) => Err(Miss::from(e)),
        },
    );
    report.checked(
        "ensure_load_balancer returns an ingress",
        match &first {
            Ok(s) if s.ingress.as_ref().is_some_and(|i| !i.is_empty()) => Ok(()),
            Ok(_) => Err("empty status".into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    report.checked(
        "get_load_balancer finds what ensure created",
        match lb.get_load_balancer(cluster, &fx.service).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("not found".into()),
            Err(e) => Err(Miss::from(e)),
        },
    );
    let up_to_date = lb
        .load_balancer_up_to_date(cluster, &fx.service, &nodes)
        .await;
    let implemented = !matches!(&up_to_date, Err(e) if e.is_not_implemented());
    if implemented {
        report.checked(
            "load_balancer_up_to_date is true right after ensure",
            match up_to_date {
                Ok(true) => Ok(()),
                Ok(false) => Err("answered false".into()),
                Err(e) => Err(Miss::from(e)),
            },
        );
    } else {
        report.push(
            "load_balancer_up_to_date",
            Outcome::Skipped("not implemented (the controller re-ensures instead)".into()),
        );
    }
    report.checked(
        "update_load_balancer changes hosts",
        lb.update_load_balancer(cluster, &fx.service, &[])
            .await
            .map_err(Miss::from),
    );
    if implemented {
        report.checked(
            "load_balancer_up_to_date is false once the hosts differ",
            match lb
                .load_balancer_up_to_date(cluster, &fx.service, &nodes)
                .await
            {
                Ok(false) => Ok(()),
                Ok(true) => Err("answered true for other hosts".into()),
                Err(e) => Err(Miss::from(e)),
            },
        );
    }
    report.checked(
        "ensure_load_balancer_deleted removes it",
        async {
            lb.ensure_load_balancer_deleted(cluster, &fx.service)
                .await?;
            match lb.get_load_balancer(cluster, &fx.service).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err("still there".into()),
                Err(e) => Err(Miss::from(e)),
            }
        }
        .await,
    );
    report.checked(
        "deleting a missing load balancer is Ok",
        match lb.ensure_load_balancer_deleted(cluster, &fx.service).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_implemented_elsewhere() => {
                Err("must not return ImplementedElsewhere".into())
            }
            Err(e) => Err(Miss::from(e)),
        },
    );
    report.checked("the load-balancer name is stable and non-empty", {
        let a = lb.get_load_balancer_name(cluster, &fx.service);
        let b = lb.get_load_balancer_name(cluster, &fx.service);
        if a.is_empty() || a != b {
            Err(format!("{a:?} / {b:?}").into())
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
    report.checked(
        "created routes are listed",
        async {
            routes.create_route(cluster, hint, &route).await?;
            let listed = routes.list_routes(cluster).await?;
            match listed.iter().find(|r| r.destination_cidr == fx.route_cidr) {
                Some(r) if r.target_node == target => Ok(()),
                Some(r) => Err(format!("target {:?}, wanted {target:?}", r.target_node).into()),
                None => Err("the route is not listed".into()),
            }
        }
        .await,
    );
    report.checked(
        "deleted routes are not listed",
        async {
            let listed = routes.list_routes(cluster).await?;
            let Some(r) = listed
                .into_iter()
                .find(|r| r.destination_cidr == fx.route_cidr)
            else {
                return Err("nothing to delete".into());
            };
            routes.delete_route(cluster, &r).await?;
            let listed = routes.list_routes(cluster).await?;
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
