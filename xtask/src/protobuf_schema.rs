//! `cargo xtask protobuf-schema [--check]`: writes the table of protobuf field
//! numbers the harness API server uses to read and write
//! `application/vnd.kubernetes.protobuf` bodies.
//!
//! The table joins two registry crates the workspace already resolves:
//! `k8s-pb` (prost types generated from Kubernetes' `generated.proto` files:
//! field numbers and wire types) and `k8s-openapi` (the JSON names, which
//! fields are required, and each resource's `apiVersion` and `kind`). Fields
//! are matched by name with case and underscores ignored (`volume_id` is
//! `volumeID`), which is unambiguous within one message.
//!
//! The output, `crates/stratus-apiserver/src/protobuf/k8s.schema`, is plain
//! text, one line per message or field:
//!
//! ```text
//! T io.k8s.api.core.v1.Namespace v1 Namespace
//! 1 metadata - message io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta
//! ```
//!
//! A field line is `<number> <json name> <flags> <type> [<message>]`: flags
//! `r` (repeated), `q` (required in the OpenAPI schema), `i` (an embedded
//! message whose fields are inline in JSON, named `-`), `-` (none); types
//! are protobuf scalars, `message NAME`, or `map string <value type> [NAME]`.
//! Messages without an OpenAPI definition whose only field is a repeated
//! `items` (such as `Verbs`) are lists in JSON and are marked `L` instead of
//! `T`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::generated;

/// Where the table is written, relative to the workspace root.
pub(crate) const OUTPUT: &str = "crates/stratus-apiserver/src/protobuf/k8s.schema";

/// Messages whose JSON is not an object of their fields; the codec
/// translates them by hand.
const WELL_KNOWN: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];

/// A message as k8s-openapi describes it.
#[derive(Default)]
struct OpenApiType {
    /// Normalized name → JSON name.
    json: HashMap<String, String>,
    /// Rust fields that are not `Option`.
    required: Vec<String>,
    api_version: Option<String>,
    kind: Option<String>,
}

/// A message field as k8s-pb declares it.
struct PbField {
    rust_name: String,
    number: u32,
    repeated: bool,
    /// `string`, `int32`, ..., `message`, or `map`.
    kind: String,
    /// For maps, the value's kind.
    map_value: Option<String>,
    /// The referenced message's definition name.
    message: Option<String>,
}

struct PbMessage {
    definition: String,
    fields: Vec<PbField>,
}

