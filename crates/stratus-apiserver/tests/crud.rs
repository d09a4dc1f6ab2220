//! Create / read / update / delete semantics through `kube::Client`.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, NodeSpec, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::PartialObjectMeta;
use serde_json::json;
use stratus_apiserver::ApiServer;

fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<BTreeMap<_, _>>(),
        },
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}
    }))
    .unwrap()
}

fn status_code(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn create_defaults_and_metadata() {
    let server = ApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("web", &[]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    let rv: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();
    assert!(rv > 1);
    let spec = created.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));

    // generateName.
    let mut generated = pod("", &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("worker-".into());
    let g = pods
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = g.metadata.name.unwrap();
    assert!(
        name.starts_with("worker-") && name.len() == "worker-".len() + 5,
        "{name}"
    );

    // Global revision counter: every write increases it.
    let other: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("x".into());
    let cm = other.create(&PostParams::default(), &cm).await.unwrap();
    let cm_rv: u64 = cm.metadata.resource_version.unwrap().parse().unwrap();
    assert!(cm_rv > rv);
}

#[tokio::test]
async fn create_errors() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("dup", &[]))
        .await
        .unwrap();
    let (code, reason) = status_code(
        pods.create(&PostParams::default(), &pod("dup", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));

    let missing: Api<Pod> = Api::namespaced(client.clone(), "nowhere");
    let err = missing
        .create(&PostParams::default(), &pod("p", &[]))
        .await
        .unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.is_not_found()));

    let (code, reason) = status_code(
        pods.create(&PostParams::default(), &pod("Bad_Name", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));

    let mut no_image = pod("noimage", &[]);
    no_image.spec.as_mut().unwrap().containers[0].image = None;
    let err = pods
        .create(&PostParams::default(), &no_image)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message
                    .contains("spec.containers[0].image: Required value"),
                "{}",
                s.message
            );
            let causes = s.details.unwrap().causes;
            assert_eq!(causes[0].field, "spec.containers[0].image");
        }
        other => panic!("{other:?}"),
    }

    let services: Api<Service> = Api::namespaced(client, "default");
    let svc: Service =
        serde_json::from_value(json!({"metadata": {"name": "noports"}, "spec": {}})).unwrap();
    let (code, _) = status_code(
        services
            .create(&PostParams::default(), &svc)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
}

#[tokio::test]
async fn update_concurrency_status_and_generation() {
    let server = ApiServer::start().await.unwrap();
    let nodes: Api<Node> = Api::all(server.client());
    let mut node = Node::default();
    node.metadata.name = Some("n1".into());
    node.spec = Some(NodeSpec::default());
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();

    // Stale resourceVersion → 409 Conflict.
    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.metadata.labels = Some(BTreeMap::from([("a".into(), "1".into())]));
    let updated = nodes
        .replace("n1", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(
        updated.metadata.generation, None,
        "Nodes keep no generation (as in kube-apiserver)"
    );
    stale.metadata.labels = Some(BTreeMap::from([("b".into(), "2".into())]));
    let err = nodes
        .replace("n1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.is_conflict()),
        "{err:?}"
    );

    // Main writes ignore status; status writes ignore spec.
    let mut with_status = updated.clone();
    with_status.status = Some(
        serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True"}]}))
            .unwrap(),
    );
    with_status.spec.as_mut().unwrap().unschedulable = Some(true);
    let after_main = nodes
        .replace("n1", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(
        after_main
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_none()
    );
    assert_eq!(after_main.spec.as_ref().unwrap().unschedulable, Some(true));
    assert_eq!(after_main.metadata.generation, None);

    let mut status_write = after_main.clone();
    status_write.status = with_status.status.clone();
    status_write.spec.as_mut().unwrap().unschedulable = Some(false);
    let after_status = nodes
        .replace_status("n1", &PostParams::default(), &status_write)
        .await
        .unwrap();
    assert_eq!(
        after_status.spec.unwrap().unschedulable,
        Some(true),
        "status writes keep spec"
    );
    assert_eq!(
        after_status.status.unwrap().conditions.unwrap()[0].type_,
        "Ready"
    );
    assert_eq!(after_status.metadata.generation, None);

    // Immutable providerID once set.
    let set = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": "fake://n1"}})),
        )
        .await
        .unwrap();
    assert_eq!(set.spec.unwrap().provider_id.as_deref(), Some("fake://n1"));
    let err = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": "fake://other"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("providerID")),
        "{err:?}"
    );
}

