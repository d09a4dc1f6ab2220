//! Churn: 500 pods created and a third of them deleted in random order
//! while both API servers fail some requests, drop their watches, the
//! remote one pauses and the offload node restarts; then the two clusters
//! must agree (one remote pod per home pod, each home pod Running, nothing
//! left over) and deleting everything must leave both empty, nothing stuck
//! Terminating.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use stratus_provider_kubernetes::naming::HOME_UID_LABEL;
use stratus_testing::{ApiServer, Fault, FaultAction, Verb, poll};

/// A small deterministic generator (a 64-bit LCG): the same run each time.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }
}

/// A fault failing `rate` of the matching requests with `code`, at most
/// `times` of them.
fn failing(verb: Option<Verb>, resource: &str, code: u16, rate: f64, times: u64) -> Fault {
    Fault {
        rate,
        times: Some(times),
        ..Fault::new(verb, Some(resource), FaultAction::Error(code))
    }
}

/// The home pods: name → (uid, phase, terminating).
async fn home_state(pods: &Api<Pod>) -> BTreeMap<String, (String, String, bool)> {
    pods.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| {
            let status = p.status.and_then(|s| s.phase).unwrap_or_default();
            Some((
                p.metadata.name?,
                (
                    p.metadata.uid?,
                    status,
                    p.metadata.deletion_timestamp.is_some(),
                ),
            ))
        })
        .collect()
}

/// The home UIDs of the remote pods the node made, with how many remote
/// pods stand for each.
async fn remote_uids(remote: &Remote) -> BTreeMap<String, usize> {
    let mut uids = BTreeMap::new();
    for p in remote.offloaded().await {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let uid = p
            .metadata
            .labels
            .and_then(|l| l.get(HOME_UID_LABEL).cloned())
            .unwrap_or_default();
        *uids.entry(uid).or_default() += 1;
    }
    uids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_with_faults_and_restarts_ends_with_both_clusters_in_agreement() {
    let remote = Remote::start().await;
    let api = ApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let start_home = async || Home::default_for(&api, &remote).await;
    let mut home = Some(start_home().await);
    // Faults on both sides for the whole churn: remote pod creates and
    // deletes, home status writes and pod deletions by the node.
    let remote_server = remote.cluster.server();
    remote_server.inject(failing(Some(Verb::Create), "pods", 500, 0.05, 40));
    remote_server.inject(failing(Some(Verb::Delete), "pods", 503, 0.05, 20));
    remote_server.inject(Fault {
        rate: 0.05,
        ..Fault::new(
            None,
            Some("pods"),
            FaultAction::Latency(Duration::from_millis(50)),
        )
    });
    api.inject(failing(Some(Verb::Patch), "pods/status", 500, 0.05, 40));
    api.inject(failing(Some(Verb::Delete), "pods", 503, 0.02, 10));

    let mut rng = Lcg(0x0ff1_0ad5);
    let mut alive: BTreeSet<String> = BTreeSet::new();
    let mut deleted = 0;
    for round in 0..5 {
        for i in 0..100 {
            let name = format!("c{round}-{i}");
            let mut pod = simple(&name);
            if let Some(spec) = pod.spec.as_mut() {
                spec.termination_grace_period_seconds = Some(rng.below(3) as i64);
            }
            create(&pods, pod).await;
            alive.insert(name);
        }
        // A third of this round's count, chosen among every live pod.
        for _ in 0..33 {
            let names: Vec<&String> = alive.iter().collect();
            let name = names[rng.below(names.len())].clone();
            let grace = rng.below(2) as i64;
            pods.delete(&name, &DeleteParams::default().grace_period(grace as u32))
                .await
                .unwrap();
            alive.remove(&name);
            deleted += 1;
        }
        match round {
            1 => {
                // The node restarts while pods are created and deleted.
                if let Some(h) = home.take() {
                    h.stop().await;
                }
                for i in 0..20 {
                    let name = format!("away-{i}");
                    create(&pods, simple(&name)).await;
                    alive.insert(name);
                }
                let names: Vec<String> = alive.iter().take(10).cloned().collect();
                for name in names {
                    pods.delete(&name, &DeleteParams::default()).await.unwrap();
                    alive.remove(&name);
                    deleted += 1;
                }
                home = Some(start_home().await);
            }
            2 => {
                remote_server.drop_watches();
                api.drop_watches();
            }
            3 => remote_server.pause(Duration::from_secs(3)),
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(alive.len() + deleted >= 500);
    let hit = remote_server.answered(Some(Verb::Create), "pods", 500)
        + api.answered(Some(Verb::Patch), "pods/status", 500);
    assert!(hit > 0, "no injected fault was hit");
    eprintln!(
        "{hit} injected errors answered; {} pods live, {deleted} deleted",
        alive.len()
    );
    remote_server.clear_faults();
    api.clear_faults();

    // Agreement: every live home pod Running with exactly one remote pod,
    // no remote pod for anything else, nothing Terminating at home.
    let agreed = async || {
        let home_pods = home_state(&pods).await;
        let uids = remote_uids(&remote).await;
        let names: BTreeSet<String> = home_pods.keys().cloned().collect();
        let running = home_pods
            .values()
            .filter(|(_, p, _)| p == "Running")
            .count();
        let terminating = home_pods.values().filter(|(_, _, t)| *t).count();
        let matched = home_pods
            .values()
            .filter(|(uid, _, _)| uids.get(uid) == Some(&1))
            .count();
        let remote_count: usize = uids.values().sum();
        let agree = names == alive
            && running == alive.len()
            && terminating == 0
            && matched == alive.len()
            && remote_count == alive.len();
        (!agree).then(|| {
            format!(
                "{} home pods ({} expected), {running} Running, {terminating} Terminating, \
                 {remote_count} remote pods, {matched} matched",
                home_pods.len(),
                alive.len(),
            )
        })
    };
    poll("the two clusters to agree", Duration::from_secs(180))
        .every(Duration::from_millis(500))
        .until(agreed)
        .await
        .unwrap();

    // Everything deleted: both clusters empty, nothing stuck.
    for name in &alive {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually(
        "both clusters empty",
        Duration::from_secs(120),
        async || home_state(&pods).await.is_empty() && remote.offloaded().await.is_empty(),
    )
    .await;
    drop(home);
}
