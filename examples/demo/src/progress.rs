//! The demo's progress: what it measures of the cluster and how it draws it.

use super::*;

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

/// The demo's counts, each with what it counts and its goal.
fn counts(p: &Progress, args: &Args) -> [(&'static str, usize, usize); 7] {
    [
        ("nodes registered", p.registered, args.nodes),
        ("nodes Ready", p.ready, args.nodes),
        ("nodes initialized", p.initialized, args.nodes),
        ("node leases", p.leases.min(args.nodes), args.nodes),
        ("services allocated", p.allocated, args.services),
        ("load balancers", p.provisioned, args.services),
        ("virtual-node pods", p.virtual_pods_running, args.pods),
    ]
}

/// The counts as plain lines, for output that is not a terminal.
pub(super) fn render(p: &Progress, args: &Args) -> Vec<String> {
    counts(p, args)
        .iter()
        .map(|(what, done, total)| format!("{what:<20} {done}/{total}"))
        .collect()
}

/// The counts as progress bars while the demo waits: drawn on a terminal,
/// hidden elsewhere (the demo then prints [`render`]'s lines once).
pub(super) struct Bars {
    multi: indicatif::MultiProgress,
    bars: Vec<indicatif::ProgressBar>,
}

impl Bars {
    /// One bar a count, on standard output.
    pub(super) fn new() -> Self {
        let multi =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stdout());
        let style = indicatif::ProgressStyle::with_template("[{bar:24}] {msg:<20} {pos}/{len}")
            .map(|s| s.progress_chars("#>."))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        let bars = (0..7)
            .map(|_| multi.add(indicatif::ProgressBar::new(0).with_style(style.clone())))
            .collect();
        Self { multi, bars }
    }

    /// Whether the bars are drawn (standard output is a terminal).
    pub(super) fn drawn(&self) -> bool {
        !self.multi.is_hidden()
    }

    /// Show `p`'s counts.
    pub(super) fn update(&self, p: &Progress, args: &Args) {
        for (bar, (what, done, total)) in self.bars.iter().zip(counts(p, args)) {
            bar.set_message(what);
            bar.set_length(total as u64);
            bar.set_position(done.min(total) as u64);
        }
    }

    /// Leave the last bars on the screen.
    pub(super) fn finish(&self) {
        for bar in &self.bars {
            bar.abandon();
        }
    }
}
