//! The checks: a virtual node's (Go virtual-kubelet's `test/e2e` cases)
//! and a cloud controller manager's (Go's cloud-provider e2e tests).

use k8s_openapi::api::coordination::v1::Lease;
use stratus_kubelet::api::NOT_DECLARED;

use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Service};
use kube::Api;
use kube::api::{DeleteParams, LogParams, PostParams};
use serde_json::{Value, json};

use super::{E2eConfig, MANAGED_BY, RUN_LABEL};
use crate::conformance::{Outcome, Report};
use stratus_apiserver::Check;

/// The taint the cloud-node controller removes once it initialized a Node.
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The finalizer the service controller keeps on a LoadBalancer Service.
const LB_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";
/// The condition the route controller writes on a Node.
const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
/// Its reason once the Node's routes exist.
const ROUTE_CREATED: &str = "RouteCreated";
/// The port of the test pod the port-forward check forwards (nothing need
/// listen on it: the check is that the provider takes the forward).
const FORWARDED_PORT: u16 = 80;
/// The taint keeping workloads off the Node the lifecycle check registers.
const GONE_TAINT: &str = "e2e.stratus.dev/instance-gone";

/// Poll `check` every 100 ms for up to the run's wait; on timeout the
/// error says what it last found pending.
async fn until<F, Fut, C>(config: &E2eConfig, what: &str, check: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<C, String>>,
    C: Into<Check>,
{
    stratus_apiserver::poll(what, config.wait)
        .every(std::time::Duration::from_millis(100))
        .until(check)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

fn labels(config: &E2eConfig) -> Value {
    json!({MANAGED_BY.0: MANAGED_BY.1, RUN_LABEL: config.run})
}

fn test_pod(config: &E2eConfig, name: &str, node: &str) -> Result<Pod, String> {
    env_pod(config, name, node, json!([]))
}

/// [`test_pod`] with `env` on its container.
fn env_pod(config: &E2eConfig, name: &str, node: &str, env: Value) -> Result<Pod, String> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels(config)},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "app",
                "image": config.image,
                "command": ["sh", "-c", "echo stratus-e2e; sleep 3600"],
                "env": env,
            }],
        },
    }))
    .map_err(|e| e.to_string())
}

/// Whether an event of `reason` about the pod `name` was recorded.
async fn has_event(
    client: &kube::Client,
    config: &E2eConfig,
    name: &str,
    reason: &str,
) -> Result<(), String> {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(client.clone(), &config.namespace);
    until(config, &format!("a {reason} event about {name}"), || {
        crate::pod_conformance::event_recorded(&events, name, reason)
    })
    .await
}

/// The HTTP status of an API error, if the server answered.
fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// GET a path of the node's kubelet API through the API server's node
/// proxy; `Ok(None)` when the node does not serve it (404 or 501).
async fn proxy(client: &kube::Client, node: &str, path: &str) -> Result<Option<String>, String> {
    let path = format!("/api/v1/nodes/{node}/proxy/{path}");
    let request = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match client.request_text(request).await {
        Ok(text) => Ok(Some(text)),
        Err(e) if matches!(code(&e), Some(404 | 501)) => Ok(None),
        Err(e) => Err(format!("GET {path}: {e}")),
    }
}