#[tokio::test]
async fn list_selectors_and_pagination() {
    let server = ApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for i in 0..7 {
        let tier = if i % 2 == 0 { "front" } else { "back" };
        pods.create(
            &PostParams::default(),
            &pod(&format!("p{i}"), &[("tier", tier), ("n", &i.to_string())]),
        )
        .await
        .unwrap();
    }
    let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect()
    };
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("tier=front"))
                .await
                .unwrap()
        ),
        ["p0", "p2", "p4", "p6"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("tier in (back),n notin (1)"))
                .await
                .unwrap()
        ),
        ["p3", "p5"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("!tier"))
                .await
                .unwrap()
        )
        .len(),
        0
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("metadata.name=p3"))
                .await
                .unwrap()
        ),
        ["p3"]
    );

    // Bind one pod; select by spec.nodeName.
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "p1",
        &PostParams::default(),
        &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"}, "target": {"kind": "Node", "name": "n9"}}),
    )
    .await
    .unwrap();
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=n9"))
                .await
                .unwrap()
        ),
        ["p1"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName!=n9,status.phase=Pending"))
                .await
                .unwrap()
        )
        .len(),
        6
    );

    // Invalid selectors are 400s; the server keeps serving.
    let err = pods
        .list(&ListParams::default().labels("tier in front"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400),
        "{err:?}"
    );
    let err = pods
        .list(&ListParams::default().fields("spec.containers=x"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 && s.message.contains("field label not supported")),
        "{err:?}"
    );

    // Pagination.
    let page1 = pods.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(page1.items.len(), 3);
    let token = page1.metadata.continue_.clone().unwrap();
    assert_eq!(page1.metadata.remaining_item_count, Some(4));
    let page2 = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    let page3 = pods
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(page2.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert!(page3.metadata.continue_.is_none());
    let all: Vec<String> = [page1, page2, page3].into_iter().flat_map(names).collect();
    assert_eq!(all, ["p0", "p1", "p2", "p3", "p4", "p5", "p6"]);

    // An expired continue token is 410.
    pods.create(&PostParams::default(), &pod("late", &[]))
        .await
        .unwrap();
    server.compact();
    let err = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 410),
        "{err:?}"
    );

    // Metadata-only lists.
    let meta: Api<PartialObjectMeta<Pod>> = Api::namespaced(server.client(), "default");
    let list = meta
        .list_metadata(&ListParams::default().labels("tier=back"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 3);
    assert!(list.items[0].metadata.uid.is_some());
}