fn normalize(name: &str) -> String {
    name.trim_start_matches("r#")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Run the task.
pub(crate) fn run(args: &[String]) -> ExitCode {
    generated::write_or_check("protobuf-schema", args, || {
        Ok(vec![(PathBuf::from(OUTPUT), generate()?)])
    })
}

/// The source directories of a package of the resolved graph.
fn package_dir(metadata: &serde_json::Value, name: &str) -> Result<(PathBuf, String), String> {
    let packages = metadata["packages"]
        .as_array()
        .ok_or("cargo metadata has no packages")?;
    let pkg = packages
        .iter()
        .find(|p| p["name"] == name)
        .ok_or_else(|| format!("{name} is not in the dependency graph"))?;
    let manifest = pkg["manifest_path"]
        .as_str()
        .ok_or("a package without a manifest path")?;
    let dir = Path::new(manifest)
        .parent()
        .ok_or("a manifest without a directory")?
        .to_path_buf();
    Ok((dir, pkg["version"].as_str().unwrap_or("?").to_owned()))
}

fn generate() -> Result<String, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let (pb_dir, pb_version) = package_dir(&metadata, "k8s-pb")?;
    let (oa_dir, oa_version) = package_dir(&metadata, "k8s-openapi")?;
    let oa_module = latest_module(&oa_dir)?;
    let openapi = read_openapi(&oa_dir.join("src").join(&oa_module))?;
    let messages = read_pb(&pb_dir.join("src"))?;

    let mut text = format!(
        "# Protobuf field numbers of the Kubernetes API types, for the harness API server.\n\
         # Generated by `cargo xtask protobuf-schema` from k8s-pb {pb_version} (field numbers)\n\
         # and k8s-openapi {oa_version} / {oa_module} (JSON names); do not edit.\n"
    );
    // k8s-openapi keeps Go's names (`AWSElastic...`), prost renames them
    // (`AwsElastic...`): both are matched lower-cased and written as Go's.
    let by_lower: HashMap<String, &String> = openapi
        .keys()
        .map(|k| (k.to_ascii_lowercase(), k))
        .collect();
    let canonical = |lower: &str| -> String {
        by_lower
            .get(lower)
            .map_or_else(|| lower.to_owned(), |k| (*k).clone())
    };
    let mut unmatched = 0usize;
    let mut written = 0usize;
    // Types embedded in Go without a definition of their own (`VolumeSource`
    // in `Volume`): written once, with the JSON names of the type that
    // embeds them.
    let mut embedded: Vec<(String, &OpenApiType)> = Vec::new();
    let mut embedded_done: Vec<String> = Vec::new();
    let mut queue: Vec<(String, &PbMessage, &OpenApiType)> = Vec::new();
    for (lower, msg) in &messages {
        let oa = by_lower.get(lower).and_then(|k| openapi.get(*k));
        let list_wrapper = oa.is_none()
            && msg.fields.len() == 1
            && msg.fields[0].rust_name == "items"
            && msg.fields[0].repeated;
        let Some(oa) = oa else {
            if list_wrapper {
                let f = &msg.fields[0];
                let _ = writeln!(text, "L {lower} {} {}", f.number, f.kind);
                written += 1;
            }
            continue;
        };
        let mut header = format!("T {}", canonical(lower));
        if let (Some(v), Some(k)) = (&oa.api_version, &oa.kind) {
            let _ = write!(header, " {v} {k}");
        }
        queue.push((header, msg, oa));
    }
    // Write the queued messages; their fields may queue embedded types.
    let mut done = 0;
    loop {
        while done < queue.len() {
            let (msg, oa) = (queue[done].1, queue[done].2);
            let _ = writeln!(text, "{}", queue[done].0);
            written += 1;
            unmatched += write_fields(
                &mut text,
                msg,
                oa,
                &canonical,
                &by_lower,
                &messages,
                &mut embedded,
            );
            done += 1;
        }
        let Some((lower, oa)) = embedded.pop() else {
            break;
        };
        if embedded_done.contains(&lower) || by_lower.contains_key(&lower) {
            continue;
        }
        let Some(msg) = messages.get(&lower) else {
            continue;
        };
        queue.push((format!("T {lower}"), msg, oa));
        embedded_done.push(lower);
    }
    eprintln!("{written} messages, {unmatched} fields without a JSON name");
    Ok(text)
}

/// The version module `latest` selects (`v1_37` for `latest = ["v1_37"]`).
fn latest_module(dir: &Path) -> Result<String, String> {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).map_err(|e| e.to_string())?;
    manifest
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("latest = [\"")
                .and_then(|r| r.strip_suffix("\"]"))
        })
        .map(str::to_owned)
        .ok_or_else(|| "k8s-openapi's Cargo.toml has no latest feature".to_owned())
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            rs_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn quoted(s: &str) -> Option<&str> {
    let start = s.find('"')? + 1;
    let len = s[start..].find('"')?;
    Some(&s[start..start + len])
}

fn read_openapi(dir: &Path) -> Result<HashMap<String, OpenApiType>, String> {
    let mut files = Vec::new();
    rs_files(dir, &mut files)?;
    let mut out = HashMap::new();
    for file in files {
        let src = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        let Some(definition) = src
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// Generated from definition "))
        else {
            continue;
        };
        let mut ty = OpenApiType::default();
        let mut in_struct = false;
        for line in src.lines() {
            let t = line.trim();
            if line.starts_with("pub struct ") && line.ends_with('{') {
                in_struct = true;
            } else if in_struct && line == "}" {
                in_struct = false;
            } else if in_struct && let Some(rest) = line.strip_prefix("    pub ") {
                if let Some((name, ty_text)) = rest.split_once(": ")
                    && !ty_text.starts_with("Option<")
                {
                    ty.required.push(name.to_owned());
                }
            } else if t.contains("=> Field::Key_")
                && let Some(json) = quoted(t)
            {
                ty.json.insert(normalize(json), json.to_owned());
            } else if t.starts_with("const API_VERSION: &'static str = ") {
                ty.api_version = quoted(t).map(str::to_owned);
            } else if t.starts_with("const KIND: &'static str = ") {
                ty.kind = quoted(t).map(str::to_owned);
            }
        }
        out.insert(definition.to_owned(), ty);
    }
    Ok(out)
}

