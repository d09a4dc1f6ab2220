use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapEnvSource, ConfigMapKeySelector, Container, EnvFromSource, EnvVarSource,
    ObjectFieldSelector, PodSpec, PodStatus, ResourceFieldSelector, ResourceRequirements, Secret,
    SecretEnvSource, SecretKeySelector, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::{InMemoryResources, PodError};

fn cm(ns: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.namespace = Some(ns.into());
    c.metadata.name = Some(name.into());
    c.data = Some(
        data.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
    );
    c
}

fn secret(ns: &str, name: &str, data: &[(&str, &[u8])]) -> Secret {
    let mut s = Secret::default();
    s.metadata.namespace = Some(ns.into());
    s.metadata.name = Some(name.into());
    s.data = Some(
        data.iter()
            .map(|(k, v)| ((*k).into(), ByteString(v.to_vec())))
            .collect(),
    );
    s
}

fn service(ns: &str, name: &str, ip: &str, port: i32) -> Service {
    let mut s = Service::default();
    s.metadata.namespace = Some(ns.into());
    s.metadata.name = Some(name.into());
    s.spec = Some(ServiceSpec {
        cluster_ip: Some(ip.into()),
        ports: Some(vec![ServicePort {
            port,
            ..Default::default()
        }]),
        ..Default::default()
    });
    s
}

fn value(name: &str, v: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(v.into()),
        value_from: None,
    }
}

fn from(name: &str, source: EnvVarSource) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(source),
    }
}

fn cm_key(name: &str, key: &str, optional: Option<bool>) -> EnvVarSource {
    EnvVarSource {
        config_map_key_ref: Some(ConfigMapKeySelector {
            name: name.into(),
            key: key.into(),
            optional,
        }),
        ..Default::default()
    }
}

fn secret_key(name: &str, key: &str, optional: Option<bool>) -> EnvVarSource {
    EnvVarSource {
        secret_key_ref: Some(SecretKeySelector {
            name: name.into(),
            key: key.into(),
            optional,
        }),
        ..Default::default()
    }
}

fn field(path: &str) -> EnvVarSource {
    EnvVarSource {
        field_ref: Some(ObjectFieldSelector {
            api_version: Some("v1".into()),
            field_path: path.into(),
        }),
        ..Default::default()
    }
}