#[tokio::test]
async fn deletion_semantics() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    // Finalizers: deletionTimestamp + MODIFIED, gone when the last finalizer goes.
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("held".into());
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let deleted = cms.delete("held", &DeleteParams::default()).await.unwrap();
    let terminating = deleted.left().expect("object, not status");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(cms.get("held").await.is_ok());
    let err = cms
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "new"]}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "no new finalizers while terminating"
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("held").await.unwrap().is_none());

    // Preconditions.
    let mut plain = ConfigMap::default();
    plain.metadata.name = Some("plain".into());
    cms.create(&PostParams::default(), &plain).await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = cms.delete("plain", &wrong).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.is_conflict()));
    cms.delete("plain", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("plain").await.unwrap().is_none());

    // Pods: unbound go at once; bound ones terminate gracefully until grace 0.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("unbound", &[]))
        .await
        .unwrap();
    pods.delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt("unbound").await.unwrap().is_none());

    let mut bound = pod("bound", &[]);
    bound.spec.as_mut().unwrap().node_name = Some("vk".into());
    bound
        .spec
        .as_mut()
        .unwrap()
        .termination_grace_period_seconds = Some(45);
    pods.create(&PostParams::default(), &bound).await.unwrap();
    pods.delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    let graceful = pods.get("bound").await.unwrap();
    assert_eq!(graceful.metadata.deletion_grace_period_seconds, Some(45));
    let uid = graceful.metadata.uid.clone().unwrap();
    let mut force = DeleteParams::default().grace_period(0);
    force.preconditions = Some(Preconditions {
        uid: Some(uid),
        resource_version: None,
    });
    pods.delete("bound", &force).await.unwrap();
    assert!(pods.get_opt("bound").await.unwrap().is_none());

    // deletecollection with a selector.
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &pod(&format!("c{i}"), &[("batch", "x")]),
        )
        .await
        .unwrap();
    }
    pods.create(&PostParams::default(), &pod("keep", &[]))
        .await
        .unwrap();
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("batch=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left, ["keep"]);

    // Owner-reference garbage collection: a Lease owned by a deleted Node goes.
    let nodes: Api<Node> = Api::all(client.clone());
    let mut node = Node::default();
    node.metadata.name = Some("owner".into());
    let node = nodes.create(&PostParams::default(), &node).await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let mut lease = Lease::default();
    lease.metadata.name = Some("owner".into());
    lease.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: "owner".into(),
        uid: node.metadata.uid.unwrap(),
        ..Default::default()
    }]);
    leases.create(&PostParams::default(), &lease).await.unwrap();
    nodes
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    assert!(leases.get_opt("owner").await.unwrap().is_none());

    // Namespaces: contents go with them; system namespaces stay.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("scratch".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let scratch: Api<ConfigMap> = Api::namespaced(client.clone(), "scratch");
    let mut inside = ConfigMap::default();
    inside.metadata.name = Some("inside".into());
    scratch
        .create(&PostParams::default(), &inside)
        .await
        .unwrap();
    namespaces
        .delete("scratch", &DeleteParams::default())
        .await
        .unwrap();
    assert!(namespaces.get_opt("scratch").await.unwrap().is_none());
    assert!(scratch.get_opt("inside").await.unwrap().is_none());
    let err = namespaces
        .delete("kube-system", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 403));
}

#[tokio::test]
async fn services_get_cluster_ips_and_node_ports() {
    let server = ApiServer::start().await.unwrap();
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}
    }))
    .unwrap();
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let spec = created.spec.unwrap();
    assert!(
        spec.cluster_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10."))
    );
    let port = &spec.ports.unwrap()[0];
    assert!(port.node_port.is_some_and(|p| (30000..=32767).contains(&p)));
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert!(spec.health_check_node_port.is_some());
    let err = services
        .patch(
            "lb",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusterIP": "10.96.200.200"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "{err:?}"
    );
    let kubernetes = services.get("kubernetes").await.unwrap();
    assert_eq!(
        kubernetes.spec.unwrap().cluster_ip.as_deref(),
        Some("10.96.0.1")
    );
}