/// `api/core/v1/mod.rs` → `io.k8s.api.core.v1`.
fn definition_prefix(module: &[String]) -> String {
    let mut parts = vec!["io".to_owned(), "k8s".to_owned()];
    for (i, m) in module.iter().enumerate() {
        parts.push(if i == 0 {
            m.replace('_', "-")
        } else {
            m.clone()
        });
    }
    parts.join(".")
}

fn read_pb(dir: &Path) -> Result<BTreeMap<String, PbMessage>, String> {
    let mut files = Vec::new();
    rs_files(dir, &mut files)?;
    // Struct names in one module, lower-cased → definition name (prost
    // renames `AWSElastic...` to `AwsElastic...`; k8s-openapi keeps Go's).
    let mut out = BTreeMap::new();
    for file in files {
        if file.file_name().is_none_or(|n| n != "mod.rs") {
            continue;
        }
        let rel = file
            .parent()
            .and_then(|p| p.strip_prefix(dir).ok())
            .ok_or("a module outside the source directory")?;
        let module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.is_empty() {
            continue;
        }
        let src = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        parse_pb_module(&src, &module, &mut out)?;
    }
    Ok(out)
}

fn parse_pb_module(
    src: &str,
    module: &[String],
    out: &mut BTreeMap<String, PbMessage>,
) -> Result<(), String> {
    let prefix = definition_prefix(module);
    let mut current: Option<PbMessage> = None;
    let mut pending: Option<String> = None;
    let mut decl = String::new();
    for line in src.lines() {
        let t = line.trim();
        if let Some(name) = t
            .strip_prefix("pub struct ")
            .and_then(|r| r.strip_suffix(" {}"))
        {
            let definition = format!("{prefix}.{name}");
            out.insert(
                definition.to_ascii_lowercase(),
                PbMessage {
                    definition,
                    fields: Vec::new(),
                },
            );
            continue;
        }
        if let Some(name) = t
            .strip_prefix("pub struct ")
            .and_then(|r| r.strip_suffix(" {"))
        {
            current = Some(PbMessage {
                definition: format!("{prefix}.{name}"),
                fields: Vec::new(),
            });
            continue;
        }
        if t == "}" && pending.is_none() {
            if let Some(msg) = current.take() {
                out.insert(msg.definition.to_ascii_lowercase(), msg);
            }
            continue;
        }
        if current.is_none() || t.starts_with("///") {
            continue;
        }
        if let Some(attr) = t
            .strip_prefix("#[prost(")
            .and_then(|r| r.strip_suffix(")]"))
        {
            pending = Some(attr.to_owned());
            decl.clear();
            continue;
        }
        if let Some(attr) = &pending {
            decl.push_str(t);
            let open = decl.matches('<').count();
            if !t.ends_with(',') || open != decl.matches('>').count() {
                continue;
            }
            let field = parse_pb_field(attr, &decl, module)?;
            if let Some(msg) = current.as_mut() {
                msg.fields.push(field);
            }
            pending = None;
        }
    }
    Ok(())
}

