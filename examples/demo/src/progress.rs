//! The demo's progress: what it measures of the cluster and how it draws it.

use super::*;

fn bar(done: usize, total: usize) -> String {
    const WIDTH: usize = 24;
    let filled = (done * WIDTH)
        .checked_div(total)
        .unwrap_or(WIDTH)
        .min(WIDTH);
    format!("[{}{}]", "#".repeat(filled), ".".repeat(WIDTH - filled))
}

pub(super) struct Progress {
    pub(super) virtual_pods_running: usize,
    pub(super) registered: usize,
    pub(super) initialized: usize,
    pub(super) ready: usize,
    pub(super) leases: usize,
    pub(super) allocated: usize,
    pub(super) provisioned: usize,
}

pub(super) async fn measure(client: &kube::Client) -> Result<Progress, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let services: Api<Service> = Api::namespaced(client.clone(), "demo");
    let node_list = nodes
        .list(&ListParams::default().labels("stratus.dev/demo=true"))
        .await?;
    let ready = node_list
        .items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    let leases = leases.list(&ListParams::default()).await?.items.len();
    let service_list = services.list(&ListParams::default()).await?;
    let allocated = service_list
        .items
        .iter()
        .filter(|s| {
            s.spec.as_ref().is_some_and(|spec| {
                spec.cluster_ip.is_some()
                    && spec
                        .ports
                        .as_ref()
                        .is_some_and(|p| p.iter().all(|p| p.node_port.is_some()))
            })
        })
        .count();
    let provisioned = service_list
        .items
        .iter()
        .filter(|s| {
            s.status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .is_some_and(|i| !i.is_empty())
        })
        .count();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "demo");
    let virtual_pods_running = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={VIRTUAL_NODE}")))
        .await?
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count();
    Ok(Progress {
        virtual_pods_running,
        registered: node_list.items.len(),
        initialized: node_list
            .items
            .iter()
            .filter(|n| {
                n.spec.as_ref().is_some_and(|s| {
                    s.provider_id.is_some()
                        && !s.taints.as_ref().is_some_and(|t| {
                            t.iter()
                                .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
                        })
                })
            })
            .count(),
        ready,
        leases,
        allocated,
        provisioned,
    })
}

pub(super) fn render(p: &Progress, args: &Args) -> Vec<String> {
    vec![
        format!(
            "{} nodes registered    {}/{}",
            bar(p.registered, args.nodes),
            p.registered,
            args.nodes
        ),
        format!(
            "{} nodes Ready         {}/{}",
            bar(p.ready, args.nodes),
            p.ready,
            args.nodes
        ),
        format!(
            "{} nodes initialized   {}/{}",
            bar(p.initialized, args.nodes),
            p.initialized,
            args.nodes
        ),
        format!(
            "{} node leases         {}/{}",
            bar(p.leases.min(args.nodes), args.nodes),
            p.leases.min(args.nodes),
            args.nodes
        ),
        format!(
            "{} services allocated  {}/{}",
            bar(p.allocated, args.services),
            p.allocated,
            args.services
        ),
        format!(
            "{} load balancers      {}/{}",
            bar(p.provisioned, args.services),
            p.provisioned,
            args.services
        ),
        format!(
            "{} virtual-node pods   {}/{}",
            bar(p.virtual_pods_running, args.pods),
            p.virtual_pods_running,
            args.pods
        ),
    ]
}