fn pod_with(env: Vec<EnvVar>, env_from: Vec<EnvFromSource>) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some("web".into());
    p.metadata.namespace = Some("shop".into());
    p.metadata.uid = Some("uid-7".into());
    p.spec = Some(PodSpec {
        node_name: Some("vk-1".into()),
        enable_service_links: Some(false),
        containers: vec![Container {
            name: "app".into(),
            env: Some(env),
            env_from: Some(env_from),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

fn resources() -> InMemoryResources {
    let r = InMemoryResources::new();
    r.insert_config_map(cm("shop", "settings", &[("color", "blue"), ("size", "L")]));
    r.insert_secret(secret(
        "shop",
        "creds",
        &[("password", b"hunter2"), ("raw", &[0xff, b'a'])],
    ));
    r
}

fn env_map(resolved: &ResolvedEnv) -> BTreeMap<String, String> {
    resolved.containers[0]
        .env
        .iter()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

async fn resolve(pod: &Pod, r: &dyn PodResources) -> Result<ResolvedEnv, EnvFailure> {
    resolve_pod_env(pod, r, &ResolveOptions::default()).await
}

#[tokio::test]
async fn key_refs_and_expansion() {
    let pod = pod_with(
        vec![
            from("COLOR", cm_key("settings", "color", None)),
            from("PASSWORD", secret_key("creds", "password", None)),
            from("RAW", secret_key("creds", "raw", None)),
            value("SUMMARY", "$(COLOR)-$(PASSWORD)-$(MISSING)-$$(COLOR)"),
        ],
        vec![],
    );
    let resolved = resolve(&pod, &resources()).await.unwrap();
    let env = env_map(&resolved);
    assert_eq!(env["COLOR"], "blue");
    assert_eq!(env["PASSWORD"], "hunter2");
    assert_eq!(env["RAW"], "\u{fffd}a");
    assert_eq!(env["SUMMARY"], "blue-hunter2-$(MISSING)-$(COLOR)");
    let names: Vec<_> = resolved.containers[0]
        .env
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["COLOR", "PASSWORD", "RAW", "SUMMARY"]);
    assert!(resolved.events.is_empty());
}

#[tokio::test]
async fn optional_missing_references_are_skipped_with_events() {
    let pod = pod_with(
        vec![
            from("A", cm_key("nope", "x", Some(true))),
            from("B", cm_key("settings", "nokey", Some(true))),
            from("C", secret_key("nope", "x", Some(true))),
            from("D", secret_key("creds", "nokey", Some(true))),
            value("E", "kept"),
        ],
        vec![
            EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource {
                    name: "absent".into(),
                    optional: Some(true),
                }),
                ..Default::default()
            },
            EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: "absent".into(),
                    optional: Some(true),
                }),
                ..Default::default()
            },
        ],
    );
    let resolved = resolve(&pod, &resources()).await.unwrap();
    assert_eq!(
        env_map(&resolved).into_iter().collect::<Vec<_>>(),
        [("E".to_owned(), "kept".to_owned())]
    );
    let reasons: Vec<_> = resolved.events.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        [
            reasons::OPTIONAL_CONFIG_MAP_NOT_FOUND,
            reasons::OPTIONAL_SECRET_NOT_FOUND,
            reasons::OPTIONAL_CONFIG_MAP_NOT_FOUND,
            reasons::OPTIONAL_CONFIG_MAP_KEY_NOT_FOUND,
            reasons::OPTIONAL_SECRET_NOT_FOUND,
            reasons::OPTIONAL_SECRET_KEY_NOT_FOUND,
        ]
    );
    assert_eq!(
        resolved.events[3].message,
        "skipping optional envvar \"B\": key \"nokey\" does not exist in configmap \"settings\""
    );
}

#[tokio::test]
async fn mandatory_missing_references_fail_with_events() {
    let cases: Vec<(EnvVar, &str, &str)> = vec![
        (
            from("A", cm_key("nope", "x", None)),
            reasons::MANDATORY_CONFIG_MAP_NOT_FOUND,
            "configmap \"nope\" not found",
        ),
        (
            from("A", cm_key("settings", "nokey", Some(false))),
            reasons::MANDATORY_CONFIG_MAP_KEY_NOT_FOUND,
            "configmap \"settings\" doesn't contain the \"nokey\" key required by pod web",
        ),
        (
            from("A", secret_key("nope", "x", None)),
            reasons::MANDATORY_SECRET_NOT_FOUND,
            "secret \"nope\" not found",
        ),
        (
            from("A", secret_key("creds", "nokey", None)),
            reasons::MANDATORY_SECRET_KEY_NOT_FOUND,
            "secret \"creds\" doesn't contain the \"nokey\" key required by pod web",
        ),
    ];
    for (var, reason, message) in cases {
        let pod = pod_with(vec![var], vec![]);
        let failure = resolve(&pod, &resources()).await.unwrap_err();
        assert_eq!(failure.container, "app");
        assert_eq!(failure.error.to_string(), message);
        assert_eq!(failure.events.last().map(|e| e.reason), Some(reason));
        let err: PodError = failure.into();
        assert!(err.is_not_found());
    }
}

/// Fails every lookup, except service listings when `services_ok`.
struct Broken {
    services_ok: bool,
}

#[async_trait]
impl PodResources for Broken {
    async fn get_secret(&self, _: &str, _: &str) -> crate::Result<Option<Secret>> {
        Err(PodError::unavailable(None, "api down"))
    }
    async fn get_config_map(&self, _: &str, _: &str) -> crate::Result<Option<ConfigMap>> {
        Err(PodError::unavailable(None, "api down"))
    }
    async fn list_services(&self, _: &str) -> crate::Result<Vec<Service>> {
        if self.services_ok {
            Ok(vec![])
        } else {
            Err(PodError::unavailable(None, "api down"))
        }
    }
}