#[tokio::test]
async fn orphan_propagation_keeps_dependents() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("owner".into());
    let owner = owners.create(&PostParams::default(), &owner).await.unwrap();
    let mut dependent = ConfigMap::default();
    dependent.metadata.name = Some("dependent".into());
    dependent.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.unwrap(),
        ..Default::default()
    }]);
    owners
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    owners
        .delete("owner", &DeleteParams::orphan())
        .await
        .unwrap();
    let kept = owners.get("dependent").await.unwrap();
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn resource_version_match_semantics() {
    use kube::api::VersionMatch;
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let current = server.revision().to_string();
    // NotOlderThan the current revision, and Exact at it, are served.
    let lp = ListParams::default()
        .at(&current)
        .matching(VersionMatch::NotOlderThan);
    assert_eq!(cms.list(&lp).await.unwrap().items.len(), 1);
    let lp = ListParams::default()
        .at(&current)
        .matching(VersionMatch::Exact);
    assert_eq!(
        cms.list(&lp)
            .await
            .unwrap()
            .metadata
            .resource_version
            .as_deref(),
        Some(current.as_str())
    );
    // "0": any version, served from the current state.
    assert_eq!(
        cms.list(&ListParams::default().at("0"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // An older exact version is gone here (the harness keeps no snapshots).
    cms.create(&PostParams::default(), &{
        let mut b = ConfigMap::default();
        b.metadata.name = Some("b".into());
        b
    })
    .await
    .unwrap();
    let err = cms
        .list(
            &ListParams::default()
                .at(&current)
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 410),
        "{err:?}"
    );
}

#[tokio::test]
async fn pod_subresources_and_immutability() {
    let server = ApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let mut p = pod("evict-me", &[]);
    p.spec.as_mut().unwrap().node_name = Some("n1".into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    // Only the image (and a few fields) may change.
    let err = pods
        .patch(
            "evict-me",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"restartPolicy": "Never"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("pod updates may not change fields")),
        "{err:?}"
    );
    pods.patch(
        "evict-me",
        &PatchParams::default(),
        &Patch::Strategic(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}}),
        ),
    )
    .await
    .unwrap();
    // Binding a bound pod is a conflict.
    let err = pods
        .create_subresource::<_, serde_json::Value>(
            "binding",
            "evict-me",
            &PostParams::default(),
            &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "evict-me"}, "target": {"name": "n2"}}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.is_conflict()),
        "{err:?}"
    );
    // Eviction is a graceful delete.
    pods.create_subresource::<_, serde_json::Value>(
        "eviction",
        "evict-me",
        &PostParams::default(),
        &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evict-me", "namespace": "default"}}),
    )
    .await
    .unwrap();
    let evicted = pods.get("evict-me").await.unwrap();
    assert!(evicted.metadata.deletion_timestamp.is_some());
    assert_eq!(evicted.metadata.deletion_grace_period_seconds, Some(30));
}

#[tokio::test]
async fn certificate_signing_request_approval() {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let server = ApiServer::start().await.unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(server.client());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "node-csr"},
        "spec": {"request": "LS0tLS1CRUdJTg==", "signerName": "kubernetes.io/kubelet-serving", "usages": ["server auth"]}
    }))
    .unwrap();
    csrs.create(&PostParams::default(), &csr).await.unwrap();
    let mut approved = csrs.get("node-csr").await.unwrap();
    approved.status = Some(
        serde_json::from_value(
            json!({"conditions": [{"type": "Approved", "status": "True", "reason": "Test"}]}),
        )
        .unwrap(),
    );
    let after = csrs
        .replace_subresource("approval", "node-csr", &PostParams::default(), &approved)
        .await
        .unwrap();
    assert_eq!(
        after.status.unwrap().conditions.unwrap()[0].type_,
        "Approved"
    );
    let err = csrs
        .patch(
            "node-csr",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"signerName": "other"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "spec is immutable: {err:?}"
    );
    let filtered = csrs
        .list(&ListParams::default().fields("spec.signerName=kubernetes.io/kubelet-serving"))
        .await
        .unwrap();
    assert_eq!(filtered.items.len(), 1);
}

#[tokio::test]
async fn secret_string_data_becomes_data() {
    use k8s_openapi::api::core::v1::Secret;
    let server = ApiServer::start().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(server.client(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "data": {"user": "YWxpY2U=", "password": "b2xk"},
        "stringData": {"password": "new"},
    }))
    .unwrap();
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    assert!(created.string_data.is_none(), "stringData is write-only");
    let data = created.data.unwrap();
    assert_eq!(data["user"].0, b"alice");
    assert_eq!(data["password"].0, b"new", "stringData wins");
    let patched = secrets
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": "t0"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["token"].0, b"t0");
}

