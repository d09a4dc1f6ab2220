//! RBAC through `kube::Client`: the administrator, anonymous callers, unknown
//! tokens, a ServiceAccount's token from TokenRequest bound by a Role, access
//! reviews answered from the bindings, and the request log's 403s.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview};
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SubjectAccessReview};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
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
async fn rbac_serves_https_and_reviews_the_kubeconfig_token_as_the_administrator() {
    let server = ApiServer::builder().rbac().start().await.unwrap();
    // kubectl (client-go) sends a kubeconfig's token only over TLS: with
    // RBAC on, the harness serves HTTPS so its clients are not anonymous.
    assert!(server.url().starts_with("https://"), "{}", server.url());
    assert!(server.kubeconfig().contains("certificate-authority-data"));

    let reviews: Api<TokenReview> = Api::all(server.client());
    let kubeconfig = server.kubeconfig();
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("the kubeconfig carries a token")
        .trim_matches('"');
    let review: TokenReview = serde_json::from_value(json!({"spec": {"token": token}})).unwrap();
    let status = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.authenticated, Some(true), "{:?}", status.error);
    let user = status.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("kubernetes-admin"));
    assert_eq!(
        user.groups.unwrap_or_default(),
        ["system:masters", "system:authenticated"]
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

/// A client that presents a client certificate for `user` in `groups`
/// (signed by the server's client CA) and no token.
fn certificate_client(server: &ApiServer, user: &str, groups: &[&str]) -> Client {
    use base64::Engine as _;
    let (cert, key) = server.issue_client_certificate(user, groups).unwrap();
    let mut config = server.config().unwrap();
    config.auth_info.token = None;
    config.auth_info.client_certificate_data =
        Some(base64::engine::general_purpose::STANDARD.encode(cert));
    config.auth_info.client_key_data =
        Some(base64::engine::general_purpose::STANDARD.encode(key).into());
    Client::try_from(config).unwrap()
}

async fn self_subject(client: &Client) -> serde_json::Value {
    let req = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1",
                "kind": "SelfSubjectReview"}))
            .unwrap(),
        )
        .unwrap();
    let text = client.request_text(req).await.unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["status"]["userInfo"].clone()
}

#[tokio::test]
async fn client_certificates_authenticate_their_subject() {
    let server = ApiServer::builder().tls().rbac().start().await.unwrap();
    let alice = certificate_client(&server, "alice", &["devs"]);
    let who = self_subject(&alice).await;
    assert_eq!(who["username"], "alice");
    assert_eq!(who["groups"], json!(["devs", "system:authenticated"]));
    let pods: Api<Pod> = Api::namespaced(alice.clone(), "default");
    let (code, message) = api_error(pods.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    // Bound through her certificate's organization.
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(server.client());
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "devs-view"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    pods.list(&ListParams::default()).await.unwrap();
    // The administrator's certificate (system:masters) may do anything.
    let root = certificate_client(&server, "root", &["system:masters"]);
    Api::<Namespace>::all(root)
        .list(&ListParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb() {
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let token = robot_token(&server).await;
    // The administrator may act as anyone.
    let mut config = server.config().unwrap();
    config.auth_info.impersonate = Some("bob".into());
    config.auth_info.impersonate_groups = Some(vec!["qa".into()]);
    let as_bob = Client::try_from(config).unwrap();
    let who = self_subject(&as_bob).await;
    assert_eq!(who["username"], "bob");
    assert_eq!(who["groups"], json!(["qa", "system:authenticated"]));
    let (code, _) = api_error(
        Api::<Pod>::namespaced(as_bob, "default")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403, "bob holds no binding");

    // The robot may not impersonate.
    let mut config = server.config().unwrap();
    config.auth_info.token = Some(token.into());
    config.auth_info.impersonate = Some("bob".into());
    let robot_as_bob = Client::try_from(config).unwrap();
    let (code, message) = api_error(
        Api::<Pod>::namespaced(robot_as_bob.clone(), "team")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    // kube-apiserver 1.37 reports the first impersonation mode it tried:
    // constrained impersonation's `impersonate-on:<mode>:<verb>`.
    assert_eq!(
        message,
        "pods is forbidden: User \"system:serviceaccount:team:robot\" cannot impersonate-on:user-info:list resource \"pods\" in API group \"\" in the namespace \"team\""
    );

    // Constrained impersonation: allowed to list pods as bob, and only that.
    let admin = server.client();
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "list-pods-as-bob"},
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["impersonate-on:user-info:list"]},
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["users"], "resourceNames": ["bob"], "verbs": ["impersonate:user-info"]}
                ]}))
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "robot-as-bob"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "list-pods-as-bob"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    let (code, message) = api_error(
        Api::<Pod>::namespaced(robot_as_bob.clone(), "team")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403, "impersonated, then bob may not list pods");
    assert!(
        message.starts_with("pods is forbidden: User \"bob\" cannot list"),
        "{message}"
    );
    let (code, message) = api_error(
        Api::<Pod>::namespaced(robot_as_bob, "team")
            .get("x")
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("cannot impersonate-on:user-info:get"),
        "{message}"
    );
}

