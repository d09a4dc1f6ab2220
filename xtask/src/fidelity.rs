//! `cargo xtask fidelity`: how closely the harness API server answers as
//! kube-apiserver does. A corpus of requests — creates, reads, lists with
//! selectors and pagination, the four kinds of patch, server-side apply and
//! its conflicts, updates with stale resourceVersions, dry runs, deletions,
//! watches with bookmarks and `sendInitialEvents`, and bad input (bad JSON,
//! invalid names, unknown fields under each validation directive, bad
//! selectors, missing namespaces, mismatched kinds) — is replayed in order
//! against a fresh harness and the real control plane (`cargo xtask
//! cluster`, started for the run unless one is up), as the administrator of
//! each. `target/fidelity.json` gets `status_agreement_ratio` (the same
//! HTTP status), `body_agreement_ratio` (the same body once uids — in
//! messages too —, timestamps, resourceVersions, generated names, allocated
//! addresses and ports, continue tokens and managedFields times are masked,
//! and lists are cut to the corpus's own objects, labelled `app=fidelity`)
//! and every disagreement with the first place the bodies differ and both
//! bodies.

use std::process::ExitCode;

use http::Method;
use serde_json::{Value, json};
use stratus_testing::ApiServer;

use crate::error::BoxError;
use stratus_cluster as cluster;

mod compare;
use compare::{comparable, first_difference};

/// One request of the corpus.
struct Request {
    /// What it checks, for the report.
    what: String,
    method: Method,
    path: String,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
}

fn req(what: impl Into<String>, method: Method, path: impl Into<String>) -> Request {
    Request {
        what: what.into(),
        method,
        path: path.into(),
        content_type: None,
        body: None,
    }
}

impl Request {
    fn json(mut self, body: &Value) -> Self {
        self.content_type = Some("application/json");
        self.body = Some(body.to_string().into_bytes());
        self
    }

    fn raw(mut self, content_type: &'static str, body: &str) -> Self {
        self.content_type = Some(content_type);
        self.body = Some(body.as_bytes().to_vec());
        self
    }
}

/// A kind the corpus exercises: where it lives and a valid object of it.
struct Kind {
    /// `/api/v1` or `/apis/<group>/<version>`.
    prefix: &'static str,
    plural: &'static str,
    namespaced: bool,
    /// A valid object named `name` labelled `app=fidelity`.
    object: fn(&str) -> Value,
    /// Whether strategic merge patches apply (built-in kinds do).
    strategic: bool,
    /// A field an update can change, as a merge patch.
    change: fn() -> Value,
}

const NAMESPACE: &str = "fidelity";

fn meta(api_version: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
           "metadata": {"name": name, "labels": {"app": "fidelity"}}})
}

fn with(mut object: Value, key: &str, value: Value) -> Value {
    object[key] = value;
    object
}

fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            prefix: "/api/v1",
            plural: "configmaps",
            namespaced: true,
            object: |n| with(meta("v1", "ConfigMap", n), "data", json!({"color": "blue"})),
            strategic: true,
            change: || json!({"data": {"color": "green"}}),
        },
        Kind {
            prefix: "/api/v1",
            plural: "secrets",
            namespaced: true,
            object: |n| {
                with(
                    with(meta("v1", "Secret", n), "type", json!("Opaque")),
                    "data",
                    json!({"key": "czNjcmV0"}),
                )
            },
            strategic: true,
            change: || json!({"data": {"key": "b3RoZXI="}}),
        },
        Kind {
            prefix: "/api/v1",
            plural: "serviceaccounts",
            namespaced: true,
            object: |n| meta("v1", "ServiceAccount", n),
            strategic: true,
            change: || json!({"automountServiceAccountToken": false}),
        },
        Kind {
            prefix: "/api/v1",
            plural: "services",
            namespaced: true,
            object: |n| {
                with(
                    meta("v1", "Service", n),
                    "spec",
                    json!({"selector": {"app": "fidelity"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}),
                )
            },
            strategic: true,
            change: || json!({"spec": {"sessionAffinity": "ClientIP"}}),
        },
        Kind {
            prefix: "/apis/rbac.authorization.k8s.io/v1",
            plural: "roles",
            namespaced: true,
            object: |n| {
                with(
                    meta("rbac.authorization.k8s.io/v1", "Role", n),
                    "rules",
                    json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
                )
            },
            strategic: true,
            change: || json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
        },
        Kind {
            prefix: "/apis/coordination.k8s.io/v1",
            plural: "leases",
            namespaced: true,
            object: |n| {
                with(
                    meta("coordination.k8s.io/v1", "Lease", n),
                    "spec",
                    json!({"holderIdentity": "a", "leaseDurationSeconds": 15}),
                )
            },
            strategic: true,
            change: || json!({"spec": {"holderIdentity": "b"}}),
        },
        Kind {
            prefix: "/apis/networking.k8s.io/v1",
            plural: "networkpolicies",
            namespaced: true,
            object: |n| {
                with(
                    meta("networking.k8s.io/v1", "NetworkPolicy", n),
                    "spec",
                    json!({"podSelector": {"matchLabels": {"app": "fidelity"}}, "policyTypes": ["Ingress"]}),
                )
            },
            strategic: true,
            change: || json!({"spec": {"policyTypes": ["Ingress", "Egress"]}}),
        },
        Kind {
            prefix: "/apis/scheduling.k8s.io/v1",
            plural: "priorityclasses",
            namespaced: false,
            object: |n| {
                with(
                    meta("scheduling.k8s.io/v1", "PriorityClass", n),
                    "value",
                    json!(1000),
                )
            },
            strategic: true,
            change: || json!({"description": "changed"}),
        },
        Kind {
            prefix: "/apis/rbac.authorization.k8s.io/v1",
            plural: "clusterroles",
            namespaced: false,
            object: |n| {
                with(
                    meta("rbac.authorization.k8s.io/v1", "ClusterRole", n),
                    "rules",
                    json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
                )
            },
            strategic: true,
            change: || json!({"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch"]}]}),
        },
        Kind {
            prefix: "/apis/storage.k8s.io/v1",
            plural: "storageclasses",
            namespaced: false,
            object: |n| {
                with(
                    meta("storage.k8s.io/v1", "StorageClass", n),
                    "provisioner",
                    json!("example.com/fidelity"),
                )
            },
            strategic: true,
            change: || json!({"allowVolumeExpansion": true}),
        },
        Kind {
            prefix: "/apis/apiextensions.k8s.io/v1",
            plural: "customresourcedefinitions",
            namespaced: false,
            object: |n| {
                // A CRD's name is <plural>.<group>: the corpus's names are
                // turned into one.
                let plural = n.replace('-', "");
                with(
                    meta(
                        "apiextensions.k8s.io/v1",
                        "CustomResourceDefinition",
                        &format!("{plural}s.fidelity.example.com"),
                    ),
                    "spec",
                    json!({"group": "fidelity.example.com", "scope": "Namespaced",
                       "names": {"plural": format!("{plural}s"), "singular": plural, "kind": "Widget"},
                       "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}),
                )
            },
            strategic: false,
            change: || json!({"metadata": {"annotations": {"changed": "yes"}}}),
        },
    ]
}

fn collection(kind: &Kind) -> String {
    if kind.namespaced {
        format!("{}/namespaces/{NAMESPACE}/{}", kind.prefix, kind.plural)
    } else {
        format!("{}/{}", kind.prefix, kind.plural)
    }
}

/// The object's name as the server stores it (a CRD's is derived).
fn stored_name(kind: &Kind, name: &str) -> String {
    (kind.object)(name)["metadata"]["name"]
        .as_str()
        .unwrap_or(name)
        .to_owned()
}

