//! The fuzz targets of `cargo xtask fuzz`: one per parser that takes input
//! from the network or a user. Each takes raw bytes, answers a short
//! description of the outcome (which guides the fuzzer), and panics only
//! when a parser breaks a property it must keep (a round trip, a bound) —
//! or panics on its own, which is the bug being looked for.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The configuration-file parser every generated provider starts from
/// (`--cloud-config`, `--provider-config`), as `new-provider` writes it.
#[path = "../../cargo-stratus/templates/common/src/config.rs"]
#[allow(dead_code, unreachable_pub)]
mod template_config;

mod wire;
use wire::{
    cidr, cidr_seeds, kubelet_query, kubelet_query_seeds, provider_id, provider_id_seeds,
    spdy_frame, spdy_frame_seeds, spdy_headers, spdy_headers_seeds, websocket_frame,
    websocket_frame_seeds,
};

/// One fuzz target.
pub(crate) struct Target {
    /// Its name (`--target`, the corpus directory).
    pub(crate) name: &'static str,
    /// What it feeds.
    pub(crate) about: &'static str,
    /// Run one input; the answer names the outcome.
    pub(crate) run: fn(&[u8]) -> String,
    /// Built-in seeds (the committed corpus adds to them).
    pub(crate) seeds: fn() -> Vec<Vec<u8>>,
    /// Words the mutator inserts.
    pub(crate) dictionary: &'static [&'static str],
}

/// An outcome's description reduced to its kind: quoted parts (usually
/// the input echoed back) dropped, numbers as `#`, at most 48 characters,
/// so that inputs are new only when they reach a new kind of answer.
fn class(text: impl std::fmt::Display) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    for c in text.to_string().chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
            None if c.is_ascii_digit() => {
                if !out.ends_with('#') {
                    out.push('#');
                }
            }
            None => out.push(c),
        }
        if out.chars().count() >= 48 {
            break;
        }
    }
    out
}

/// The kind of an error: its enum variant where it is a typed error, else
/// the first words of its message (quoted parts and numbers left out).
fn kind<E: std::fmt::Debug + std::fmt::Display>(e: &E) -> String {
    let debug = format!("{e:?}");
    if debug.starts_with(|c: char| c.is_ascii_uppercase()) {
        debug
            .split(['(', '{', ' '])
            .next()
            .unwrap_or_default()
            .to_owned()
    } else {
        // A message: its leading plain words (an echoed input usually
        // holds other characters), at most five.
        class(e)
            .split_whitespace()
            .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()))
            .take(5)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The outcome of a `Result`: `ok` plus `shape`, or the error's kind.
fn outcome<T, E: std::fmt::Debug + std::fmt::Display>(
    result: &Result<T, E>,
    shape: impl Fn(&T) -> String,
) -> String {
    match result {
        Ok(v) => format!("ok {}", shape(v)),
        Err(e) => format!("err {}", kind(e)),
    }
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

fn seeds_of(texts: &[&str]) -> Vec<Vec<u8>> {
    texts.iter().map(|t| t.as_bytes().to_vec()).collect()
}

/// Reads structured values out of raw bytes (zeros once they run out).
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn pick<'w>(&mut self, words: &[&'w str]) -> &'w str {
        words[usize::from(self.byte()) % words.len()]
    }

    /// A JSON value at most `depth` deep, its keys and strings from the
    /// patch vocabulary.
    fn json(&mut self, depth: u8) -> Value {
        let kind = if depth == 0 {
            self.byte() % 4
        } else {
            self.byte() % 8
        };
        match kind {
            0 => Value::Null,
            1 => Value::Bool(self.byte() & 1 == 1),
            2 => json!(i64::from(self.byte() as i8) * i64::from(self.byte())),
            3 => Value::String(self.pick(STRINGS).to_owned()),
            4 | 5 => {
                let mut map = serde_json::Map::new();
                for _ in 0..self.byte() % 5 {
                    let key = self.pick(KEYS).to_owned();
                    let value = self.json(depth - 1);
                    map.insert(key, value);
                }
                Value::Object(map)
            }
            _ => Value::Array((0..self.byte() % 5).map(|_| self.json(depth - 1)).collect()),
        }
    }

    /// A JSON pointer from the vocabulary.
    fn pointer(&mut self) -> String {
        let mut path = String::new();
        for _ in 0..self.byte() % 5 {
            path.push('/');
            path.push_str(self.pick(SEGMENTS));
        }
        path
    }

    /// An RFC 6902 patch document.
    fn json_patch(&mut self) -> Value {
        let ops: Vec<Value> = (0..1 + self.byte() % 4)
            .map(|_| {
                let mut op = serde_json::Map::new();
                op.insert("op".into(), json!(self.pick(OPS)));
                op.insert("path".into(), json!(self.pointer()));
                if !self.byte().is_multiple_of(4) {
                    op.insert("value".into(), self.json(3));
                }
                if self.byte().is_multiple_of(3) {
                    op.insert("from".into(), json!(self.pointer()));
                }
                Value::Object(op)
            })
            .collect();
        Value::Array(ops)
    }
}

