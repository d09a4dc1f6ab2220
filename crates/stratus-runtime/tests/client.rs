//! The API client's budget and user agent, through real HTTP to the harness.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use stratus_runtime::client::{ClientError, ClientOptions, build_client};
use stratus_testing::ApiServer;

#[tokio::test]
async fn requests_carry_the_user_agent_and_respect_the_budget() {
    let server = ApiServer::start().await.unwrap();
    let options = ClientOptions {
        qps: 10.0,
        burst: 2,
        user_agent: "sample-ccm/v9".into(),
        metrics: None,
    };
    let client = build_client(server.config().unwrap(), &options).unwrap();
    let namespaces: Api<Namespace> = Api::all(client);
    let started = Instant::now();
    let gets = (0..12).map(|_| namespaces.get("default"));
    for answer in futures_util::future::join_all(gets).await {
        answer.unwrap();
    }
    // 2 at once from the burst, then 10 more at 10 per second: at least 1 s,
    // however fast the machine.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "12 requests at 10 qps / burst 2 took only {:?}",
        started.elapsed()
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 12);
    assert!(requests.iter().all(|r| r.user_agent == "sample-ccm/v9"));
}

#[tokio::test]
async fn default_options_name_the_component() {
    let server = ApiServer::start().await.unwrap();
    let options = ClientOptions::new("cloud-controller-manager");
    assert_eq!(
        (options.qps, options.burst),
        (20.0, 30),
        "Go's CCM defaults"
    );
    let client = build_client(server.config().unwrap(), &options).unwrap();
    Api::<Namespace>::all(client).get("default").await.unwrap();
    let agent = &server.requests()[0].user_agent;
    assert!(agent.starts_with("cloud-controller-manager/v"), "{agent}");
}

#[tokio::test]
async fn bad_options_are_typed_errors() {
    let server = ApiServer::start().await.unwrap();
    let mut options = ClientOptions::new("x");
    options.user_agent = "two\nlines".into();
    assert!(matches!(
        build_client(server.config().unwrap(), &options),
        Err(ClientError::UserAgent(_))
    ));
    let mut options = ClientOptions::new("x");
    options.burst = 0;
    let Err(err) = build_client(server.config().unwrap(), &options) else {
        panic!("a zero burst was accepted");
    };
    assert!(matches!(err, ClientError::ZeroBurst(_)));
    assert!(err.to_string().contains("burst must be at least 1"));
}

#[tokio::test]
async fn requests_are_counted_by_code_method_and_host() {
    let server = ApiServer::start().await.unwrap();
    let metrics = stratus_runtime::metrics::RestClientMetrics::new();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut options = ClientOptions::new("metrics-test");
    options.metrics = Some(metrics.clone());
    let client = build_client(server.config().unwrap(), &options).unwrap();
    let namespaces: Api<Namespace> = Api::all(client);
    namespaces.get("default").await.unwrap();
    namespaces.get("default").await.unwrap();
    assert!(namespaces.get("nowhere").await.is_err());
    let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    let host = format!("host=\"127.0.0.1:{}\"", server.addr().port());
    for series in [
        format!("rest_client_requests_total{{code=\"200\",method=\"GET\",{host}}} 2"),
        format!("rest_client_requests_total{{code=\"404\",method=\"GET\",{host}}} 1"),
        format!("rest_client_request_duration_seconds_count{{verb=\"GET\",{host}}} 3"),
    ] {
        assert!(text.contains(&series), "{series} in {text}");
    }
    // A server that is gone: no answer, client-go's `<error>` code.
    drop(server);
    assert!(namespaces.get("default").await.is_err());
    let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    assert!(
        text.contains(&format!(
            "rest_client_requests_total{{code=\"<error>\",method=\"GET\",{host}}}"
        )),
        "{text}"
    );
}
