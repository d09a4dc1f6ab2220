//! Delegated authentication and authorization on the admin server, with
//! the harness API server answering TokenReviews and SubjectAccessReviews:
//! open health paths, 401 and 403, client certificates, tokens, caching.

use std::sync::Arc;
use stratus_testing::http_status::get;

use stratus_runtime::admin::AdminServer;
use stratus_runtime::auth::{DelegatedAuth, DelegatedAuthConfig};
use stratus_runtime::health::HealthChecks;
use stratus_runtime::tls::{CertificateAuthority, self_signed};
use stratus_testing::{ApiServer, ReviewUser, Verb};

struct Admin {
    addr: std::net::SocketAddr,
    ca: Vec<u8>,
    _stop: tokio::sync::watch::Sender<bool>,
}

impl Admin {
    async fn start(auth: DelegatedAuth, client_ca: &str) -> Self {
        let certificate = self_signed("auth-test", &["localhost"]).unwrap();
        let ca = certificate.ca_der.clone();
        let server = AdminServer::builder("127.0.0.1:0".parse().unwrap())
            .certificate(certificate)
            .health(HealthChecks::new())
            .registry(Arc::new(prometheus_client::registry::Registry::default()))
            .auth(auth)
            .client_ca(client_ca)
            .bind()
            .await
            .unwrap();
        let addr = server.local_addr();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(server.serve(stopped));
        Self {
            addr,
            ca,
            _stop: stop,
        }
    }

    fn client(&self, token: Option<&str>, identity: Option<(String, String)>) -> kube::Client {
        let mut config = kube::Config::new(format!("https://{}", self.addr).parse().unwrap());
        config.root_cert = Some(vec![self.ca.clone()]);
        if let Some(token) = token {
            config.auth_info.token = Some(token.to_string().into());
        }
        if let Some((cert, key)) = identity {
            config.auth_info.client_certificate_data = Some(base64_std(cert.as_bytes()));
            config.auth_info.client_key_data = Some(base64_std(key.as_bytes()).into());
        }
        kube::Client::try_from(config).unwrap()
    }
}

fn base64_std(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn health_is_open_metrics_need_an_allowed_identity() {
    let api = ApiServer::start().await.unwrap();
    api.add_token(
        "prom-token",
        ReviewUser {
            username: "system:serviceaccount:monitoring:prometheus".into(),
            uid: "u-1".into(),
            groups: vec!["system:serviceaccounts".into()],
        },
    );
    // Only Prometheus and Bob may read /metrics.
    api.set_access_policy(|r| {
        let allowed = r.path == "/metrics"
            && r.verb == "get"
            && (r.user.ends_with(":prometheus") || r.user == "bob");
        (
            allowed,
            if allowed {
                "allowed".into()
            } else {
                "no RBAC rule".into()
            },
        )
    });
    let clients_ca = CertificateAuthority::new("client-ca").unwrap();
    let admin = Admin::start(
        DelegatedAuth::new(api.client(), DelegatedAuthConfig::default()),
        clients_ca.ca_pem(),
    )
    .await;

    let anonymous = admin.client(None, None);
    assert_eq!(get(&anonymous, "/healthz").await, (200, "ok".into()));
    assert_eq!(get(&anonymous, "/livez").await.0, 200);
    let (code, body) = get(&anonymous, "/metrics").await;
    assert_eq!(code, 403);
    assert!(
        body.contains(
            r#"forbidden: User "system:anonymous" cannot get path "/metrics": no RBAC rule"#
        ),
        "{body}"
    );
    assert_eq!(
        get(&anonymous, "/healthz/leaderElection").await.0,
        403,
        "sub-paths are not open"
    );

    let prometheus = admin.client(Some("prom-token"), None);
    assert_eq!(get(&prometheus, "/metrics").await.0, 200);
    assert_eq!(get(&prometheus, "/metrics").await.0, 200);
    assert_eq!(
        api.answered(Some(Verb::Create), "tokenreviews", 201),
        1,
        "the token review is cached"
    );
    let (code, _) = get(&prometheus, "/configz").await;
    assert_eq!(code, 403);
    let (code, body) = get(&admin.client(Some("stolen"), None), "/metrics").await;
    assert_eq!(code, 401);
    assert!(body.contains("invalid bearer token"), "{body}");

    // Client certificates: the subject names the user and groups.
    let bob = admin.client(
        None,
        Some(clients_ca.issue_client("bob", &["dev"]).unwrap()),
    );
    assert_eq!(get(&bob, "/metrics").await.0, 200);
    assert_eq!(get(&bob, "/configz").await.0, 403);
    let root = admin.client(
        None,
        Some(
            clients_ca
                .issue_client("admin", &["system:masters"])
                .unwrap(),
        ),
    );
    let reviews = api.answered(Some(Verb::Create), "subjectaccessreviews", 201);
    assert_eq!(get(&root, "/configz").await.0, 200);
    assert_eq!(
        api.answered(Some(Verb::Create), "subjectaccessreviews", 201),
        reviews,
        "system:masters needs no review"
    );
    // A certificate from another CA is refused by TLS.
    let other_ca = CertificateAuthority::new("other").unwrap();
    let mallory = admin.client(
        None,
        Some(other_ca.issue_client("admin", &["system:masters"]).unwrap()),
    );
    let request = http::Request::get("/configz").body(Vec::new()).unwrap();
    assert!(mallory.request_text(request).await.is_err());
}

#[tokio::test]
async fn without_anonymous_access_credentials_are_required() {
    let api = ApiServer::start().await.unwrap();
    let config = DelegatedAuthConfig {
        anonymous: false,
        ..Default::default()
    };
    let ca = CertificateAuthority::new("client-ca").unwrap();
    let admin = Admin::start(DelegatedAuth::new(api.client(), config), ca.ca_pem()).await;
    let anonymous = admin.client(None, None);
    assert_eq!(get(&anonymous, "/readyz").await.0, 200);
    let (code, body) = get(&anonymous, "/metrics").await;
    assert_eq!(code, 401);
    assert!(body.contains("no credentials"), "{body}");
}