/// The requests for one kind, in order (each depends on the ones before).
fn kind_requests(kind: &Kind) -> Vec<Request> {
    let base = collection(kind);
    let k = kind.plural;
    let a = stored_name(kind, "alpha");
    let b = stored_name(kind, "beta");
    let item = |n: &str| format!("{base}/{n}");
    let mut out = vec![
        req(format!("{k}: create"), Method::POST, &base).json(&(kind.object)("alpha")),
        req(format!("{k}: create again (conflict)"), Method::POST, &base).json(&(kind.object)("alpha")),
        req(format!("{k}: get"), Method::GET, item(&a)),
        req(format!("{k}: get a missing one"), Method::GET, item("missing")),
        req(format!("{k}: create a second"), Method::POST, &base).json(&(kind.object)("beta")),
        req(format!("{k}: list"), Method::GET, &base),
        req(
            format!("{k}: list by label"),
            Method::GET,
            format!("{base}?labelSelector=app%3Dfidelity"),
        ),
        req(
            format!("{k}: list by a set-based label selector"),
            Method::GET,
            format!("{base}?labelSelector=app%20in%20(fidelity,other)"),
        ),
        req(
            format!("{k}: list with a bad label selector"),
            Method::GET,
            format!("{base}?labelSelector=app%3D%3D%3Dx!"),
        ),
        req(
            format!("{k}: list by name (field selector)"),
            Method::GET,
            format!("{base}?fieldSelector=metadata.name%3D{a}"),
        ),
        req(
            format!("{k}: list with an unsupported field selector"),
            Method::GET,
            format!("{base}?fieldSelector=spec.nothing%3Dx"),
        ),
        req(
            format!("{k}: list a page of one"),
            Method::GET,
            format!("{base}?limit=1&labelSelector=app%3Dfidelity"),
        ),
        req(
            format!("{k}: list with resourceVersion=0"),
            Method::GET,
            format!("{base}?resourceVersion=0"),
        ),
        req(
            format!("{k}: merge patch"),
            Method::PATCH,
            item(&a),
        )
        .raw(
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"tier": "gold"}}}).to_string(),
        ),
        req(format!("{k}: JSON patch"), Method::PATCH, item(&a)).raw(
            "application/json-patch+json",
            r#"[{"op":"add","path":"/metadata/annotations","value":{"note":"hi"}}]"#,
        ),
        req(
            format!("{k}: JSON patch whose test fails"),
            Method::PATCH,
            item(&a),
        )
        .raw(
            "application/json-patch+json",
            r#"[{"op":"test","path":"/metadata/labels/app","value":"other"}]"#,
        ),
        req(
            format!("{k}: JSON patch of a missing path"),
            Method::PATCH,
            item(&a),
        )
        .raw(
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/metadata/nothing/here","value":1}]"#,
        ),
        req(
            format!("{k}: test of a missing member against null"),
            Method::PATCH,
            item(&a),
        )
        .raw(
            "application/json-patch+json",
            r#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["example.com/f"]},{"op":"remove","path":"/metadata/finalizers"}]"#,
        ),
        req(format!("{k}: merge patch of a missing object"), Method::PATCH, item("missing"))
            .raw("application/merge-patch+json", r#"{"metadata":{"labels":{"a":"b"}}}"#),
        req(format!("{k}: merge patch that is not JSON"), Method::PATCH, item(&a))
            .raw("application/merge-patch+json", "{not json"),
        req(format!("{k}: update a field"), Method::PATCH, item(&a))
            .raw("application/merge-patch+json", &(kind.change)().to_string()),
        req(
            format!("{k}: server-side apply"),
            Method::PATCH,
            format!("{}?fieldManager=first&force=true", item(&a)),
        )
        .raw(
            "application/apply-patch+yaml",
            &with((kind.object)("alpha"), "metadata", {
                let mut m = (kind.object)("alpha")["metadata"].clone();
                m["labels"]["owner"] = json!("first");
                m
            })
            .to_string(),
        ),
        req(
            format!("{k}: server-side apply conflict"),
            Method::PATCH,
            format!("{}?fieldManager=second", item(&a)),
        )
        .raw(
            "application/apply-patch+yaml",
            &with((kind.object)("alpha"), "metadata", {
                let mut m = (kind.object)("alpha")["metadata"].clone();
                m["labels"]["owner"] = json!("second");
                m
            })
            .to_string(),
        ),
        req(
            format!("{k}: server-side apply without a field manager"),
            Method::PATCH,
            item(&a),
        )
        .raw("application/apply-patch+yaml", &(kind.object)("alpha").to_string()),
        req(
            format!("{k}: server-side apply creates"),
            Method::PATCH,
            format!("{}?fieldManager=first", item(&stored_name(kind, "gamma"))),
        )
        .raw("application/apply-patch+yaml", &(kind.object)("gamma").to_string()),
        req(
            format!("{k}: update with a stale resourceVersion"),
            Method::PUT,
            item(&a),
        )
        .json(&{
            let mut o = (kind.object)("alpha");
            o["metadata"]["resourceVersion"] = json!("1");
            o
        }),
        req(
            format!("{k}: update with a name that differs"),
            Method::PUT,
            item(&a),
        )
        .json(&(kind.object)("other")),
        req(
            format!("{k}: update of a missing object"),
            Method::PUT,
            item(&stored_name(kind, "missing")),
        )
        .json(&{
            let mut o = (kind.object)("missing");
            o["metadata"]["resourceVersion"] = json!("1");
            o
        }),
        req(format!("{k}: create with an invalid name"), Method::POST, &base)
            .json(&(kind.object)("Bad_Name")),
        req(format!("{k}: create without a name"), Method::POST, &base).json(&{
            let mut o = (kind.object)("x");
            o["metadata"].as_object_mut().map(|m| m.remove("name"));
            o
        }),
        req(format!("{k}: create with a bad JSON body"), Method::POST, &base)
            .raw("application/json", "{\"metadata\": "),
        req(format!("{k}: create with a kind that does not match"), Method::POST, &base).json(
            &with((kind.object)("delta"), "kind", json!("Nonsense")),
        ),
        req(
            format!("{k}: create with an unknown field (Strict)"),
            Method::POST,
            format!("{base}?fieldValidation=Strict"),
        )
        .json(&with((kind.object)("strict"), "bogus", json!(1))),
        req(
            format!("{k}: create with an unknown field (Warn)"),
            Method::POST,
            format!("{base}?fieldValidation=Warn"),
        )
        .json(&with((kind.object)("warn"), "bogus", json!(1))),
        req(
            format!("{k}: create with an unknown field (Ignore)"),
            Method::POST,
            format!("{base}?fieldValidation=Ignore"),
        )
        .json(&with((kind.object)("ignore"), "bogus", json!(1))),
        req(
            format!("{k}: create with a bad fieldValidation"),
            Method::POST,
            format!("{base}?fieldValidation=Sometimes"),
        )
        .json(&(kind.object)("never")),
        req(
            format!("{k}: dry-run create"),
            Method::POST,
            format!("{base}?dryRun=All"),
        )
        .json(&(kind.object)("dry")),
        req(
            format!("{k}: the dry run stored nothing"),
            Method::GET,
            item(&stored_name(kind, "dry")),
        ),
        req(
            format!("{k}: dry-run delete"),
            Method::DELETE,
            format!("{}?dryRun=All", item(&b)),
        ),
        req(
            format!("{k}: still there"),
            Method::GET,
            item(&b),
        ),
        req(
            format!("{k}: watch from resourceVersion 0 (1 s)"),
            Method::GET,
            format!("{base}?watch=true&resourceVersion=0&timeoutSeconds=1&labelSelector=app%3Dfidelity"),
        ),
        req(
            format!("{k}: watch with sendInitialEvents and bookmarks (1 s)"),
            Method::GET,
            format!(
                "{base}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1&labelSelector=app%3Dfidelity"
            ),
        ),
        req(
            format!("{k}: sendInitialEvents without a watch"),
            Method::GET,
            format!("{base}?sendInitialEvents=true"),
        ),
        req(
            format!("{k}: a watch with a resourceVersion that is not a number"),
            Method::GET,
            format!("{base}?watch=true&resourceVersion=abc&timeoutSeconds=1"),
        ),
        req(format!("{k}: delete"), Method::DELETE, item(&a)),
        req(format!("{k}: delete again"), Method::DELETE, item(&a)),
        req(
            format!("{k}: delete with a precondition that fails"),
            Method::DELETE,
            item(&b),
        )
        .json(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
        req(
            format!("{k}: delete the collection by label"),
            Method::DELETE,
            format!("{base}?labelSelector=app%3Dfidelity"),
        ),
        req(format!("{k}: list after"), Method::GET, &base),
    ];
    if kind.strategic {
        out.insert(
            15,
            req(
                format!("{k}: strategic merge patch"),
                Method::PATCH,
                item(&a),
            )
            .raw(
                "application/strategic-merge-patch+json",
                &json!({"metadata": {"labels": {"strategic": "yes"}}}).to_string(),
            ),
        );
    } else {
        out.insert(
            15,
            req(
                format!("{k}: strategic merge patch (refused for custom kinds)"),
                Method::PATCH,
                item(&a),
            )
            .raw(
                "application/strategic-merge-patch+json",
                &json!({"metadata": {"labels": {"strategic": "yes"}}}).to_string(),
            ),
        );
    }
    if kind.namespaced {
        out.push(
            req(
                format!("{k}: create in a missing namespace"),
                Method::POST,
                format!("{}/namespaces/nowhere/{}", kind.prefix, kind.plural),
            )
            .json(&(kind.object)("lost")),
        );
        out.push(req(
            format!("{k}: list in every namespace by label"),
            Method::GET,
            format!(
                "{}/{}?labelSelector=app%3Dfidelity",
                kind.prefix, kind.plural
            ),
        ));
    }
    out
}