/// The names of the pods the node's provider runs (`/runningpods/`), or
/// `None` when the node does not serve the list.
async fn running_pods(client: &kube::Client, node: &str) -> Result<Option<Vec<String>>, String> {
    let Some(text) = proxy(client, node, "runningpods/").await? else {
        return Ok(None);
    };
    let list: Value =
        serde_json::from_str(&text).map_err(|e| format!("/runningpods/ is not JSON: {e}"))?;
    Ok(Some(
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
            .collect(),
    ))
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

fn condition_true(node: &Node, type_: &str) -> bool {
    condition(node, type_).is_some_and(|c| c.status == "True")
}

async fn renew_time(leases: &Api<Lease>, node: &str) -> Result<Option<String>, String> {
    let lease = leases
        .get_opt(node)
        .await
        .map_err(|e| format!("reading the Lease: {e}"))?;
    Ok(lease
        .and_then(|l| l.spec?.renew_time)
        .map(|t| format!("{:?}", t.0)))
}

/// Delete a test pod with `grace` and check it leaves the API and the
/// provider (its `/runningpods/`, where served).
async fn deleted(
    client: &kube::Client,
    config: &E2eConfig,
    node: &str,
    name: &str,
    grace: u32,
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &config.namespace);
    pods.delete(name, &DeleteParams::default().grace_period(grace))
        .await
        .map_err(|e| format!("deleting: {e}"))?;
    until(config, &format!("{name} to leave the API"), || async {
        Ok(pods
            .get_opt(name)
            .await
            .map_err(|e| e.to_string())?
            .is_none())
    })
    .await
    .map_err(|e| format!("{e}: the node never finished the pod's deletion (delete_pod)"))?;
    until(
        config,
        &format!("{name} to leave the provider's /runningpods/"),
        || async {
            Ok(running_pods(client, node)
                .await?
                .is_none_or(|names| !names.iter().any(|n| n == name)))
        },
    )
    .await
    .map_err(|e| format!("{e}: the provider still runs a deleted pod (delete_pod)"))
}

async fn runs(pods: &Api<Pod>, config: &E2eConfig, name: &str) -> Result<(), String> {
    until(config, &format!("{name} Running with an IP"), || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        let status = pod.status.unwrap_or_default();
        Ok(status.phase.as_deref() == Some("Running") && status.pod_ip.is_some())
    })
    .await
    .map_err(|e| format!("{e}: the provider did not start the pod (create_pod / get_pod_status)"))
}

