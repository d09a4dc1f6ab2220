//! `cargo xtask new-provider --kind ccm|virtual-kubelet --name NAME`: write
//! a standalone provider crate from `templates/<kind>/`: the provider with
//! every trait method present and answering `NotImplemented`, a `main.rs`
//! that registers it and hands over to the Stratus command, its unit tests,
//! the conformance test, a test of the binary against the in-memory API
//! server, a Dockerfile, deploy manifests for its name, a README and a CI
//! workflow. The crate builds and passes its tests as generated.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use serde_json::{Value, json};

use crate::generated::root;
use crate::manifests::documents;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Kind {
    /// A cloud controller manager.
    Ccm,
    /// A virtual kubelet.
    VirtualKubelet,
}

/// `cargo xtask new-provider`.
#[derive(Debug, Parser)]
#[command(
    name = "new-provider",
    about = "Generate a provider crate outside this workspace"
)]
pub(crate) struct Args {
    /// A cloud controller manager or a virtual kubelet.
    #[arg(long, value_enum)]
    kind: Kind,
    /// The provider's name (`--cloud-provider` / `--provider`, the
    /// provider-ID scheme, the taint's value): a lowercase DNS label.
    #[arg(long)]
    name: String,
    /// Where to write the crate (default: `./<name>-cloud-controller-manager`
    /// or `./<name>-virtual-kubelet`); must not exist or be empty.
    #[arg(long)]
    path: Option<PathBuf>,
    /// Depend on the published Stratus crates of this version instead of
    /// this checkout's `crates/stratus` by path.
    #[arg(long)]
    stratus_version: Option<String>,
    /// The oldest Kubernetes minor the binary serves (`1.34` … `1.37`):
    /// the k8s-openapi feature it enables (`v1_34`, ...). Default: the
    /// newest (`latest`).
    #[arg(long)]
    kubernetes: Option<String>,
}

/// The template files of each kind, relative to the new crate's root: its
/// own, then those of both kinds (`templates/common`).
fn templates(kind: Kind) -> Vec<(&'static str, &'static str)> {
    macro_rules! files {
        ($dir:literal: $($file:literal),* $(,)?) => {
            [$(($file, include_str!(concat!("../../templates/", $dir, "/", $file)))),*]
        };
    }
    let mut all: Vec<_> = match kind {
        Kind::Ccm => files!("ccm":
            "Cargo.toml", "README.md", "src/main.rs", "src/lib.rs", "src/instances.rs",
            "src/load_balancer.rs", "src/routes.rs", "tests/conformance.rs", "tests/manager.rs",
            "tests/e2e.rs",
        )
        .to_vec(),
        Kind::VirtualKubelet => files!("virtual-kubelet":
            "Cargo.toml", "README.md", "src/main.rs", "src/lib.rs", "tests/conformance.rs",
            "tests/node.rs", "tests/e2e.rs",
        )
        .to_vec(),
    };
    all.extend(files!("common":
        "src/config.rs", "Dockerfile", ".gitignore", ".github/workflows/ci.yml",
    ));
    all
}

/// Why a name cannot be a provider's.
fn check_name(name: &str) -> Result<(), String> {
    let ok = (2..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--name {name:?} is not a provider name: 2 to 40 lowercase letters, digits and single dashes, starting with a letter and ending with a letter or digit"
        ))
    }
}

/// `acme-cloud` → `AcmeCloud`.
fn type_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// The version requirement of `dependency` in the workspace manifest
/// (`name = "1.2"` or `name = { version = "1.2", ... }`), so a generated
/// crate resolves the same versions as the workspace.
fn workspace_version(manifest: &str, dependency: &str) -> Result<String, String> {
    manifest
        .lines()
        .filter_map(|line| {
            line.strip_prefix(dependency)?
                .trim_start()
                .strip_prefix('=')
        })
        .find_map(|rest| {
            let rest = rest.trim();
            let rest = rest
                .strip_prefix('{')
                .and_then(|r| {
                    Some(
                        r.split_once("version")?
                            .1
                            .trim_start()
                            .strip_prefix('=')?
                            .trim(),
                    )
                })
                .unwrap_or(rest);
            Some(rest.strip_prefix('"')?.split('"').next()?.to_owned())
        })
        .ok_or_else(|| format!("no version of {dependency} in the workspace Cargo.toml"))
}

