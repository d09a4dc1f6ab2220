//! Bad input, discovery, reviews, fault injection and the request log.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::discovery::Discovery;
use serde_json::json;
use stratus_apiserver::{ApiServer, Fault, FaultAction, ReviewUser, Verb};

async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body)
        .unwrap();
    match client.request_text(req).await {
        Ok(text) => (200, serde_json::from_str(&text).unwrap_or(json!(text))),
        Err(kube::Error::Api(s)) => (
            s.code,
            json!({"reason": s.reason, "message": s.message, "status": s.status}),
        ),
        Err(other) => panic!("transport error: {other:?}"),
    }
}

#[tokio::test]
async fn bad_input_gets_status_errors_and_the_server_keeps_serving() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, body) = raw(
        &client,
        "POST",
        path,
        "application/json",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    let (code, body) = raw(
        &client,
        "POST",
        path,
        "application/json",
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("kind"));
    let (code, _) = raw(
        &client,
        "POST",
        path,
        "application/json",
        br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = raw(&client, "POST", path, "application/json", b"[1,2]".to_vec()).await;
    assert_eq!(code, 400);
    let big = format!(
        r#"{{"metadata":{{"name":"big"}},"data":{{"k":"{}"}}}}"#,
        "x".repeat(4 * 1024 * 1024)
    );
    let (code, body) = raw(&client, "POST", path, "application/json", big.into_bytes()).await;
    assert_eq!(code, 413, "{body}");
    for (path, expected) in [
        ("/api/v1/namespaces/default/widgets", 404),
        ("/apis/example.com/v1/things", 404),
        (
            "/api/v1/namespaces/default/configmaps?labelSelector=a%20in%20b",
            400,
        ),
    ] {
        let (code, _) = raw(&client, "GET", path, "application/json", vec![]).await;
        assert_eq!(code, expected, "GET {path}");
    }
    let (code, _) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        "application/xml",
        b"{}".to_vec(),
    )
    .await;
    assert!(code == 415 || code == 404, "{code}");
    let (code, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=banana",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(code, 400);

    // Still serving.
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("fine".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test]
async fn discovery_lists_every_resource() {
    let server = ApiServer::start().await.unwrap();
    let discovery = Discovery::new(server.client()).run().await.unwrap();
    let mut kinds = Vec::new();
    for group in discovery.groups() {
        for (ar, _caps) in group.recommended_resources() {
            kinds.push(format!("{}/{}", ar.group, ar.plural));
        }
    }
    for want in [
        "/namespaces",
        "/nodes",
        "/pods",
        "/services",
        "/endpoints",
        "/configmaps",
        "/secrets",
        "/serviceaccounts",
        "/events",
        "events.k8s.io/events",
        "discovery.k8s.io/endpointslices",
        "coordination.k8s.io/leases",
        "certificates.k8s.io/certificatesigningrequests",
    ] {
        assert!(
            kinds.iter().any(|k| k == want),
            "{want} missing from {kinds:?}"
        );
    }
    let version = server.client().apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
}

#[tokio::test]
async fn token_and_access_reviews_are_configurable() {
    let server = ApiServer::start().await.unwrap();
    server.add_token(
        "good-token",
        ReviewUser {
            username: "alice".into(),
            uid: "u1".into(),
            groups: vec!["system:authenticated".into()],
        },
    );
    server.set_access_policy(|r| {
        (
            r.user == "alice" && r.verb == "get",
            "alice may read".into(),
        )
    });
    let reviews: Api<TokenReview> = Api::all(server.client());
    let review: TokenReview =
        serde_json::from_value(json!({"spec": {"token": "good-token"}})).unwrap();
    let answered = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let status = answered.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(status.user.unwrap().username.as_deref(), Some("alice"));
    let bad: TokenReview = serde_json::from_value(json!({"spec": {"token": "nope"}})).unwrap();
    assert_eq!(
        reviews
            .create(&PostParams::default(), &bad)
            .await
            .unwrap()
            .status
            .unwrap()
            .authenticated,
        Some(false)
    );

    let sars: Api<SubjectAccessReview> = Api::all(server.client());
    let ask = |verb: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": {"user": "alice", "resourceAttributes": {"verb": verb, "resource": "nodes", "subresource": "proxy"}}})).unwrap()
    };
    assert!(
        sars.create(&PostParams::default(), &ask("get"))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
    assert!(
        !sars
            .create(&PostParams::default(), &ask("create"))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn self_reviews_answer_for_the_caller() {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    use k8s_openapi::api::authorization::v1::{
        LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview,
    };
    let server = ApiServer::start().await.unwrap();
    // The kubeconfig's administrator (`kubectl auth whoami`).
    let whoami: Api<SelfSubjectReview> = Api::all(server.client());
    let me = whoami
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({})).unwrap(),
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .user_info
        .unwrap();
    assert_eq!(me.username.as_deref(), Some("kubernetes-admin"));
    assert!(me.groups.unwrap().contains(&"system:masters".to_owned()));

    // A recognised bearer token is its own user, for whoami and can-i.
    server.add_token(
        "bob-token",
        ReviewUser {
            username: "bob".into(),
            uid: "u-bob".into(),
            groups: vec!["system:authenticated".into()],
        },
    );
    server.set_access_policy(|r| (r.user == "bob" && r.verb == "list", "bob lists".into()));
    let bob = server.client_with_token("bob-token").unwrap();
    let bob_whoami: Api<SelfSubjectReview> = Api::all(bob.clone());
    let info = bob_whoami
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({})).unwrap(),
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .user_info
        .unwrap();
    assert_eq!(info.username.as_deref(), Some("bob"));
    let can_i: Api<SelfSubjectAccessReview> = Api::all(bob);
    let ask = |verb: &str| -> SelfSubjectAccessReview {
        serde_json::from_value(
            json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "pods"}}}),
        )
        .unwrap()
    };
    let allowed = |r: SelfSubjectAccessReview| r.status.unwrap().allowed;
    assert!(allowed(
        can_i
            .create(&PostParams::default(), &ask("list"))
            .await
            .unwrap()
    ));
    assert!(!allowed(
        can_i
            .create(&PostParams::default(), &ask("delete"))
            .await
            .unwrap()
    ));

    // A namespaced review must name its own namespace.
    let local: Api<LocalSubjectAccessReview> = Api::namespaced(server.client(), "default");
    let review: LocalSubjectAccessReview = serde_json::from_value(json!({"spec": {
        "user": "bob", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "other"}
    }}))
    .unwrap();
    let err = local
        .create(&PostParams::default(), &review)
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 400));

    // With a policy function, a rules review says it cannot list the rules.
    let rules: Api<SelfSubjectRulesReview> = Api::all(server.client());
    let review: SelfSubjectRulesReview =
        serde_json::from_value(json!({"spec": {"namespace": "default"}})).unwrap();
    let status = rules
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(status.incomplete);
}