/// Go virtual-kubelet's e2e cases against the virtual node `node` of the
/// cluster `client` talks to: the node is Ready and renews its Lease; a pod
/// bound to it runs with an IP and reports its container running; the
/// provider lists it (`/runningpods/`), the node lists it (`/pods`), its
/// logs come through the API server, a command runs in it (`exec`), and
/// the stats summary and the resource metrics (`/metrics/resource`) have
/// it (each skipped where the node serves none); a missing optional Secret
/// or ConfigMap lets a pod run with an event, a missing mandatory one keeps
/// it out of the provider with an event; graceful and forced deletions
/// remove it from the API and from the provider.
pub async fn run_virtual_node_e2e(client: kube::Client, node: &str, config: &E2eConfig) -> Report {
    let mut report = Report::default();
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &config.namespace);

    report.result(
        "the node is registered and Ready",
        until(config, &format!("{node} Ready"), || async {
            let n = nodes.get_opt(node).await.map_err(|e| e.to_string())?;
            Ok(n.is_some_and(|n| condition_true(&n, "Ready")))
        })
        .await,
    );
    report.result(
        "the node renews its Lease",
        async {
            let first = renew_time(&leases, node).await?;
            until(
                config,
                &format!("kube-node-lease/{node} renewed"),
                || async {
                    let now = renew_time(&leases, node).await?;
                    Ok(now.is_some() && now != first)
                },
            )
            .await
        }
        .await,
    );

    let name = format!("{}-lifecycle", config.run);
    report.result(
        "a pod bound to the node runs with an IP",
        async {
            pods.create(&PostParams::default(), &test_pod(config, &name, node)?)
                .await
                .map_err(|e| format!("creating the pod: {e}"))?;
            runs(&pods, config, &name).await
        }
        .await,
    );
    report.result(
        "the pod's status reports its container running",
        async {
            let pod = pods.get(&name).await.map_err(|e| e.to_string())?;
            let statuses = pod
                .status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default();
            match statuses.iter().find(|s| s.name == "app") {
                Some(s) if s.state.as_ref().is_some_and(|st| st.running.is_some()) => Ok(()),
                Some(s) => Err(format!("container app is {:?}", s.state)),
                None => Err("no status for container app (get_pod_status)".into()),
            }
        }
        .await,
    );
    match running_pods(&client, node).await {
        Ok(None) => report.push(
            "the provider lists the pod (/runningpods/)",
            Outcome::Skipped("the node serves no /runningpods/".into()),
        ),
        Ok(Some(names)) if names.contains(&name) => {
            report.push(
                "the provider lists the pod (/runningpods/)",
                Outcome::Passed,
            );
        }
        Ok(Some(_)) => report.push(
            "the provider lists the pod (/runningpods/)",
            Outcome::Failed("a running pod is missing from /runningpods/ (get_pods)".into()),
        ),
        Err(e) => report.push(
            "the provider lists the pod (/runningpods/)",
            Outcome::Failed(e),
        ),
    }
    match pods.logs(&name, &LogParams::default()).await {
        Ok(_) => report.push(
            "the pod's logs come through the API server",
            Outcome::Passed,
        ),
        Err(e) if code(&e) == Some(501) && e.to_string().contains(NOT_DECLARED) => report.push(
            "the pod's logs come through the API server",
            Outcome::Skipped("not supported (declared): the provider serves no logs".into()),
        ),
        Err(e) if code(&e) == Some(501) => report.push(
            "the pod's logs come through the API server",
            Outcome::Failed(format!(
                "GET pods/{name}/log: {e}: the provider declares logs (container_logs() is Some) but answers NotImplemented; return None from container_logs() if it has none"
            )),
        ),
        Err(e) => report.push(
            "the pod's logs come through the API server",
            Outcome::Failed(format!("GET pods/{name}/log: {e}")),
        ),
    }
    let streams = [
        (
            "a command runs in the pod through the API server (exec)",
            "exec",
            super::exec_echo(&pods, &name).await,
        ),
        (
            "attaching to the pod's container through the API server works (attach)",
            "attach",
            super::attach_probe(&pods, &name).await,
        ),
        (
            "a port of the pod is forwarded through the API server (port-forward)",
            "port-forward",
            super::port_forward_probe(&pods, &name, FORWARDED_PORT).await,
        ),
    ];
    for (check, what, result) in streams {
        report.push(
            check,
            match result {
                Ok(Some(())) => Outcome::Passed,
                Ok(None) => Outcome::Skipped(format!(
                    "not supported (declared): the provider serves no {what}"
                )),
                Err(e) => Outcome::Failed(e),
            },
        );
    }
    match proxy(&client, node, "stats/summary").await {
        Ok(None) => report.push(
            "the stats summary has the pod",
            Outcome::Skipped("the node serves no stats summary".into()),
        ),
        Ok(Some(text)) => report.result("the stats summary has the pod", {
            serde_json::from_str::<Value>(&text)
                .map_err(|e| format!("/stats/summary is not JSON: {e}"))
                .and_then(|summary| {
                    let listed = summary["pods"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p["podRef"]["name"] == name.as_str());
                    if listed {
                        Ok(())
                    } else {
                        Err("the running pod is not in /stats/summary".into())
                    }
                })
        }),
        Err(e) => report.push("the stats summary has the pod", Outcome::Failed(e)),
    }
    match proxy(&client, node, "pods").await {
        Ok(None) => report.push(
            "the node lists the pod (/pods)",
            Outcome::Skipped("the node serves no /pods".into()),
        ),
        Ok(Some(text)) => report.result("the node lists the pod (/pods)", {
            serde_json::from_str::<Value>(&text)
                .map_err(|e| format!("/pods is not JSON: {e}"))
                .and_then(|list| {
                    let listed = list["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p["metadata"]["name"] == name.as_str());
                    if listed {
                        Ok(())
                    } else {
                        Err("the running pod is not in /pods".into())
                    }
                })
        }),
        Err(e) => report.push("the node lists the pod (/pods)", Outcome::Failed(e)),
    }
    match proxy(&client, node, "metrics/resource").await {
        Ok(None) => report.push(
            "the resource metrics have the pod (/metrics/resource)",
            Outcome::Skipped("the node serves no resource metrics".into()),
        ),
        // A new pod's first sample may take a scrape of the provider.
        Ok(Some(_)) => report.result(
            "the resource metrics have the pod (/metrics/resource)",
            until(
                config,
                &format!("a sample of {name} in /metrics/resource"),
                || async {
                    let text = proxy(&client, node, "metrics/resource").await?;
                    Ok(text.is_some_and(|t| t.contains(&format!("pod=\"{name}\""))))
                },
            )
            .await
            .map_err(|e| format!("{e}: the running pod has no sample (resource_metrics)")),
        ),
        Err(e) => report.push(
            "the resource metrics have the pod (/metrics/resource)",
            Outcome::Failed(e),
        ),
    }
    let mut env_pods = Vec::new();
    for (source, kind, optional_check, mandatory_check) in [
        (
            "secretKeyRef",
            "Secret",
            "a missing optional Secret lets the pod run, with an event",
            "a missing mandatory Secret keeps the pod out of the provider, with an event",
        ),
        (
            "configMapKeyRef",
            "ConfigMap",
            "a missing optional ConfigMap lets the pod run, with an event",
            "a missing mandatory ConfigMap keeps the pod out of the provider, with an event",
        ),
    ] {
        let missing = format!("{}-missing-{}", config.run, kind.to_lowercase());
        let optional = format!("{}-optional-{}", config.run, kind.to_lowercase());
        report.result(
            optional_check,
            async {
                let env = json!([{"name": "X", "valueFrom": {source: {"name": missing, "key": "k", "optional": true}}}]);
                pods.create(&PostParams::default(), &env_pod(config, &optional, node, env)?)
                    .await
                    .map_err(|e| format!("creating the pod: {e}"))?;
                runs(&pods, config, &optional).await?;
                has_event(&client, config, &optional, &format!("Optional{kind}NotFound")).await
            }
            .await,
        );
        let mandatory = format!("{}-mandatory-{}", config.run, kind.to_lowercase());
        report.result(
            mandatory_check,
            async {
                let env =
                    json!([{"name": "X", "valueFrom": {source: {"name": missing, "key": "k"}}}]);
                pods.create(
                    &PostParams::default(),
                    &env_pod(config, &mandatory, node, env)?,
                )
                .await
                .map_err(|e| format!("creating the pod: {e}"))?;
                has_event(
                    &client,
                    config,
                    &mandatory,
                    &format!("Mandatory{kind}NotFound"),
                )
                .await?;
                let pod = pods.get(&mandatory).await.map_err(|e| e.to_string())?;
                let phase = pod.status.and_then(|s| s.phase);
                if phase.as_deref() == Some("Running") {
                    return Err("a pod whose mandatory source is missing runs".into());
                }
                match running_pods(&client, node).await? {
                    Some(names) if names.contains(&mandatory) => {
                        Err("the provider runs a pod whose mandatory source is missing".into())
                    }
                    _ => Ok(()),
                }
            }
            .await,
        );
        env_pods.extend([optional, mandatory]);
    }
    for leftover in &env_pods {
        let _ = pods
            .delete(leftover, &DeleteParams::default().grace_period(0))
            .await;
    }
    report.result(
        "a graceful delete removes the pod from the API and the provider",
        deleted(&client, config, node, &name, 5).await,
    );
    let forced = format!("{}-forced", config.run);
    report.result(
        "a forced delete removes the pod from the API and the provider",
        async {
            pods.create(&PostParams::default(), &test_pod(config, &forced, node)?)
                .await
                .map_err(|e| format!("creating the pod: {e}"))?;
            runs(&pods, config, &forced).await?;
            deleted(&client, config, node, &forced, 0).await
        }
        .await,
    );
    for leftover in [&name, &forced] {
        let _ = pods
            .delete(leftover, &DeleteParams::default().grace_period(0))
            .await;
    }
    report
}