/// Replace every `{{key}}`; a placeholder left over is an error.
fn render(template: &str, values: &[(&str, String)], file: &str) -> Result<String, String> {
    let mut text = template.to_owned();
    for (key, value) in values {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    match text.find("{{") {
        Some(at) => Err(format!(
            "templates: {file} has an unknown placeholder at {:?}",
            &text[at..(at + 30).min(text.len())]
        )),
        None => Ok(text),
    }
}

/// The virtual kubelet's Deployment: one replica (a node is one process;
/// `Recreate`, so an upgrade never runs two processes writing the same
/// Node), the node's IP from the downward API.
fn virtual_kubelet_deployment(name: &str, krate: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": krate, "namespace": "kube-system", "labels": {"app": krate}},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": krate}},
            "template": {
                "metadata": {"labels": {"app": krate}},
                "spec": {
                    "serviceAccountName": krate,
                    "containers": [{
                        "name": krate,
                        "image": image,
                        "args": [format!("--provider={name}"), format!("--nodename=vk-{name}")],
                        "env": [{"name": "VKUBELET_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                        "ports": [{"name": "kubelet-api", "containerPort": 10250}, {"name": "metrics", "containerPort": 10255}],
                    }],
                },
            },
        },
    })
}

/// The generated deploy manifests, from the same declarations as
/// `cargo xtask manifests`.
fn manifests(kind: Kind, name: &str, krate: &str) -> Result<Vec<(String, String)>, String> {
    let image = format!("registry.example.com/{krate}:latest");
    let header =
        |what: &str| format!("# {what}\n# Generated by Stratus's `cargo xtask new-provider`.\n");
    Ok(match kind {
        Kind::Ccm => {
            let mut config = stratus_ccm::app::deploy::DeployConfig::new(name, image);
            config.name = krate.to_owned();
            vec![
                (
                    "deploy/rbac.yaml".into(),
                    header(
                        "ServiceAccount, one ClusterRole per controller, the leader-election Role.",
                    ) + &documents(&stratus_ccm::app::deploy::rbac(
                        &config,
                        &stratus_ccm::app::default_controllers(),
                    ))?,
                ),
                (
                    "deploy/deployment.yaml".into(),
                    header("The manager: two replicas, one leader.")
                        + &documents(&[stratus_ccm::app::deploy::deployment_value(&config)])?,
                ),
            ]
        }
        Kind::VirtualKubelet => vec![
            (
                "deploy/rbac.yaml".into(),
                header("The node's ServiceAccount and the least access it needs.")
                    + &documents(&stratus_kubelet::app::rbac::rbac("kube-system", krate))?,
            ),
            (
                "deploy/deployment.yaml".into(),
                header("The virtual node: one process per node.")
                    + &documents(&[virtual_kubelet_deployment(name, krate, &image)])?,
            ),
        ],
    })
}

/// Every file of the new crate, relative to its root.
pub(crate) fn files(
    kind: Kind,
    name: &str,
    stratus_version: Option<&str>,
    kubernetes: Option<&str>,
) -> Result<Vec<(String, String)>, String> {
    check_name(name)?;
    let k8s_feature = match kubernetes {
        Some(version) => crate::kubernetes_versions::feature(version)?,
        None => "latest".to_owned(),
    };
    let krate = match kind {
        Kind::Ccm => format!("{name}-cloud-controller-manager"),
        Kind::VirtualKubelet => format!("{name}-virtual-kubelet"),
    };
    let manifest = std::fs::read_to_string(root().join("Cargo.toml"))
        .map_err(|e| format!("reading the workspace Cargo.toml: {e}"))?;
    let stratus = match stratus_version {
        Some(v) => format!("version = \"{v}\""),
        None => {
            let path = std::fs::canonicalize(root().join("crates/stratus"))
                .map_err(|e| format!("finding crates/stratus: {e}"))?;
            format!("path = \"{}\"", path.display())
        }
    };
    let mut values = vec![
        ("name", name.to_owned()),
        ("crate_ident", krate.replace('-', "_")),
        ("crate", krate.clone()),
        ("Type", type_name(name)),
        ("stratus", stratus),
        ("k8s_feature", k8s_feature),
        (
            "config_flag",
            match kind {
                Kind::Ccm => "--cloud-config",
                Kind::VirtualKubelet => "--provider-config",
            }
            .to_owned(),
        ),
        (
            "backend",
            match kind {
                Kind::Ccm => "cloud",
                Kind::VirtualKubelet => "backend",
            }
            .to_owned(),
        ),
    ];
    for (key, dependency) in [
        ("k8s_openapi", "k8s-openapi"),
        ("kube", "kube"),
        ("tokio", "tokio"),
        ("async_trait", "async-trait"),
        ("serde", "serde"),
        ("serde_saphyr", "serde-saphyr"),
        ("thiserror", "thiserror"),
    ] {
        values.push((key, workspace_version(&manifest, dependency)?));
    }
    let mut out = Vec::new();
    for (file, template) in templates(kind) {
        out.push((file.to_owned(), render(template, &values, file)?));
    }
    out.extend(manifests(kind, name, &krate)?);
    if stratus_version.is_none() {
        // The workspace's lock file: the same versions as this checkout's
        // builds (Cargo drops what the new crate does not use).
        let lock = std::fs::read_to_string(root().join("Cargo.lock"))
            .map_err(|e| format!("reading the workspace Cargo.lock: {e}"))?;
        out.push(("Cargo.lock".into(), lock));
    }
    Ok(out)
}