#[tokio::test]
async fn read_failures() {
    let optional = pod_with(
        vec![
            from("A", cm_key("x", "y", Some(true))),
            from("B", secret_key("x", "y", Some(true))),
        ],
        vec![],
    );
    let flaky = Broken { services_ok: true };
    let resolved = resolve(&optional, &flaky).await.unwrap();
    assert_eq!(
        resolved.events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        [
            reasons::FAILED_TO_READ_OPTIONAL_CONFIG_MAP,
            reasons::FAILED_TO_READ_OPTIONAL_SECRET
        ]
    );
    let mandatory = pod_with(vec![from("A", secret_key("x", "y", None))], vec![]);
    let failure = resolve(&mandatory, &flaky).await.unwrap_err();
    assert_eq!(
        failure.events[0].reason,
        reasons::FAILED_TO_READ_MANDATORY_SECRET
    );
    assert!(matches!(failure.error, EnvError::SecretRead { .. }));
    // The service listing fails (links on, or only the master service).
    let down = Broken { services_ok: false };
    let mut links = pod_with(vec![], vec![]);
    assert!(matches!(
        resolve(&links, &down).await.unwrap_err().error,
        EnvError::ServiceList(_)
    ));
    links.spec.as_mut().unwrap().enable_service_links = None;
    assert!(matches!(
        resolve(&links, &down).await.unwrap_err().error,
        EnvError::ServiceList(_)
    ));
}