fn is_virtual(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get("type").map(String::as_str) == Some("virtual-kubelet"))
}

fn tainted_uninitialized(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
}

/// Go's cloud-provider e2e checks against the cluster `client` talks to,
/// whose cloud controller manager is under test: every Node loses the
/// uninitialized taint; the Nodes of the cloud (not virtual ones) have a
/// provider ID and addresses, a pod CIDR and a route (`NetworkUnavailable`
/// `False` with reason `RouteCreated`; skipped when
/// [`E2eConfig::routes`] is off); a LoadBalancer Service gets an ingress
/// and the cleanup finalizer, and once deleted is released (its load
/// balancer deleted, the finalizer removed); a not-Ready Node whose
/// instance does not exist ([`E2eConfig::gone_provider_id`]) is deleted.
pub async fn run_ccm_e2e(client: kube::Client, config: &E2eConfig) -> Report {
    let mut report = Report::default();
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), &config.namespace);

    report.result(
        "every Node is initialized (the uninitialized taint removed)",
        until(config, "no Node with the uninitialized taint", || async {
            let list = nodes
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok(!list.items.iter().any(tainted_uninitialized))
        })
        .await
        .map_err(|e| format!("{e}: instance_metadata did not initialize them")),
    );
    report.result(
        "the cloud's Nodes have a provider ID and addresses",
        async {
            let list = nodes
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let cloud: Vec<&Node> = list.items.iter().filter(|n| !is_virtual(n)).collect();
            if cloud.is_empty() {
                return Err("the cluster has no Node outside virtual nodes".into());
            }
            for node in cloud {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                if node
                    .spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_none_or(str::is_empty)
                {
                    return Err(format!("Node {name} has no providerID (instance_metadata)"));
                }
                if node
                    .status
                    .as_ref()
                    .and_then(|s| s.addresses.as_ref())
                    .is_none_or(Vec::is_empty)
                {
                    return Err(format!("Node {name} has no addresses (instance_metadata)"));
                }
            }
            Ok(())
        }
        .await,
    );

    let name = format!("{}-lb", config.run);
    report.result(
        "a LoadBalancer Service gets an ingress and the cleanup finalizer",
        async {
            let service: Service = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels(config)},
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
            }))
            .map_err(|e| e.to_string())?;
            services
                .create(&PostParams::default(), &service)
                .await
                .map_err(|e| format!("creating the Service: {e}"))?;
            until(config, &format!("{name} to get an ingress"), || async {
                let s = services.get(&name).await.map_err(|e| e.to_string())?;
                let ingress = s
                    .status
                    .and_then(|s| s.load_balancer?.ingress)
                    .is_some_and(|i| !i.is_empty());
                let finalized = s
                    .metadata
                    .finalizers
                    .is_some_and(|f| f.iter().any(|f| f == LB_CLEANUP));
                Ok(ingress && finalized)
            })
            .await
            .map_err(|e| format!("{e}: no load balancer was provisioned (ensure_load_balancer)"))
        }
        .await,
    );
    report.result(
        "a deleted LoadBalancer Service is released (load balancer deleted, finalizer removed)",
        async {
            services
                .delete(&name, &DeleteParams::default())
                .await
                .map_err(|e| format!("deleting the Service: {e}"))?;
            until(config, &format!("{name} to be gone"), || async {
                Ok(services
                    .get_opt(&name)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_none())
            })
            .await
            .map_err(|e| {
                format!(
                    "{e}: the cleanup finalizer stayed (ensure_load_balancer_deleted did not succeed)"
                )
            })
        }
        .await,
    );
    let routes = "the cloud's Nodes have routes for their pod CIDRs (NetworkUnavailable=False)";
    if config.routes {
        report.result(routes, routes_created(&nodes, config).await);
    } else {
        report.push(
            routes,
            Outcome::Skipped("the cluster configures no cloud routes (routes: false)".into()),
        );
    }
    gone_node_deleted(report, &nodes, config).await
}

