//! The operator against `stratus-apiserver`: an API server per test, over
//! real HTTP, with the Greeting definition installed as a cluster's
//! administrator would install it. Nothing is mocked: the operator's
//! `kube::Client` talks to the server as it would to a cluster.

use std::time::Duration;

use greeting_operator::{FINALIZER, Greeting, GreetingSpec, GreetingStatus, MANAGER};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::json;
use stratus_apiserver::{ApiServer, Fault, FaultAction, Verb, eventually};

const WAIT: Duration = Duration::from_secs(10);

/// Install the Greeting definition and wait until it is served.
async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Greeting::crd())
        .await
        .unwrap();
    let established = await_condition(
        crds,
        "greetings.example.stratus.dev",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(WAIT, established)
        .await
        .unwrap()
        .unwrap();
}

fn greeting(name: &str, message: &str) -> Greeting {
    Greeting::new(
        name,
        GreetingSpec {
            message: message.into(),
        },
    )
}

/// Whether the Greeting's status reflects its `generation`, with the
/// ConfigMap it names.
async fn reflects(greetings: Api<Greeting>, name: &'static str, generation: i64) -> bool {
    let status = greetings.get(name).await.ok().and_then(|g| g.status);
    status
        == Some(GreetingStatus {
            config_map: greeting_operator::config_map_name(name),
            observed_generation: generation,
        })
}

#[tokio::test]
async fn a_greeting_gets_its_config_map_its_status_and_a_cleanup() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    install_crd(&client).await;
    let operator = tokio::spawn(greeting_operator::run(client.clone()));
    let greetings: Api<Greeting> = Api::namespaced(client.clone(), "default");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = greetings
        .create(&PostParams::default(), &greeting("hello", "hello, world"))
        .await
        .unwrap();

    eventually("the status written", WAIT, || {
        reflects(greetings.clone(), "hello", 1)
    })
    .await;
    let hello = greetings.get("hello").await.unwrap();
    assert_eq!(hello.finalizers(), [FINALIZER]);
    let config_map = config_maps.get("hello-greeting").await.unwrap();
    assert_eq!(config_map.data.as_ref().unwrap()["message"], "hello, world");
    let owner = &config_map.owner_references()[0];
    assert_eq!(owner.uid, created.uid().unwrap());
    assert_eq!(owner.controller, Some(true));
    // Server-side apply recorded who owns what.
    let managers: Vec<_> = config_map
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, [MANAGER]);

    // A new message: a new generation, reflected.
    greetings
        .patch(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"message": "hello again"}})),
        )
        .await
        .unwrap();
    eventually("the new generation observed", WAIT, || {
        reflects(greetings.clone(), "hello", 2)
    })
    .await;
    let config_map = config_maps.get("hello-greeting").await.unwrap();
    assert_eq!(config_map.data.unwrap()["message"], "hello again");

    // The owned ConfigMap deleted by someone else is put back.
    config_maps
        .delete("hello-greeting", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the ConfigMap put back", WAIT, || {
        let config_maps = config_maps.clone();
        async move {
            config_maps
                .get_opt("hello-greeting")
                .await
                .unwrap()
                .is_some()
        }
    })
    .await;

    // Deleting the Greeting runs the cleanup (an Event), then the finalizer
    // goes, then the Greeting, and the garbage collector takes its ConfigMap.
    greetings
        .delete("hello", &DeleteParams::default())
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    let gone = await_condition(greetings.clone(), "hello", conditions::is_deleted(&uid));
    tokio::time::timeout(WAIT, gone).await.unwrap().unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let events = events.list(&ListParams::default()).await.unwrap().items;
    assert!(
        events.iter().any(|e| e.reason.as_deref() == Some("Deleted")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("hello")),
        "{events:?}"
    );
    eventually("the ConfigMap collected", WAIT, || {
        let config_maps = config_maps.clone();
        async move {
            config_maps
                .get_opt("hello-greeting")
                .await
                .unwrap()
                .is_none()
        }
    })
    .await;
    operator.abort();
}

#[tokio::test]
async fn the_operator_needs_nothing_beyond_its_cluster_role() {
    // RBAC on: the operator runs as a ServiceAccount bound to the role it
    // ships, with a token from the TokenRequest API.
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let admin = server.client();
    install_crd(&admin).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(MANAGER.into());
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &greeting_operator::cluster_role())
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(MANAGER.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: MANAGER.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: MANAGER.into(),
            namespace: Some("default".into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let token = accounts
        .create_token_request(
            MANAGER,
            &PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec::default()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .status
        .and_then(|s| s.token)
        .expect("a token");
    let operator = tokio::spawn(greeting_operator::run(
        server.client_with_token(&token).unwrap(),
    ));

    let greetings: Api<Greeting> = Api::namespaced(admin.clone(), "default");
    greetings
        .create(
            &PostParams::default(),
            &greeting("ruled", "within the rules"),
        )
        .await
        .unwrap();
    eventually("the status written", WAIT, || {
        reflects(greetings.clone(), "ruled", 1)
    })
    .await;
    greetings
        .delete("ruled", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Greeting cleaned up and gone", WAIT, || {
        let greetings = greetings.clone();
        async move { greetings.get_opt("ruled").await.unwrap().is_none() }
    })
    .await;
    assert_eq!(server.refused_requests(), Vec::<String>::new());
    operator.abort();
}

#[tokio::test]
async fn the_operator_rides_out_failing_writes() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    install_crd(&client).await;
    // The first three ConfigMap writes fail with 500.
    server.inject(
        Fault::new(
            Some(Verb::Patch),
            Some("configmaps"),
            FaultAction::Error(500),
        )
        .times(3),
    );
    let operator = tokio::spawn(greeting_operator::run(client.clone()));
    let greetings: Api<Greeting> = Api::namespaced(client.clone(), "default");
    greetings
        .create(
            &PostParams::default(),
            &greeting("sturdy", "again and again"),
        )
        .await
        .unwrap();
    eventually("the status written after the failures", WAIT, || {
        reflects(greetings.clone(), "sturdy", 1)
    })
    .await;
    let failed = server.answered(Some(Verb::Patch), "configmaps", 500);
    assert_eq!(failed, 3);
    operator.abort();
}