#[tokio::test]
async fn evictions_honour_disruption_budgets() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::api::EvictParams;
    let server = ApiServer::start().await.unwrap();
    // kube retries 429 answers with back-off (as kubectl drain retries
    // evictions); this test wants to see them.
    let mut config = server.config().unwrap();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    for (name, ready) in [("web-1", true), ("web-2", true), ("web-3", false)] {
        let mut p = pod(name, &[("app", "web")]);
        p.spec.as_mut().unwrap().node_name = Some("n1".into());
        pods.create(&PostParams::default(), &p).await.unwrap();
        let status = if ready { "True" } else { "False" };
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": status}]}})),
        )
        .await
        .unwrap();
    }
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    budgets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // Two healthy pods, two needed: a healthy pod may not go.
    let err = pods
        .evict("web-1", &EvictParams::default())
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 429);
            assert_eq!(
                s.message,
                "Cannot evict pod as it would violate the pod's disruption budget."
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        pods.get("web-1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    // The unhealthy one may, the budget being met.
    pods.evict("web-3", &EvictParams::default()).await.unwrap();
    assert!(
        pods.get("web-3")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    // (A terminating pod still counts as expected: gone, it does not.)
    pods.delete("web-3", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    // A looser budget lets one healthy pod go, then no more.
    budgets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": null, "maxUnavailable": 1}})),
        )
        .await
        .unwrap();
    pods.evict("web-1", &EvictParams::default()).await.unwrap();
    let err = pods
        .evict("web-2", &EvictParams::default())
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 429));
    // Pods no budget selects are evicted freely.
    let mut other = pod("lonely", &[("app", "other")]);
    other.spec.as_mut().unwrap().node_name = Some("n1".into());
    pods.create(&PostParams::default(), &other).await.unwrap();
    pods.evict("lonely", &EvictParams::default()).await.unwrap();
}