/// The pod CIDRs of `node` (`spec.podCIDRs`, else `spec.podCIDR`).
fn pod_cidrs(node: &Node) -> Vec<String> {
    let spec = node.spec.clone().unwrap_or_default();
    spec.pod_cidrs
        .filter(|c| !c.is_empty())
        .or_else(|| spec.pod_cidr.map(|c| vec![c]))
        .unwrap_or_default()
}

/// Every cloud Node has a pod CIDR and the route controller's
/// `NetworkUnavailable=False` (`RouteCreated`).
async fn routes_created(nodes: &Api<Node>, config: &E2eConfig) -> Result<(), String> {
    until(config, "every cloud Node's routes", || async {
        let list = nodes
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut cloud = list.items.iter().filter(|n| !is_virtual(n)).peekable();
        if cloud.peek().is_none() {
            return Ok(Some("the cluster has no Node outside virtual nodes".into()));
        }
        for node in cloud {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            if pod_cidrs(node).is_empty() {
                return Ok(Some(format!(
                    "Node {name} has no pod CIDR (node-ipam: --allocate-node-cidrs, --cluster-cidr)"
                )));
            }
            match condition(node, NETWORK_UNAVAILABLE) {
                Some(c) if c.status == "False" && c.reason.as_deref() == Some(ROUTE_CREATED) => {}
                Some(c) => {
                    return Ok(Some(format!(
                        "Node {name} is NetworkUnavailable={} ({}): its routes were not created (create_route)",
                        c.status,
                        c.reason.as_deref().unwrap_or("no reason")
                    )));
                }
                None => {
                    return Ok(Some(format!(
                        "Node {name} has no NetworkUnavailable condition: the route controller created no route for it (list_routes / create_route)"
                    )));
                }
            }
        }
        Ok(None)
    })
    .await
}