/// The whole corpus.
fn corpus() -> Vec<Request> {
    let mut out = vec![
        req("create the namespace", Method::POST, "/api/v1/namespaces")
            .json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})),
        req("get the namespace", Method::GET, format!("/api/v1/namespaces/{NAMESPACE}")),
        req("a missing namespace", Method::GET, "/api/v1/namespaces/nowhere"),
        req("an unknown resource", Method::GET, "/api/v1/nothings"),
        req("an unknown group", Method::GET, "/apis/nothing.example.com/v1/things"),
        req("a resource name that is too long", Method::GET,
            format!("/api/v1/namespaces/{NAMESPACE}/configmaps/{}", "a".repeat(300))),
        req("an unsupported media type", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
            .raw("text/plain", "hello"),
        req("a method the collection does not allow", Method::PUT, format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
            .json(&json!({})),
        req("a bad limit", Method::GET, format!("/api/v1/namespaces/{NAMESPACE}/configmaps?limit=abc")),
        req("a bad continue token", Method::GET, format!("/api/v1/namespaces/{NAMESPACE}/configmaps?limit=1&continue=garbage")),
        req("a bad timeoutSeconds", Method::GET, format!("/api/v1/namespaces/{NAMESPACE}/configmaps?watch=true&timeoutSeconds=abc")),
        req("a bad dryRun", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/configmaps?dryRun=Garbage"))
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "garbage"}})),
        req("resourceVersionMatch without resourceVersion", Method::GET,
            format!("/api/v1/namespaces/{NAMESPACE}/configmaps?resourceVersionMatch=Exact")),
        req("a Service with an invalid port", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/services"))
            .json(&json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad-port"},
                          "spec": {"ports": [{"port": 70000}]}})),
        req("a Service of an unknown type", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/services"))
            .json(&json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad-type"},
                          "spec": {"type": "Magic", "ports": [{"port": 80}]}})),
        req("a ConfigMap with a bad key", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-key"}, "data": {"bad key!": "x"}})),
        req("a ConfigMap with bad label keys and a bad label value", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-labels",
                          "labels": {"bad key!": "v", "a/b/c": "v", "/x": "v", "ok": "bad value!"}}})),
        req("a ConfigMap with a bad annotation key", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-annotations",
                          "annotations": {"Example.COM/Fine": "v", "no good": "v"}}})),
        req("a ConfigMap with annotations over 256 KiB", Method::POST, format!("/api/v1/namespaces/{NAMESPACE}/configmaps"))
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big-annotations",
                          "annotations": {"big": "x".repeat(262_145)}}})),
        req("a watch from a resourceVersion not reached", Method::GET,
            format!("/api/v1/namespaces/{NAMESPACE}/configmaps?watch=true&resourceVersion=999999999&timeoutSeconds=5")),
        req("a list at a resourceVersion not reached", Method::GET,
            format!("/api/v1/namespaces/{NAMESPACE}/configmaps?resourceVersion=999999999")),
        req("a get at a resourceVersion not reached", Method::GET,
            format!("/api/v1/namespaces/{NAMESPACE}/configmaps/missing?resourceVersion=999999999")),
        req("a Role with a rule without verbs", Method::POST,
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles"))
            .json(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "no-verbs"},
                          "rules": [{"apiGroups": [""], "resources": ["pods"]}]})),
        req("a Lease with a negative duration", Method::POST,
            format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"))
            .json(&json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "negative"},
                          "spec": {"leaseDurationSeconds": -1}})),
    ];
    for kind in kinds() {
        out.extend(kind_requests(&kind));
    }
    out
}

