//! RBAC through `kube::Client`: the administrator, anonymous callers, unknown
//! tokens, a ServiceAccount's token from TokenRequest bound by a Role, access
//! reviews answered from the bindings, and the request log's 403s.

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SubjectAccessReview};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use stratus_apiserver::{ApiServer, Verb};

fn client_with(server: &ApiServer, token: Option<&str>) -> Client {
    let mut config = server.config().unwrap();
    config.auth_info.token = token.map(|t| t.to_owned().into());
    Client::try_from(config).unwrap()
}

fn api_error(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn robot_token(server: &ApiServer) -> String {
    let admin = server.client();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "team");
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap(),
        )
        .await
        .unwrap();
    let roles: Api<Role> = Api::namespaced(admin.clone(), "team");
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "pod-reader"},
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get"]}
                ]
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "team");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "robot-reads-pods"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot"}]
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let request: TokenRequest = serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    accounts
        .create_token_request("robot", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .expect("a token")
}

#[tokio::test]
async fn the_administrator_and_the_bootstrap_roles() {
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let pods: Api<Pod> = Api::all(server.client());
    pods.list(&ListParams::default()).await.unwrap();
    let roles: Api<ClusterRole> = Api::all(server.client());
    for name in [
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "view",
        "edit",
        "admin",
    ] {
        assert!(roles.get_opt(name).await.unwrap().is_some(), "{name}");
    }
    // Without RBAC the server starts with no roles at all.
    let plain = ApiServer::start().await.unwrap();
    let plain_roles: Api<ClusterRole> = Api::all(plain.client());
    assert!(
        plain_roles
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn anonymous_and_unknown_callers() {
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let anonymous = client_with(&server, None);
    let (code, message) = api_error(
        Api::<Pod>::namespaced(anonymous.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default""#
    );
    // Health is public; discovery is for the authenticated.
    let health: String = anonymous
        .request_text(http::Request::get("/healthz").body(Vec::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(health, "ok");
    anonymous.apiserver_version().await.unwrap();
    let discovery = anonymous
        .request::<serde_json::Value>(http::Request::get("/apis").body(Vec::new()).unwrap())
        .await
        .unwrap_err();
    assert_eq!(api_error(discovery).0, 403);
    let unknown = client_with(&server, Some("no-such-token"));
    let (code, _) = api_error(
        Api::<Pod>::all(unknown)
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 401);
}

#[tokio::test]
async fn a_service_account_may_do_what_its_role_allows() {
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let token = robot_token(&server).await;
    let robot = client_with(&server, Some(&token));
    Api::<Pod>::namespaced(robot.clone(), "team")
        .list(&ListParams::default())
        .await
        .unwrap();
    let (code, message) = api_error(
        Api::<Pod>::namespaced(robot.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        message.contains(r#"User "system:serviceaccount:team:robot" cannot list resource "pods""#),
        "{message}"
    );
    // resourceNames: only the named ConfigMap.
    let admin_cms: Api<ConfigMap> = Api::namespaced(server.client(), "team");
    for name in ["settings", "secret-ish"] {
        admin_cms
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
    }
    let robot_cms: Api<ConfigMap> = Api::namespaced(robot.clone(), "team");
    robot_cms.get("settings").await.unwrap();
    assert_eq!(
        api_error(robot_cms.get("secret-ish").await.unwrap_err()).0,
        403
    );
    // Discovery works for any authenticated caller.
    kube::discovery::Discovery::new(robot.clone())
        .run()
        .await
        .unwrap();

    // Reviews answer from the same bindings.
    let ask = |verb: &str, ns: &str| -> SelfSubjectAccessReview {
        serde_json::from_value(json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "pods", "namespace": ns}}}))
            .unwrap()
    };
    let can_i: Api<SelfSubjectAccessReview> = Api::all(robot.clone());
    let allowed = |r: SelfSubjectAccessReview| r.status.unwrap().allowed;
    assert!(allowed(
        can_i
            .create(&PostParams::default(), &ask("list", "team"))
            .await
            .unwrap()
    ));
    assert!(!allowed(
        can_i
            .create(&PostParams::default(), &ask("delete", "team"))
            .await
            .unwrap()
    ));
    let sars: Api<SubjectAccessReview> = Api::all(server.client());
    let review: SubjectAccessReview = serde_json::from_value(json!({"spec": {
        "user": "system:serviceaccount:team:robot",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "team", "name": "x"}
    }}))
    .unwrap();
    assert!(
        sars.create(&PostParams::default(), &review)
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );

    // The request log names the forbidden requests, so a test can fail on any.
    let forbidden: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .collect();
    assert_eq!(forbidden.len(), 2, "{forbidden:#?}");
    assert!(
        forbidden
            .iter()
            .all(|r| r.user == "system:serviceaccount:team:robot")
    );
    assert!(
        forbidden
            .iter()
            .any(|r| r.verb == Verb::List && r.resource == "pods")
    );
}