fn write(dir: &Path, files: &[(String, String)]) -> Result<(), String> {
    if dir.exists()
        && std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .next()
            .is_some()
    {
        return Err(format!("{} exists and is not empty", dir.display()));
    }
    for (file, text) in files {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

pub(crate) fn run(args: &[String]) -> ExitCode {
    let args = match crate::parse::<Args>(args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let made = files(
        args.kind,
        &args.name,
        args.stratus_version.as_deref(),
        args.kubernetes.as_deref(),
    )
    .and_then(|files| {
        let krate = files
            .iter()
            .find(|(f, _)| f == "Cargo.toml")
            .and_then(|(_, t)| {
                t.lines()
                    .find_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
            })
            .unwrap_or("provider")
            .to_owned();
        let dir = args.path.clone().unwrap_or_else(|| PathBuf::from(&krate));
        write(&dir, &files)?;
        Ok(dir)
    });
    match made {
        Ok(dir) => {
            // Formatted for the name it was generated with (line widths
            // depend on it); a machine without rustfmt keeps the template's
            // layout.
            let formatted = std::process::Command::new("cargo")
                .arg("fmt")
                .current_dir(&dir)
                .status();
            if !formatted
                .as_ref()
                .is_ok_and(std::process::ExitStatus::success)
            {
                eprintln!(
                    "new-provider: `cargo fmt` did not run in {} ({formatted:?}); the files keep the templates' layout",
                    dir.display()
                );
            }
            println!(
                "new-provider: wrote {}\nnext: cd {} && cargo test   (the conformance test lists the methods left to write)",
                dir.display(),
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("new-provider: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        for good in ["acme", "acme-cloud", "a1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a",
            "Acme",
            "1acme",
            "acme-",
            "ac--me",
            "acme_cloud",
            "acme.cloud",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(type_name("acme-cloud"), "AcmeCloud");
        assert_eq!(type_name("x1"), "X1");
    }

    #[test]
    fn versions_come_from_the_workspace_manifest() {
        let manifest = "serde = { version = \"1.0.2\", features = [\"derive\"] }\nkube = \"5.0.0\"\nkube-runtime = \"5.1\"\n";
        assert_eq!(workspace_version(manifest, "serde").unwrap(), "1.0.2");
        assert_eq!(workspace_version(manifest, "kube").unwrap(), "5.0.0");
        assert_eq!(workspace_version(manifest, "kube-runtime").unwrap(), "5.1");
        assert!(workspace_version(manifest, "tokio").is_err());
    }

    #[test]
    fn every_placeholder_is_filled_for_both_kinds() {
        for kind in [Kind::Ccm, Kind::VirtualKubelet] {
            let files = files(kind, "acme", Some("0.1.0"), None).unwrap();
            assert!(files.iter().any(|(f, _)| f == "src/main.rs"));
            assert!(files.iter().any(|(f, _)| f == "deploy/rbac.yaml"));
            let main = &files.iter().find(|(f, _)| f == "src/main.rs").unwrap().1;
            assert!(
                main.lines().count() < 30,
                "main.rs is {} lines",
                main.lines().count()
            );
            assert!(files.iter().all(|(_, t)| !t.contains("{{")));
        }
        assert!(render("{{nope}}", &[], "x").is_err());
        assert!(files(Kind::Ccm, "Bad_Name", None, None).is_err());
        // The Kubernetes minor picks the binary's k8s-openapi feature.
        let oldest = files(Kind::VirtualKubelet, "acme", None, Some("1.34")).unwrap();
        let manifest = &oldest.iter().find(|(f, _)| f == "Cargo.toml").unwrap().1;
        assert!(
            manifest.contains(r#"features = ["std", "v1_34"]"#),
            "{manifest}"
        );
        assert!(files(Kind::Ccm, "acme", None, Some("1.20")).is_err());
    }
}