#[tokio::test]
async fn env_from_prefix_invalid_names_and_precedence() {
    let r = resources();
    r.insert_config_map(cm(
        "shop",
        "mixed",
        &[
            ("good", "1"),
            ("1bad", "2"),
            ("also bad", "3"),
            ("color", "red"),
        ],
    ));
    let pod = pod_with(
        vec![value("P_color", "override")],
        vec![
            EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource {
                    name: "mixed".into(),
                    optional: None,
                }),
                prefix: Some("P_".into()),
                ..Default::default()
            },
            EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: "creds".into(),
                    optional: None,
                }),
                ..Default::default()
            },
        ],
    );
    let resolved = resolve(&pod, &r).await.unwrap();
    let env = env_map(&resolved);
    assert_eq!(env["P_good"], "1");
    assert_eq!(env["P_1bad"], "2", "a prefix can make a key valid");
    assert_eq!(env["P_color"], "override");
    assert_eq!(env["password"], "hunter2");
    assert!(!env.contains_key("P_also bad"));
    assert_eq!(resolved.events.len(), 1);
    assert_eq!(
        resolved.events[0].reason,
        reasons::INVALID_ENVIRONMENT_VARIABLE_NAMES
    );
    assert_eq!(
        resolved.events[0].message,
        "keys [P_also bad] from configmap shop/mixed were skipped since they are invalid as environment variable names"
    );
    // Relaxed names accept the space.
    let relaxed = resolve_pod_env(
        &pod,
        &r,
        &ResolveOptions {
            relaxed_names: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(env_map(&relaxed)["P_also bad"], "3");
    // Mandatory envFrom source missing.
    let missing = pod_with(
        vec![],
        vec![EnvFromSource {
            config_map_ref: Some(ConfigMapEnvSource {
                name: "gone".into(),
                optional: None,
            }),
            ..Default::default()
        }],
    );
    let failure = resolve(&missing, &r).await.unwrap_err();
    assert_eq!(
        failure.events[0].reason,
        reasons::MANDATORY_CONFIG_MAP_NOT_FOUND
    );
}

#[tokio::test]
async fn field_refs_including_status_fields() {
    let mut pod = pod_with(
        vec![
            from("NAME", field("metadata.name")),
            from("NS", field("metadata.namespace")),
            from("UID", field("metadata.uid")),
            from("NODE", field("spec.nodeName")),
            from("POD_IP", field("status.podIP")),
            from("HOST_IP", field("status.hostIP")),
        ],
        vec![],
    );
    let err = resolve(&pod, &resources()).await.unwrap_err();
    assert!(matches!(err.error, EnvError::StatusNotKnown { .. }));
    assert!(PodError::from(err).is_transient());

    let deferred = resolve_pod_env(
        &pod,
        &resources(),
        &ResolveOptions {
            defer_unknown_status: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(env_map(&deferred)["POD_IP"], "");
    assert_eq!(
        deferred
            .deferred
            .iter()
            .map(|d| d.field_path.as_str())
            .collect::<Vec<_>>(),
        ["status.podIP", "status.hostIP"]
    );

    pod.status = Some(PodStatus {
        pod_ip: Some("10.9.0.3".into()),
        host_ip: Some("192.0.2.10".into()),
        ..Default::default()
    });
    let resolved = resolve(&pod, &resources()).await.unwrap();
    let env = env_map(&resolved);
    assert_eq!(env["NAME"], "web");
    assert_eq!(env["NS"], "shop");
    assert_eq!(env["UID"], "uid-7");
    assert_eq!(env["NODE"], "vk-1");
    assert_eq!(env["POD_IP"], "10.9.0.3");
    assert_eq!(env["HOST_IP"], "192.0.2.10");

    let bad = pod_with(vec![from("X", field("status.phase"))], vec![]);
    let failure = resolve(&bad, &resources()).await.unwrap_err();
    assert_eq!(
        failure.error.to_string(),
        "variable X: unsupported fieldPath: status.phase"
    );
    assert!(PodError::from(failure).is_invalid_input());
}

#[tokio::test]
async fn resource_field_refs() {
    let mut pod = pod_with(
        vec![
            from(
                "CPU_MILLIS",
                EnvVarSource {
                    resource_field_ref: Some(ResourceFieldSelector {
                        resource: "requests.cpu".into(),
                        divisor: Some(Quantity("1m".into())),
                        container_name: None,
                    }),
                    ..Default::default()
                },
            ),
            from(
                "MEM_LIMIT_MI",
                EnvVarSource {
                    resource_field_ref: Some(ResourceFieldSelector {
                        resource: "limits.memory".into(),
                        divisor: Some(Quantity("1Mi".into())),
                        container_name: Some("sidecar".into()),
                    }),
                    ..Default::default()
                },
            ),
        ],
        vec![],
    );
    let spec = pod.spec.as_mut().unwrap();
    spec.containers[0].resources = Some(ResourceRequirements {
        requests: Some(BTreeMap::from([("cpu".into(), Quantity("250m".into()))])),
        ..Default::default()
    });
    spec.containers.push(Container {
        name: "sidecar".into(),
        ..Default::default()
    });
    let options = ResolveOptions {
        node_allocatable: Some(BTreeMap::from([("memory".into(), Quantity("2Gi".into()))])),
        ..Default::default()
    };
    let resolved = resolve_pod_env(&pod, &resources(), &options).await.unwrap();
    let env = env_map(&resolved);
    assert_eq!(env["CPU_MILLIS"], "250");
    assert_eq!(
        env["MEM_LIMIT_MI"], "2048",
        "an unset limit defaults to node allocatable"
    );

    pod.spec.as_mut().unwrap().containers[0]
        .env
        .as_mut()
        .unwrap()[1]
        .value_from
        .as_mut()
        .unwrap()
        .resource_field_ref
        .as_mut()
        .unwrap()
        .container_name = Some("ghost".into());
    let failure = resolve(&pod, &resources()).await.unwrap_err();
    assert!(matches!(failure.error, EnvError::ResourceFieldRef { .. }));
}

#[tokio::test]
async fn service_links_and_master_service() {
    let r = resources();
    r.insert_service(service("shop", "cart-api", "10.96.0.20", 8080));
    r.insert_service(service("shop", "headless", "None", 80));
    r.insert_service(service("default", "kubernetes", "10.96.0.1", 443));
    r.insert_service(service("default", "other", "10.96.0.9", 80));
    let mut pod = pod_with(
        vec![value("CART_API_SERVICE_PORT", "declared wins")],
        vec![],
    );

    // Links off: only the master service.
    let off = resolve(&pod, &r).await.unwrap();
    let env = env_map(&off);
    assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
    assert_eq!(env["KUBERNETES_SERVICE_PORT"], "443");
    assert_eq!(env["KUBERNETES_PORT_443_TCP"], "tcp://10.96.0.1:443");
    assert!(!env.contains_key("CART_API_SERVICE_HOST"));
    assert!(!env.contains_key("OTHER_SERVICE_HOST"));

    // Links on: the pod's namespace too, never other namespaces.
    pod.spec.as_mut().unwrap().enable_service_links = Some(true);
    let on = resolve(&pod, &r).await.unwrap();
    let env = env_map(&on);
    assert_eq!(env["CART_API_SERVICE_HOST"], "10.96.0.20");
    assert_eq!(env["CART_API_SERVICE_PORT"], "declared wins");
    assert!(!env.contains_key("HEADLESS_SERVICE_HOST"));
    assert!(!env.contains_key("OTHER_SERVICE_HOST"));
    assert!(env.contains_key("KUBERNETES_SERVICE_HOST"));
    // Declared variables come first, service links after.
    assert_eq!(on.containers[0].env[0].name, "CART_API_SERVICE_PORT");
}

#[tokio::test]
async fn init_and_ephemeral_containers_and_apply() {
    let mut pod = pod_with(vec![value("A", "1")], vec![]);
    let spec = pod.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![Container {
        name: "init".into(),
        env: Some(vec![value("B", "$(A)")]),
        ..Default::default()
    }]);
    spec.containers[0].env_from = Some(vec![EnvFromSource {
        config_map_ref: Some(ConfigMapEnvSource {
            name: "settings".into(),
            optional: None,
        }),
        ..Default::default()
    }]);
    let resolved = resolve(&pod, &resources()).await.unwrap();
    assert_eq!(resolved.containers[0].kind, ContainerKind::Init);
    assert_eq!(
        resolved.containers[0].env[0].value.as_deref(),
        Some("$(A)"),
        "no cross-container references"
    );
    apply_resolved_env(&mut pod, &resolved);
    let app = &pod.spec.as_ref().unwrap().containers[0];
    assert!(app.env_from.is_none());
    let names: Vec<_> = app
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["color", "size", "A"]);
}

#[tokio::test]
async fn odd_input_never_panics() {
    // No spec at all.
    let resolved = resolve(&Pod::default(), &resources()).await.unwrap();
    assert!(resolved.containers.is_empty());
    // A valueFrom with no source.
    let pod = pod_with(vec![from("X", EnvVarSource::default())], vec![]);
    assert!(matches!(
        resolve(&pod, &resources()).await.unwrap_err().error,
        EnvError::UnsupportedSource(_)
    ));
    // A value and a valueFrom: the value wins, as in the kubelet.
    let both = pod_with(
        vec![EnvVar {
            name: "X".into(),
            value: Some("v".into()),
            value_from: Some(cm_key("nope", "x", None)),
        }],
        vec![],
    );
    assert_eq!(
        env_map(&resolve(&both, &resources()).await.unwrap())["X"],
        "v"
    );
}

#[test]
fn env_equality_ignores_order() {
    let a = vec![value("A", "1"), value("B", "2")];
    let b = vec![value("B", "2"), value("A", "1")];
    assert!(env_equal(&a, &b));
    assert!(!env_equal(&a, &[value("A", "1"), value("B", "3")]));
    assert!(!env_equal(&a, &a[..1]));
}