#[tokio::test]
async fn roles_and_bindings_cannot_grant_more_than_their_writer_holds() {
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let token = robot_token(&server).await;
    let admin = server.client();
    // The robot may manage Roles and RoleBindings in its namespace.
    Api::<Role>::namespaced(admin.clone(), "team")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "rbac-manager"},
                "rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
                    "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "update"]}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "team")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "robot-rbac"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rbac-manager"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    let robot = client_with(&server, Some(&token));
    let roles: Api<Role> = Api::namespaced(robot.clone(), "team");
    let role = |name: &str, verbs: &[&str]| -> Role {
        serde_json::from_value(json!({"metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]}))
        .unwrap()
    };
    // What it holds (get/list/watch pods) it may grant.
    roles
        .create(&PostParams::default(), &role("readers", &["get", "list"]))
        .await
        .unwrap();
    let (code, message) = api_error(
        roles
            .create(
                &PostParams::default(),
                &role("deleters", &["get", "delete"]),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "roles.rbac.authorization.k8s.io \"deleters\" is forbidden: user \"system:serviceaccount:team:robot\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:team\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"delete\"]}"
    );
    // Binding cluster-admin needs its permissions or `bind`.
    let bindings: Api<RoleBinding> = Api::namespaced(robot, "team");
    let (code, message) = api_error(
        bindings
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "grab"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]}))
                .unwrap(),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("attempting to grant RBAC permissions not currently held"),
        "{message}"
    );
    // With `escalate` it may grant more.
    Api::<Role>::namespaced(admin, "team")
        .replace(
            "rbac-manager",
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "rbac-manager"},
                "rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
                    "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "update", "escalate"]}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    roles
        .create(
            &PostParams::default(),
            &role("deleters", &["get", "delete"]),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn service_account_tokens_are_jwts_the_issuer_publishes_keys_for() {
    use base64::Engine as _;
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let token = robot_token(&server).await;
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "{token}");
    let decode = |p: &str| -> serde_json::Value {
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .unwrap(),
        )
        .unwrap()
    };
    let (header, claims) = (decode(parts[0]), decode(parts[1]));
    assert_eq!(header["alg"], "ES256");
    assert_eq!(claims["sub"], "system:serviceaccount:team:robot");
    assert_eq!(
        claims["iss"],
        "https://kubernetes.default.svc.cluster.local"
    );
    assert_eq!(claims["kubernetes.io"]["namespace"], "team");
    let admin = server.client();
    let get = |path: &'static str| {
        let admin = admin.clone();
        async move {
            let text = admin
                .request_text(http::Request::get(path).body(Vec::new()).unwrap())
                .await
                .unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        }
    };
    let jwks = get("/openid/v1/jwks").await;
    assert_eq!(jwks["keys"][0]["kid"], header["kid"]);
    assert_eq!(jwks["keys"][0]["crv"], "P-256");
    let discovery = get("/.well-known/openid-configuration").await;
    assert_eq!(discovery["issuer"], claims["iss"]);
    // The token still authenticates its ServiceAccount.
    let robot = client_with(&server, Some(&token));
    let who = self_subject(&robot).await;
    assert_eq!(who["username"], "system:serviceaccount:team:robot");
}