#[tokio::test]
async fn aggregated_discovery_lists_every_group_in_one_document() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let groups = client.list_api_groups_aggregated().await.unwrap();
    let name = |g: &kube::core::discovery::v2::APIGroupDiscovery| {
        g.metadata
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default()
    };
    let apps = groups
        .items
        .iter()
        .find(|g| name(g) == "apps")
        .expect("apps");
    let deployments = apps.versions[0]
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("deployments"))
        .expect("deployments");
    assert_eq!(deployments.scope.as_deref(), Some("Namespaced"));
    assert_eq!(deployments.short_names, ["deploy"]);
    let scale = deployments
        .subresources
        .iter()
        .find(|s| s.subresource.as_deref() == Some("scale"))
        .expect("deployments/scale");
    let kind = scale.response_kind.as_ref().unwrap();
    assert_eq!(
        (kind.group.as_deref(), kind.kind.as_deref()),
        (Some("autoscaling"), Some("Scale"))
    );
    let core = client.list_core_api_versions_aggregated().await.unwrap();
    assert!(core.items[0].versions[0].resources.iter().any(|r| {
        r.resource.as_deref() == Some("pods") && r.scope.as_deref() == Some("Namespaced")
    }));
    // kube-rs's discovery from the aggregated documents finds what the
    // legacy walk finds.
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    let legacy = Discovery::new(client).run().await.unwrap();
    let names = |d: &Discovery| -> Vec<String> {
        let mut names: Vec<String> = d.groups().map(|g| g.name().to_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(names(&aggregated), names(&legacy));
}

#[tokio::test]
async fn faults_and_request_log() {
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    server.clear_requests();
    server.inject(
        Fault::new(
            Some(Verb::List),
            Some("configmaps"),
            FaultAction::Throttle {
                retry_after_secs: 1,
            },
        )
        .times(1),
    );
    let err = cms.list(&ListParams::default()).await;
    // kube retries 429s on its own (server_retry); either it surfaced, or it retried and succeeded.
    if let Err(e) = &err {
        assert!(matches!(e, kube::Error::Api(s) if s.code == 429), "{e:?}");
    }
    let statuses: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.verb == Verb::List)
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses.first(), Some(&429));

    server.inject(Fault::new(Some(Verb::Create), None, FaultAction::Error(500)).times(1));
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("c".into());
    let err = cms.create(&PostParams::default(), &cm).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 500),
        "{err:?}"
    );
    cms.create(&PostParams::default(), &cm).await.unwrap();

    server.inject(
        Fault::new(
            Some(Verb::Get),
            None,
            FaultAction::Latency(Duration::from_millis(200)),
        )
        .times(1),
    );
    let started = std::time::Instant::now();
    cms.get("c").await.unwrap();
    let returned = std::time::Instant::now();
    assert!(started.elapsed() >= Duration::from_millis(200));
    // The slow GET is logged with its latency and the moment it was answered.
    let slow = server
        .requests()
        .into_iter()
        .rfind(|r| r.verb == Verb::Get && r.status == 200)
        .unwrap();
    assert!(slow.latency >= Duration::from_millis(200), "{slow:?}");
    assert!(
        slow.answered_at >= started + Duration::from_millis(200) && slow.answered_at <= returned,
        "{slow:?}"
    );

    server.pause(Duration::from_millis(300));
    let (code, _) = {
        let req = http::Request::get("/api/v1/namespaces/default/configmaps/c")
            .body(vec![])
            .unwrap();
        match server.client().request_text(req).await {
            Ok(_) => (200, ()),
            Err(kube::Error::Api(s)) => (s.code, ()),
            Err(e) => panic!("{e:?}"),
        }
    };
    assert!(code == 503 || code == 200, "{code}");
    tokio::time::sleep(Duration::from_millis(350)).await;
    cms.get("c").await.unwrap();

    let counts = server.request_counts();
    assert!(counts[&Verb::Create] >= 2);
    let record = server
        .requests()
        .into_iter()
        .find(|r| r.verb == Verb::Get && r.status == 200)
        .unwrap();
    assert_eq!(record.resource, "configmaps");
    assert_eq!(record.namespace.as_deref(), Some("default"));
    assert_eq!(record.name.as_deref(), Some("c"));
}

#[tokio::test]
async fn tls_with_the_exported_ca() {
    let server = ApiServer::builder().tls().start().await.unwrap();
    assert!(server.url().starts_with("https://127.0.0.1:"));
    assert!(
        server
            .ca_pem()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    assert!(server.kubeconfig().contains("certificate-authority-data: "));
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("over-tls".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    assert!(cms.get("over-tls").await.is_ok());
    // A client that does not trust the CA is refused.
    let mut untrusting = kube::Config::new(server.url().parse().unwrap());
    untrusting.root_cert = None;
    let client = kube::Client::try_from(untrusting).unwrap();
    assert!(client.apiserver_version().await.is_err());
}

#[tokio::test]
async fn http2_with_prior_knowledge() {
    use http_body_util::BodyExt;
    let server = ApiServer::start().await.unwrap();
    let stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(format!("{}/api/v1/namespaces", server.url()))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "NamespaceList");
}