const KEYS: &[&str] = &[
    "metadata",
    "labels",
    "annotations",
    "finalizers",
    "spec",
    "containers",
    "initContainers",
    "name",
    "image",
    "ports",
    "containerPort",
    "protocol",
    "env",
    "value",
    "status",
    "conditions",
    "type",
    "tolerations",
    "volumes",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$setElementOrder/ports",
    "$deleteFromPrimitiveList/finalizers",
    "a",
    "b",
    "0",
    "",
];
const STRINGS: &[&str] = &[
    "replace",
    "delete",
    "merge",
    "a",
    "b",
    "web",
    "TCP",
    "UDP",
    "80",
    "",
    "containers",
    "name",
];
const SEGMENTS: &[&str] = &[
    "metadata",
    "labels",
    "spec",
    "containers",
    "0",
    "1",
    "-",
    "name",
    "a~1b",
    "~0",
    "~2",
    "99999999999999999999",
    "01",
    "-1",
    "",
    "ports",
    "finalizers",
];
const OPS: &[&str] = &["add", "remove", "replace", "move", "copy", "test", "nope"];

fn label_selector(data: &[u8]) -> String {
    let labels = json!({"app": "web", "tier": "front", "n": "5"});
    outcome(
        &stratus_apiserver::fuzz_support::label_selector(&text(data), &labels),
        |m| m.to_string(),
    )
}

fn field_selector(data: &[u8]) -> String {
    let fields = BTreeMap::from([
        ("metadata.name", "web-0".to_owned()),
        ("spec.nodeName", "node-a".to_owned()),
        ("status.phase", "Running".to_owned()),
    ]);
    outcome(
        &stratus_apiserver::fuzz_support::field_selector(&text(data), &fields),
        |m| m.to_string(),
    )
}

fn env_expansion(data: &[u8]) -> String {
    let raw = text(data);
    let lookup = |name: &str| match name {
        "A" => Some("$(B)".to_owned()),
        "B" => Some("b".repeat(8)),
        "" => Some("empty".to_owned()),
        _ => None,
    };
    let out = stratus_pod::env::expand(&raw, lookup);
    // Expansion is not recursive: each `$(NAME)` of at least 3 bytes
    // becomes at most 8.
    assert!(
        out.len() <= raw.len() * 3 + 8,
        "{} bytes expanded to {}",
        raw.len(),
        out.len()
    );
    class(format!("{} {}", out.len().min(2), out.contains("$(")))
}

fn quantity(data: &[u8]) -> String {
    let parsed = stratus_pod::env::ParsedQuantity::parse(&text(data));
    outcome(&parsed, |q| {
        format!("{} {}", q.value().signum(), q.milli_value().signum())
    })
}

fn go_duration(data: &[u8]) -> String {
    outcome(
        &stratus_runtime::duration::parse_go_duration(&text(data)),
        |d| d.as_secs().min(2).to_string(),
    )
}

fn json_patch(data: &[u8]) -> String {
    let mut bytes = Bytes::new(data);
    let mut target = bytes.json(4);
    let patch = bytes.json_patch();
    outcome(
        &stratus_apiserver::fuzz_support::json_patch(&mut target, &patch),
        |()| String::new(),
    )
}

fn merge_patch(data: &[u8]) -> String {
    let mut bytes = Bytes::new(data);
    let mut target = bytes.json(4);
    let patch = bytes.json(4);
    outcome(
        &stratus_apiserver::fuzz_support::merge_patch(&mut target, &patch),
        |()| String::new(),
    )
}