fn parse_pb_field(attr: &str, decl: &str, module: &[String]) -> Result<PbField, String> {
    let decl = decl
        .strip_prefix("pub ")
        .ok_or_else(|| format!("unexpected field {decl}"))?;
    let (rust_name, ty) = decl
        .split_once(':')
        .ok_or_else(|| format!("unexpected field {decl}"))?;
    let number = attr
        .split("tag = \"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no tag in {attr}"))?;
    let first = attr.split(',').next().unwrap_or_default().trim();
    let repeated = attr.contains("repeated");
    let (kind, map_value) = if let Some(map) = attr.strip_prefix("btree_map = \"") {
        let value = map
            .split('"')
            .next()
            .and_then(|types| types.split(", ").nth(1))
            .ok_or_else(|| format!("a map without a value type: {attr}"))?;
        ("map".to_owned(), Some(value.to_owned()))
    } else if first.starts_with("bytes") {
        ("bytes".to_owned(), None)
    } else {
        (first.to_owned(), None)
    };
    let message = if kind == "message" || map_value.as_deref() == Some("message") {
        Some(resolve_type(ty, module)?)
    } else {
        None
    };
    Ok(PbField {
        rust_name: rust_name.trim().to_owned(),
        number,
        repeated,
        kind,
        map_value,
        message,
    })
}

/// The definition name of the message a field's Rust type refers to.
fn resolve_type(ty: &str, module: &[String]) -> Result<String, String> {
    // The innermost path: the last generic argument, without wrappers.
    let inner = ty
        .trim_end_matches([',', '>', ' '])
        .rsplit(['<', ' ', ','])
        .next()
        .ok_or_else(|| format!("no type in {ty}"))?;
    let mut segments: Vec<&str> = inner.split("::").collect();
    let name = segments.pop().ok_or("an empty type")?;
    let mut base: Vec<String> = module.to_vec();
    for s in segments {
        if s == "super" {
            base.pop();
        } else {
            base.push(s.to_owned());
        }
    }
    Ok(format!("{}.{name}", definition_prefix(&base)).to_ascii_lowercase())
}

/// Write a message's field lines; returns how many fields had no JSON name.
fn write_fields<'a>(
    text: &mut String,
    msg: &PbMessage,
    oa: &'a OpenApiType,
    canonical: &dyn Fn(&str) -> String,
    by_lower: &HashMap<String, &String>,
    messages: &BTreeMap<String, PbMessage>,
    embedded: &mut Vec<(String, &'a OpenApiType)>,
) -> usize {
    let mut unmatched = 0;
    for f in &msg.fields {
        let key = normalize(&f.rust_name);
        let Some(json) = oa.json.get(&key) else {
            // A message field without a JSON name is embedded in Go and
            // inline in JSON (`Volume.volumeSource`): its fields are the
            // parent's.
            // (One whose fields the parent does not name either is a field
            // k8s-openapi does not know, such as an alpha one.)
            if f.kind == "message"
                && !f.repeated
                && let Some(m) = &f.message
                && (by_lower.contains_key(m)
                    || messages.get(m).is_some_and(|e| {
                        e.fields
                            .iter()
                            .any(|ef| oa.json.contains_key(&normalize(&ef.rust_name)))
                    }))
            {
                if !by_lower.contains_key(m) {
                    embedded.push((m.clone(), oa));
                }
                let _ = writeln!(text, "{} - i message {}", f.number, canonical(m));
                continue;
            }
            if WELL_KNOWN
                .iter()
                .any(|w| msg.definition.eq_ignore_ascii_case(w))
            {
                // Translated by hand in the codec (`well_known.rs`).
                continue;
            }
            unmatched += 1;
            eprintln!(
                "warning: {}.{} has no JSON name in k8s-openapi; left out",
                msg.definition, f.rust_name
            );
            continue;
        };
        let required = oa.required.iter().any(|r| normalize(r) == key);
        let flags = match (f.repeated, required) {
            (true, _) => "r",
            (false, true) => "q",
            (false, false) => "-",
        };
        let mut line = format!("{} {json} {flags} {}", f.number, f.kind);
        if let Some(v) = &f.map_value {
            let _ = write!(line, " string {v}");
        }
        if let Some(m) = &f.message {
            let _ = write!(line, " {}", canonical(m));
        }
        let _ = writeln!(text, "{line}");
    }
    unmatched
}