/// The provider ID of an instance that does not exist: the configured one,
/// else a cloud Node's with its last segment replaced by the run's name.
async fn gone_provider_id(nodes: &Api<Node>, config: &E2eConfig) -> Result<String, String> {
    if let Some(id) = &config.gone_provider_id {
        return Ok(id.clone());
    }
    let list = nodes
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
    list.items
        .iter()
        .filter(|n| !is_virtual(n))
        .find_map(|n| n.spec.as_ref()?.provider_id.clone())
        .and_then(|id| {
            let cut = id.rfind('/')?;
            Some(format!("{}{}-gone", &id[..=cut], config.run))
        })
        .ok_or_else(|| {
            "no cloud Node has a provider ID to derive a vanished instance's from \
             (set gone_provider_id / --gone-provider-id)"
                .to_owned()
        })
}

/// Go's cloud-node-lifecycle contract: a Node that is not Ready and whose
/// instance does not exist is deleted. The check registers such a Node
/// itself (tainted so nothing is scheduled to it), then waits for it to go.
async fn gone_node_deleted(mut report: Report, nodes: &Api<Node>, config: &E2eConfig) -> Report {
    let name = format!("{}-gone", config.run);
    report.result(
        "a Node whose instance does not exist is deleted",
        async {
            let provider_id = gone_provider_id(nodes, config).await?;
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels(config)},
                "spec": {
                    "providerID": provider_id,
                    "taints": [
                        {"key": GONE_TAINT, "effect": "NoSchedule"},
                        {"key": GONE_TAINT, "effect": "NoExecute"},
                    ],
                },
            }))
            .map_err(|e| e.to_string())?;
            nodes
                .create(&PostParams::default(), &node)
                .await
                .map_err(|e| format!("creating the Node: {e}"))?;
            until(config, &format!("Node {name} to be deleted"), || async {
                let present = nodes
                    .get_opt(&name)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_some();
                Ok(present.then(|| {
                    format!(
                        "Node {name} ({provider_id}) still exists: the cloud-node-lifecycle \
                         controller did not delete it (instance_state / instance_exists must \
                         answer that the instance is gone)"
                    )
                }))
            })
            .await
        }
        .await,
    );
    let _ = nodes.delete(&name, &DeleteParams::default()).await;
    report
}