fn strategic_merge_patch(data: &[u8]) -> String {
    let mut bytes = Bytes::new(data);
    let kind = bytes.pick(&[
        "Pod",
        "Deployment",
        "Node",
        "Service",
        "ConfigMap",
        "Widget",
    ]);
    let mut target = bytes.json(5);
    let patch = bytes.json(5);
    format!(
        "{kind} {}",
        outcome(
            &stratus_apiserver::fuzz_support::strategic_merge(kind, &mut target, &patch),
            |()| String::new(),
        )
    )
}

fn structured_seeds() -> Vec<Vec<u8>> {
    vec![
        vec![4, 3, 0, 4, 1, 1, 3, 5, 0, 6, 1, 4, 2, 7, 1, 3, 9],
        (0u8..64).collect(),
        (0u8..64).map(|b| b.wrapping_mul(37)).collect(),
        vec![5; 40],
    ]
}

fn protobuf(data: &[u8]) -> String {
    use stratus_apiserver::protobuf::{decode_object, decode_watch_event, encode_object, envelope};
    let object = decode_object(data);
    if let Ok(value) = &object
        && let Ok(encoded) = encode_object(value)
    {
        let again = decode_object(&encoded);
        assert_eq!(
            again.as_ref().ok(),
            Some(value),
            "an object changed through encode"
        );
    }
    format!(
        "{} / {} / {}",
        outcome(&envelope(data), |_| String::new()),
        outcome(&object, |v| v["kind"].is_string().to_string()),
        outcome(&decode_watch_event(data), |(t, _)| matches!(
            t.as_str(),
            "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"
        )
        .to_string()),
    )
}

fn protobuf_seeds() -> Vec<Vec<u8>> {
    use stratus_apiserver::protobuf::{encode_object, encode_watch_event};
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                     "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "app", "image": "busybox",
                 "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}},
                 "ports": [{"containerPort": 80}]}]},
    });
    let map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
    [
        encode_object(&pod).ok(),
        encode_object(&map).ok(),
        encode_watch_event("ADDED", &pod).ok(),
        Some(b"k8s\0".to_vec()),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn process_config(data: &[u8]) -> String {
    outcome(
        &stratus_provider_process::ProcessConfig::from_yaml(&text(data), "/tmp/stratus-fuzz-pods"),
        |c| c.max_pods.min(2).to_string(),
    )
}

fn process_config_seeds() -> Vec<Vec<u8>> {
    seeds_of(&[
        "images: {busybox: [sh, -c], \"python:3\": [python3]}\nmaxPods: 20\n",
        "capacity: {cpu: \"4\", memory: 8Gi}\nnodeLabels: {zone: lab}\nnodeTaints: [{key: a, effect: NoSchedule}]\n",
        "allowedHostPaths: [/data]\nlogLimitBytes: 1048576\nlogMaxFiles: 3\nmemoryReserveBytes: 0\n",
    ])
}

fn cloud_config(data: &[u8]) -> String {
    let parsed = template_config::Config::parse((!data.is_empty()).then_some(data));
    outcome(&parsed, |c| c.region.is_some().to_string())
}

fn offload_config(data: &[u8]) -> String {
    outcome(
        &stratus_provider_kubernetes::OffloadConfig::from_yaml(&text(data)),
        |_| String::new(),
    )
}

fn offload_config_seeds() -> Vec<Vec<u8>> {
    seeds_of(&[
        "remoteKubeconfig: /etc/remote/kubeconfig\nnamespaces: {mode: prefix, prefix: home-}\n",
        "remoteKubeconfigSecret: {namespace: kube-system, name: remote, key: kubeconfig}\nnamespaces: {mode: single, namespace: offloaded}\n",
    ])
}

/// Split the input into command-line arguments (one per line).
fn argv(program: &str, data: &[u8]) -> Vec<String> {
    std::iter::once(program.to_owned())
        .chain(text(data).split('\n').map(str::to_owned).take(32))
        .collect()
}

fn manager_flags(data: &[u8]) -> String {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: stratus_ccm::app::ManagerOptions,
    }
    match Cli::try_parse_from(argv("cloud-controller-manager", data)) {
        Ok(cli) => {
            let problems = cli.options.validate(&stratus_ccm::app::known_controllers());
            format!(
                "parsed, {} problems {}",
                problems.len().min(3),
                problems.first().map(kind).unwrap_or_default()
            )
        }
        Err(e) => format!("refused {:?}", e.kind()),
    }
}