#[tokio::test]
async fn generation_counts_spec_changes_of_kinds_that_keep_one() {
    use k8s_openapi::api::apps::v1::Deployment;
    let server = ApiServer::start().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(server.client(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let pp = PatchParams::default();
    let labelled = deployments
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1), "labels are not spec");
    let scaled = deployments
        .patch("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    let status = deployments
        .patch_status(
            "web",
            &pp,
            &Patch::Merge(json!({"status": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(status.metadata.generation, Some(2), "status is not spec");

    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("plain".into());
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(
        cm.metadata.generation, None,
        "ConfigMaps keep no generation"
    );
}

#[tokio::test]
async fn workloads_are_defaulted_and_checked() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::Job;
    let server = ApiServer::start().await.unwrap();
    let jobs: Api<Job> = Api::namespaced(server.client(), "default");
    let job: Job = serde_json::from_value(json!({"metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(
        (spec.completions, spec.parallelism, spec.backoff_limit),
        (Some(1), Some(1), Some(6))
    );
    assert_eq!(
        spec.selector.unwrap().match_labels.unwrap()["batch.kubernetes.io/controller-uid"],
        uid
    );
    assert_eq!(
        spec.template.metadata.unwrap().labels.unwrap()["job-name"],
        "once"
    );

    let deployments: Api<Deployment> = Api::namespaced(server.client(), "default");
    let bad: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .unwrap();
    match deployments
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn flow_control_objects_are_served_with_the_mandatory_configuration() {
    use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
    let server = ApiServer::start().await.unwrap();
    let schemas: Api<FlowSchema> = Api::all(server.client());
    let names: Vec<String> = schemas
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .filter_map(|f| f.metadata.name)
        .collect();
    assert_eq!(names, ["catch-all", "exempt"]);
    let levels: Api<PriorityLevelConfiguration> = Api::all(server.client());
    let exempt = levels.get("exempt").await.unwrap();
    assert_eq!(exempt.spec.type_, "Exempt");
}

/// A raw request's status and `Status` message.
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, String) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    (status, v["message"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn bad_options_are_refused_before_anything_is_written() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#;
    let base = "/api/v1/namespaces/default/configmaps";
    // kube-apiserver 1.37's answers, word for word.
    let (code, message) = raw(
        &client,
        "POST",
        &format!("{base}?dryRun=Garbage"),
        "application/json",
        cm,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        message,
        r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Garbage"]: supported values: "All""#
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(cms.get_opt("x").await.unwrap().is_none(), "nothing stored");
    let (code, message) = raw(
        &client,
        "DELETE",
        &format!("{base}?dryRun=Garbage"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 422, "{message}");
    let (code, message) = raw(
        &client,
        "GET",
        &format!("{base}?sendInitialEvents=true"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        message,
        r#"ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"#
    );
    let (code, message) = raw(
        &client,
        "GET",
        &format!("{base}?resourceVersionMatch=Exact"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 422);
    assert!(message.ends_with("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"), "{message}");
    let (code, message) = raw(
        &client,
        "PATCH",
        &format!("{base}/x"),
        "application/apply-patch+yaml",
        cm,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        message,
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    assert!(cms.get_opt("x").await.unwrap().is_none(), "nothing stored");

    // A propagation policy outside its set, in the query (even on a
    // collection) or in the body: refused, nothing deleted.
    let mut kept = ConfigMap::default();
    kept.metadata.name = Some("kept".into());
    cms.create(&PostParams::default(), &kept).await.unwrap();
    let unsupported = r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Garbage": supported values: "Foreground", "Background", "Orphan", "nil""#;
    let (code, message) = raw(
        &client,
        "DELETE",
        &format!("{base}?propagationPolicy=Garbage"),
        "application/json",
        "",
    )
    .await;
    assert_eq!((code, message.as_str()), (422, unsupported));
    let (code, message) = raw(
        &client,
        "DELETE",
        &format!("{base}/kept"),
        "application/json",
        r#"{"propagationPolicy":"Garbage"}"#,
    )
    .await;
    assert_eq!((code, message.as_str()), (422, unsupported));
    assert!(
        cms.get_opt("kept").await.unwrap().is_some(),
        "nothing deleted"
    );

    // An Accept header naming nothing served: 406, nothing written.
    let req = http::Request::post(base)
        .header("content-type", "application/json")
        .header("accept", "garbage/garbage")
        .body(kube::client::Body::from(cm.as_bytes().to_vec()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 406);
    let bytes = resp.into_body().collect_bytes().await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        v["message"],
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
    assert!(cms.get_opt("x").await.unwrap().is_none(), "nothing stored");
}

#[tokio::test]
async fn config_keys_are_validated() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let cm =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"},"data":{"bad key!":"x"}}"#;
    let (code, message) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        cm,
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        message.starts_with(r#"ConfigMap "y" is invalid: data[bad key!]: Invalid value: "bad key!": a valid config key must consist of alphanumeric characters"#),
        "{message}"
    );
    let secret = r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"ok.key-1_A":"x"}}"#;
    let (code, message) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/secrets",
        "application/json",
        secret,
    )
    .await;
    assert_eq!(code, 201, "{message}");
}

#[tokio::test]
async fn a_json_patch_tests_a_missing_member_equal_to_null() {
    // kube-runtime's finalizer() adds the first finalizer this way.
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("f".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}
    ]))
    .unwrap();
    let patched = cms
        .patch("f", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.finalizers.unwrap(),
        ["example.com/cleanup"]
    );
}

#[tokio::test]
async fn errors_in_kube_apiserver_1_37_words() {
    // Each message as kube-apiserver 1.37 answers it (`cargo xtask fidelity`).
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let base = "/api/v1/namespaces/default/configmaps";
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pc"}}"#;
    assert_eq!(
        raw(&client, "POST", base, "application/json", cm).await.0,
        201
    );
    let (code, message) = raw(
        &client,
        "DELETE",
        &format!("{base}/pc"),
        "application/json",
        r#"{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#,
    )
    .await;
    assert_eq!(code, 409);
    assert!(
        message.starts_with(r#"Operation cannot be fulfilled on ConfigMap "pc": the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record ("#),
        "{message}"
    );
    let (code, message) = raw(
        &client,
        "PATCH",
        &format!("{base}/pc"),
        "application/json-patch+json",
        r#"[{"op":"test","path":"/metadata/name","value":"x"}]"#,
    )
    .await;
    assert_eq!(
        (code, message.as_str()),
        (
            422,
            "the server rejected our request due to an error in our request"
        )
    );
    let (code, message) = raw(
        &client,
        "PATCH",
        &format!("{base}/pc"),
        "application/merge-patch+json",
        "{not json",
    )
    .await;
    assert_eq!((code, message.as_str()), (400, "invalid JSON patch"));
    let (code, message) = raw(
        &client,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        "application/json",
        r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Nonsense","metadata":{"name":"r"}}"#,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        message,
        r#"Nonsense in version "v1" cannot be handled as a Role: no kind "Nonsense" is registered for version "rbac.authorization.k8s.io/v1" in scheme "pkg/runtime/scheme.go:111""#
    );
    let (code, message) = raw(
        &client,
        "GET",
        &format!("{base}?fieldSelector=spec.nothing%3Dx"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        message,
        r#""spec.nothing" is not a known field selector: only "metadata.name", "metadata.namespace""#
    );
}

#[tokio::test]
async fn label_and_annotation_keys_are_validated_as_kube_apiserver_does() {
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let create = |metadata: serde_json::Value| {
        let cms = cms.clone();
        async move {
            let cm: ConfigMap = serde_json::from_value(json!({"metadata": metadata})).unwrap();
            cms.create(&PostParams::default(), &cm).await
        }
    };
    // Nothing stored of a refused object.
    for (metadata, expected) in [
        (
            json!({"name": "a", "labels": {"bad key!": "v"}}),
            "metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters",
        ),
        (
            json!({"name": "b", "labels": {"": "v"}}),
            "metadata.labels: Invalid value: \"\": name part must be non-empty",
        ),
        (
            json!({"name": "c", "labels": {"a/b/c": "v"}}),
            "metadata.labels: Invalid value: \"a/b/c\": a valid label key must consist of",
        ),
        (
            json!({"name": "d", "labels": {"ok": "bad value!"}}),
            "metadata.labels: Invalid value: \"bad value!\": a valid label must be an empty string or",
        ),
        (
            json!({"name": "e", "annotations": {"no good": "v"}}),
            "metadata.annotations: Invalid value: \"no good\": name part must consist of",
        ),
        (
            json!({"name": "f", "annotations": {"big": "x".repeat(262_145)}}),
            "metadata.annotations: Too long: may not be more than 262144 bytes",
        ),
    ] {
        let name = metadata["name"].as_str().unwrap().to_owned();
        let kube::Error::Api(status) = create(metadata).await.unwrap_err() else {
            panic!("{name}: not an API error")
        };
        let (code, message) = (status.code, status.message);
        assert_eq!(code, 422, "{message}");
        assert!(message.contains(expected), "{name}: {message}");
        assert!(
            cms.get_opt(&name).await.unwrap().is_none(),
            "{name} was stored"
        );
    }
    // Prefixed keys, and annotation keys in any case, are fine.
    create(json!({"name": "fine",
                  "labels": {"example.com/MyName": "my_value", "empty": ""},
                  "annotations": {"Example.COM/Some-Key": "anything at all !"}}))
    .await
    .unwrap();
}