/// A response: status and body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

async fn send(client: &kube::Client, r: &Request) -> Result<Answer, BoxError> {
    let mut builder = http::Request::builder()
        .method(r.method.clone())
        .uri(&r.path)
        .header(http::header::ACCEPT, "application/json");
    if let Some(ct) = r.content_type {
        builder = builder.header(http::header::CONTENT_TYPE, ct);
    }
    let request = builder.body(kube::client::Body::from(r.body.clone().unwrap_or_default()))?;
    let response = client.send(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect_bytes().await?.to_vec();
    Ok(Answer { status, body })
}

/// `cargo xtask fidelity [--out FILE]`.
#[derive(Debug, clap::Parser)]
#[command(name = "cargo xtask fidelity")]
pub(crate) struct Args {
    /// Where to write the report.
    #[arg(long, default_value = "target/fidelity.json")]
    out: std::path::PathBuf,
}

pub(crate) async fn run(args: Args) -> ExitCode {
    match fidelity(&args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fidelity: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn fidelity(args: &Args) -> Result<ExitCode, BoxError> {
    // A fresh control plane: the corpus assumes none of its objects exist.
    if cluster::State::load().is_some() {
        eprintln!("fidelity: restarting the running control plane for a fresh state");
        cluster::down();
    }
    let state = cluster::up(None).await?;
    let result = compare(&state, args).await;
    cluster::down();
    result
}

async fn compare(state: &cluster::State, args: &Args) -> Result<ExitCode, BoxError> {
    let harness = ApiServer::start().await?;
    // Each server's first answer is compared: kube's client would retry a
    // 429, 503 or 504 on its own.
    let once = |mut config: kube::Config| {
        config.default_retry = false;
        kube::Client::try_from(config)
    };
    let harness_client = once(harness.config()?)?;
    let real = once(cluster::config_from(&state.kubeconfig).await?)?;
    let requests = corpus();
    let mut status_same = 0usize;
    let mut body_same = 0usize;
    let mut disagreements = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        if i == 1 {
            // The namespace's `default` ServiceAccount (the harness makes
            // it at once, the real controller manager a moment later) is
            // in both servers' ServiceAccount lists before they are read.
            cluster::wait_for_default_service_account(
                &real,
                NAMESPACE,
                std::time::Duration::from_secs(30),
            )
            .await?;
        }
        let (h, k) = tokio::try_join!(send(&harness_client, r), send(&real, r))?;
        let same_status = h.status == k.status;
        let (hb, kb) = (comparable(&h.body), comparable(&k.body));
        let difference = first_difference("", &hb, &kb);
        status_same += usize::from(same_status);
        body_same += usize::from(same_status && difference.is_none());
        if !same_status || difference.is_some() {
            disagreements.push(json!({
                "request": i, "what": r.what, "method": r.method.as_str(), "path": r.path,
                "harness_status": h.status, "kube_apiserver_status": k.status,
                "difference": difference,
                "harness_body": hb, "kube_apiserver_body": kb,
            }));
        }
    }
    let total = requests.len();
    let status_ratio = status_same as f64 / total as f64;
    let body_ratio = body_same as f64 / total as f64;
    let report = json!({
        "requests": total,
        "kube_apiserver": "v1.37 (tools/kubernetes/go.mod)",
        "status_agreement_ratio": status_ratio,
        "body_agreement_ratio": body_ratio,
        "disagreements": disagreements,
    });
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)?;
    for d in &disagreements {
        println!(
            "{:>4} {:<6} {} -> harness {} / kube-apiserver {}{}",
            d["request"],
            d["method"].as_str().unwrap_or_default(),
            d["what"].as_str().unwrap_or_default(),
            d["harness_status"],
            d["kube_apiserver_status"],
            d["difference"]
                .as_str()
                .map(|s| format!("\n       {s}"))
                .unwrap_or_default()
        );
    }
    println!(
        "fidelity: {total} requests, status agreement {status_ratio:.3}, body agreement {body_ratio:.3} ({} disagreements; {})",
        disagreements.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