fn manager_flags_seeds() -> Vec<Vec<u8>> {
    seeds_of(&[
        "--cloud-provider=fake\n--cluster-cidr=10.244.0.0/16\n--allocate-node-cidrs",
        "--cloud-provider=fake\n--controllers=*,-route\n--leader-elect-lease-duration=15s\n--concurrent-service-syncs=5",
        "--cloud-provider=fake\n--node-monitor-period=1m30s\n--feature-gates=CloudDualStackNodeIPs=true\n--v=4\n--vmodule=node=5",
    ])
}

fn kubelet_flags(data: &[u8]) -> String {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: stratus_kubelet::app::KubeletOptions,
    }
    match Cli::try_parse_from(argv("virtual-kubelet", data)) {
        Ok(cli) => outcome(&cli.options.node_names(), |n| n.len().min(3).to_string()),
        Err(e) => format!("refused {:?}", e.kind()),
    }
}

fn kubelet_flags_seeds() -> Vec<Vec<u8>> {
    seeds_of(&[
        "--nodename=vk-0,vk-1\n--provider=mock\n--os=Linux\n--pod-sync-workers=10",
        "--nodename=vk\n--full-resync-period=1m\n--startup-timeout=30s\n--metrics-addr=:10255\n--disable-taint",
    ])
}

/// Every target.
pub(crate) static TARGETS: &[Target] = &[
    Target {
        name: "harness-query",
        about: "the harness API server's query parameters, over HTTP (list, watch, patch, delete)",
        run: crate::fuzz_live::harness_query,
        seeds: crate::fuzz_live::harness_query_seeds,
        dictionary: crate::fuzz_live::EXTREME_DICTIONARY,
    },
    Target {
        name: "kubelet-api-query",
        about: "the kubelet API's query parameters, over HTTPS to the MockPodProvider (logs, port-forward, stats, pods)",
        run: crate::fuzz_live::kubelet_live,
        seeds: crate::fuzz_live::kubelet_live_seeds,
        dictionary: crate::fuzz_live::EXTREME_DICTIONARY,
    },
    Target {
        name: "spdy-frame",
        about: "SPDY/3.1 frames (kubectl exec/attach/port-forward over SPDY)",
        run: spdy_frame,
        seeds: spdy_frame_seeds,
        dictionary: &["\u{80}\u{3}\0\u{1}", "\u{80}\u{3}\0\u{6}", "\0\0\0\u{8}"],
    },
    Target {
        name: "spdy-headers",
        about: "SPDY header blocks, plain and zlib-compressed with the SPDY dictionary",
        run: spdy_headers,
        seeds: spdy_headers_seeds,
        dictionary: &["streamtype", "port", "\0\0\0\u{1}", "\0\0\0\0"],
    },
    Target {
        name: "websocket-frame",
        about: "WebSocket channel messages (channel.k8s.io v1, v4, v5, base64)",
        run: websocket_frame,
        seeds: websocket_frame_seeds,
        dictionary: &["\u{ff}", "aGk=", "="],
    },
    Target {
        name: "kubelet-query",
        about: "kubelet API query parameters (logs, exec, attach, port-forward)",
        run: kubelet_query,
        seeds: kubelet_query_seeds,
        dictionary: &[
            "&",
            "=",
            "%",
            "tailLines=",
            "port=",
            "command=",
            "sinceTime=",
            "limitBytes=",
            "tty=true",
        ],
    },
    Target {
        name: "provider-id",
        about: "provider IDs (<provider>://<id>)",
        run: provider_id,
        seeds: provider_id_seeds,
        dictionary: &["://", "/", "\0"],
    },
    Target {
        name: "cidr",
        about: "CIDRs, sloppy IPs, node-IP annotations, --cluster-cidr lists, the CIDR allocator",
        run: cidr,
        seeds: cidr_seeds,
        dictionary: &["/", ".", ":", "::", ",", "255", "0x", "%eth0"],
    },
    Target {
        name: "label-selector",
        about: "label selectors (the harness's labelSelector parameter)",
        run: label_selector,
        seeds: || {
            seeds_of(&[
                "app=web,tier!=back",
                "app in (web,db),!canary",
                "n>3,n<10",
                "app,!x",
                "a notin (b)",
            ])
        },
        dictionary: &[" in ", " notin ", "(", ")", "!", "==", "!=", ">", "<", ","],
    },
    Target {
        name: "field-selector",
        about: "field selectors (the harness's fieldSelector parameter)",
        run: field_selector,
        seeds: || {
            seeds_of(&[
                "spec.nodeName=node-a",
                "status.phase!=Failed,metadata.name==web-0",
                "metadata.name=a\\,b",
            ])
        },
        dictionary: &["=", "==", "!=", ",", "\\", "spec.nodeName"],
    },
    Target {
        name: "env-expansion",
        about: "$(VAR) expansion in env values, commands and args",
        run: env_expansion,
        seeds: || seeds_of(&["$(A)/bin", "$$(A)", "$(UNDEFINED)", "cost: $5", "$(B)$(A"]),
        dictionary: &["$(", ")", "$$", "A", "B"],
    },
    Target {
        name: "quantity",
        about: "resource quantities (downward API resourceFieldRef, limits)",
        run: quantity,
        seeds: || {
            seeds_of(&[
                "1Gi",
                "250m",
                "1.5",
                "1e3",
                "9223372036854775807",
                "-0.0001n",
                "8E",
            ])
        },
        dictionary: &["Ki", "Mi", "Gi", "Ei", "m", "n", "e", "E", ".", "-", "+"],
    },
    Target {
        name: "go-duration",
        about: "Go durations (every duration flag)",
        run: go_duration,
        seeds: || seeds_of(&["1m30s", "15s", "1.5h", "-2s", "300ms", "0", "1us2ns"]),
        dictionary: &["h", "m", "s", "ms", "us", "µs", "ns", ".", "-"],
    },
    Target {
        name: "json-patch",
        about: "RFC 6902 JSON patches in the harness (structured)",
        run: json_patch,
        seeds: structured_seeds,
        dictionary: &[],
    },
    Target {
        name: "merge-patch",
        about: "RFC 7386 JSON merge patches in the harness (structured)",
        run: merge_patch,
        seeds: structured_seeds,
        dictionary: &[],
    },
    Target {
        name: "strategic-merge-patch",
        about: "strategic merge patches in the harness, with directives (structured)",
        run: strategic_merge_patch,
        seeds: structured_seeds,
        dictionary: &[],
    },
    Target {
        name: "protobuf",
        about: "Kubernetes protobuf envelopes, objects and watch events",
        run: protobuf,
        seeds: protobuf_seeds,
        dictionary: &["k8s\0", "\n\u{2}v1", "\u{12}\u{3}Pod"],
    },
    Target {
        name: "process-config",
        about: "the process node's configuration file (YAML)",
        run: process_config,
        seeds: process_config_seeds,
        dictionary: &[
            ": ", "\n", "{", "}", "[", "]", "maxPods", "capacity", "images", "-", "Gi",
        ],
    },
    Target {
        name: "cloud-config",
        about: "the configuration file of a generated provider (--cloud-config / --provider-config, YAML)",
        run: cloud_config,
        seeds: || {
            seeds_of(&[
                "region: eu-1\n",
                "",
                "regoin: x",
                "region: ''\n",
                "[not, a, map]",
            ])
        },
        dictionary: &[": ", "\n", "region", "'", "\"", "{", "}", "- "],
    },
    Target {
        name: "offload-config",
        about: "the offload node's provider configuration (YAML)",
        run: offload_config,
        seeds: offload_config_seeds,
        dictionary: &[
            ": ",
            "\n",
            "{",
            "}",
            "namespaces",
            "mode",
            "prefix",
            "single",
            "same",
        ],
    },
    Target {
        name: "manager-flags",
        about: "the cloud controller manager's flags (parsed and validated)",
        run: manager_flags,
        seeds: manager_flags_seeds,
        dictionary: &[
            "\n--",
            "=",
            ",",
            "-",
            "*",
            "s",
            "10.0.0.0/8",
            "--controllers=",
            "--cluster-cidr=",
        ],
    },
    Target {
        name: "kubelet-flags",
        about: "the virtual-kubelet command's flags (parsed, node names checked)",
        run: kubelet_flags,
        seeds: kubelet_flags_seeds,
        dictionary: &["\n--", "=", ",", "--nodename=", "--kubelet-port=", "-"],
    },
];
