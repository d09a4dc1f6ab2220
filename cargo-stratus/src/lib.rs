//! `cargo stratus new`: generate a Stratus provider crate — a cloud
//! controller manager or a virtual kubelet — that builds and passes its
//! tests as generated: the provider with every trait method present and
//! answering `NotImplemented`, a `main.rs` that registers it and hands over
//! to the Stratus command, its unit tests, the conformance test, a test of
//! the binary against the in-memory API server, a Dockerfile, deploy
//! manifests and a Helm chart (`chart/`) for its name, a README and a CI
//! workflow.
//!
//! ```
//! use cargo_stratus::{Kind, Stratus, files};
//!
//! let crate_files = files(Kind::VirtualKubelet, "acme", &Stratus::Version("0.1.0".into()), None).unwrap();
//! let manifest = &crate_files.iter().find(|(path, _)| path == "Cargo.toml").unwrap().1;
//! assert!(manifest.contains(r#"name = "acme-virtual-kubelet""#));
//! assert!(crate_files.iter().any(|(path, _)| path == "deploy/rbac.yaml"));
//! // A name that cannot be a provider's is a typed error.
//! assert!(files(Kind::Ccm, "Acme_Cloud", &Stratus::Version("0.1.0".into()), None).is_err());
//! ```
//!
//! The binary (`cargo install cargo-stratus`, then `cargo stratus new
//! --kind virtual-kubelet --name acme`) writes these files, formats them
//! with `cargo fmt`, and says what to do next; [`run`] is that command, for
//! a tool that wraps it (the Stratus workspace's `cargo xtask
//! new-provider`).

mod chart;
mod cli;
mod manifests;
mod template;

use std::path::{Path, PathBuf};

pub use chart::{ChartNames, chart};
pub use cli::run;
pub use manifests::documents;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A cloud controller manager.
    Ccm,
    /// A virtual kubelet.
    VirtualKubelet,
}

/// Where the generated crate takes Stratus from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stratus {
    /// The published crates of this version.
    Version(String),
    /// A checkout of the Stratus workspace (its root): path dependencies,
    /// and the checkout's lock file, so the new crate resolves the same
    /// versions as the checkout's builds.
    Path(PathBuf),
}

/// The Kubernetes minors Stratus supports, oldest first: the four newest
/// k8s-openapi 0.29 knows (`v1_34` … `latest`, which is 1.37).
pub const KUBERNETES_MINORS: &[&str] = &["1.34", "1.35", "1.36", "1.37"];

/// The versions of what a generated crate depends on beside Stratus, as the
/// Stratus workspace requires them (a test keeps the two equal).
pub const DEPENDENCY_VERSIONS: &[(&str, &str)] = &[
    ("k8s-openapi", "0.29"),
    ("kube", "5.0.0"),
    ("tokio", "1"),
    ("async-trait", "0.1.92"),
    ("serde", "1.0.229"),
    ("serde-saphyr", "2"),
    ("thiserror", "2.0.21"),
];

/// Why no crate was generated.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The provider name is not a lowercase DNS label of 2 to 40
    /// characters.
    #[error(
        "--name {0:?} is not a provider name: 2 to 40 lowercase letters, digits and single dashes, starting with a letter and ending with a letter or digit"
    )]
    Name(String),
    /// The Kubernetes minor is not one Stratus supports.
    #[error("Kubernetes {0:?} is not one Stratus supports (one of {supported})", supported = KUBERNETES_MINORS.join(", "))]
    Kubernetes(String),
    /// A template names a placeholder nothing fills (a defect of this
    /// tool).
    #[error("templates: {file} has an unknown placeholder at {at:?}")]
    Placeholder {
        /// The file.
        file: String,
        /// The text from the placeholder on.
        at: String,
    },
    /// A deploy manifest could not be written as YAML.
    #[error("rendering the deploy manifests: {0}")]
    Manifest(String),
    /// The directory to write into exists and is not empty.
    #[error("{} exists and is not empty", .0.display())]
    NotEmpty(PathBuf),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> NewError + '_ {
    move |source| NewError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The k8s-openapi feature of Kubernetes minor `minor` (`1.34` → `v1_34`),
/// if it is one Stratus supports.
///
/// ```
/// assert_eq!(cargo_stratus::k8s_openapi_feature("1.34").unwrap(), "v1_34");
/// assert!(cargo_stratus::k8s_openapi_feature("1.20").is_err());
/// ```
pub fn k8s_openapi_feature(minor: &str) -> Result<String, NewError> {
    if KUBERNETES_MINORS.contains(&minor) {
        Ok(format!("v{}", minor.replace('.', "_")))
    } else {
        Err(NewError::Kubernetes(minor.to_owned()))
    }
}

/// The crate's name for provider `name`: `<name>-cloud-controller-manager`
/// or `<name>-virtual-kubelet`.
pub fn crate_name(kind: Kind, name: &str) -> String {
    match kind {
        Kind::Ccm => format!("{name}-cloud-controller-manager"),
        Kind::VirtualKubelet => format!("{name}-virtual-kubelet"),
    }
}

/// Every file of the new crate for provider `name`, as `(path relative to
/// the crate's root, contents)`; `kubernetes` is the oldest Kubernetes minor
/// the binary serves (default: the newest, k8s-openapi's `latest`).
pub fn files(
    kind: Kind,
    name: &str,
    stratus: &Stratus,
    kubernetes: Option<&str>,
) -> Result<Vec<(String, String)>, NewError> {
    template::check_name(name)?;
    let k8s_feature = match kubernetes {
        Some(minor) => k8s_openapi_feature(minor)?,
        None => "latest".to_owned(),
    };
    let krate = crate_name(kind, name);
    let dependency = match stratus {
        Stratus::Version(v) => format!("version = \"{v}\""),
        Stratus::Path(root) => {
            let facade = root.join("crates/stratus");
            let path = std::fs::canonicalize(&facade).map_err(io_error(&facade))?;
            format!("path = \"{}\"", path.display())
        }
    };
    // A dependency's version fills `{{<its name with _ for ->}}`.
    let keys: Vec<String> = DEPENDENCY_VERSIONS
        .iter()
        .map(|(dependency, _)| dependency.replace('-', "_"))
        .collect();
    let mut values = vec![
        ("name", name.to_owned()),
        ("crate_ident", krate.replace('-', "_")),
        ("crate", krate.clone()),
        ("Type", template::type_name(name)),
        ("stratus", dependency),
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
    for (key, (_, version)) in keys.iter().zip(DEPENDENCY_VERSIONS) {
        values.push((key, (*version).to_owned()));
    }
    let mut out = Vec::new();
    for (file, text) in template::templates(kind) {
        out.push((file.to_owned(), template::render(text, &values, file)?));
    }
    out.extend(manifests::deploy(kind, name, &krate)?);
    let names = ChartNames {
        chart: krate.clone(),
        description: match kind {
            Kind::Ccm => format!("The {name} cloud controller manager"),
            Kind::VirtualKubelet => format!("The {name} virtual kubelet"),
        },
        account: krate.clone(),
        image: format!("registry.example.com/{krate}"),
        provider: name.to_owned(),
        node: format!("vk-{name}"),
    };
    for (file, text) in chart(kind, &names)? {
        out.push((format!("chart/{file}"), text));
    }
    if let Stratus::Path(root) = stratus {
        // The checkout's lock file: the same versions as its builds (Cargo
        // drops what the new crate does not use).
        let lock = root.join("Cargo.lock");
        out.push((
            "Cargo.lock".into(),
            std::fs::read_to_string(&lock).map_err(io_error(&lock))?,
        ));
    }
    Ok(out)
}

/// Write `files` under `dir`, which must not exist or be empty.
pub fn write(dir: &Path, files: &[(String, String)]) -> Result<(), NewError> {
    if dir.exists()
        && std::fs::read_dir(dir)
            .map_err(io_error(dir))?
            .next()
            .is_some()
    {
        return Err(NewError::NotEmpty(dir.to_owned()));
    }
    for (file, text) in files {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_error(parent))?;
        }
        std::fs::write(&path, text).map_err(io_error(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version requirement of `dependency` in a Cargo manifest
    /// (`name = "1.2"` or `name = { version = "1.2", ... }`).
    fn version_in(manifest: &str, dependency: &str) -> Option<String> {
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
    }

    #[test]
    fn dependency_versions_are_the_workspace_ones() {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
        let manifest = std::fs::read_to_string(manifest).expect("the workspace's Cargo.toml");
        for (dependency, version) in DEPENDENCY_VERSIONS {
            assert_eq!(
                version_in(&manifest, dependency).as_deref(),
                Some(*version),
                "{dependency}"
            );
        }
        assert_eq!(
            version_in(
                "serde = { version = \"1.0.2\", features = [\"derive\"] }",
                "serde"
            )
            .as_deref(),
            Some("1.0.2")
        );
        assert_eq!(version_in("kube-runtime = \"5.1\"", "kube"), None);
    }

    #[test]
    fn every_placeholder_is_filled_for_both_kinds() {
        let published = Stratus::Version("0.1.0".into());
        for kind in [Kind::Ccm, Kind::VirtualKubelet] {
            let files = files(kind, "acme", &published, None).unwrap();
            assert!(files.iter().any(|(f, _)| f == "src/main.rs"));
            assert!(files.iter().any(|(f, _)| f == "deploy/rbac.yaml"));
            assert!(!files.iter().any(|(f, _)| f == "Cargo.lock"));
            let main = &files.iter().find(|(f, _)| f == "src/main.rs").unwrap().1;
            assert!(
                main.lines().count() < 30,
                "main.rs is {} lines",
                main.lines().count()
            );
            // Helm's own `{{ }}` stay in the chart; nothing else has any.
            assert!(
                files
                    .iter()
                    .filter(|(f, _)| !f.starts_with("chart/"))
                    .all(|(_, t)| !t.contains("{{"))
            );
            assert!(files.iter().any(|(f, _)| f == "chart/templates/rbac.yaml"));
            let manifest = &files.iter().find(|(f, _)| f == "Cargo.toml").unwrap().1;
            assert!(
                manifest.contains(r#"stratus-sdk = { version = "0.1.0""#),
                "{manifest}"
            );
        }
        assert!(matches!(
            files(Kind::Ccm, "Bad_Name", &published, None),
            Err(NewError::Name(_))
        ));
        // The Kubernetes minor picks the binary's k8s-openapi feature.
        let oldest = files(Kind::VirtualKubelet, "acme", &published, Some("1.34")).unwrap();
        let manifest = &oldest.iter().find(|(f, _)| f == "Cargo.toml").unwrap().1;
        assert!(
            manifest.contains(r#"features = ["std", "v1_34"]"#),
            "{manifest}"
        );
        assert!(matches!(
            files(Kind::Ccm, "acme", &published, Some("1.20")),
            Err(NewError::Kubernetes(_))
        ));
    }

    #[test]
    fn a_checkout_gives_path_dependencies_and_its_lock_file() {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        let files = files(Kind::Ccm, "acme", &Stratus::Path(root.clone()), None).unwrap();
        let manifest = &files.iter().find(|(f, _)| f == "Cargo.toml").unwrap().1;
        let facade = std::fs::canonicalize(root.join("crates/stratus")).unwrap();
        assert!(
            manifest.contains(&format!("path = \"{}\"", facade.display())),
            "{manifest}"
        );
        assert!(files.iter().any(|(f, _)| f == "Cargo.lock"));
        let missing = Stratus::Path(root.join("no-such-checkout"));
        assert!(matches!(
            crate::files(Kind::Ccm, "acme", &missing, None),
            Err(NewError::Io { .. })
        ));
    }

    #[test]
    fn writing_refuses_a_directory_with_files() {
        let dir = std::env::temp_dir().join(format!("cargo-stratus-test-{}", std::process::id()));
        let files = vec![("a/b.txt".to_owned(), "text".to_owned())];
        write(&dir, &files).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("a/b.txt")).unwrap(),
            "text"
        );
        assert!(matches!(write(&dir, &files), Err(NewError::NotEmpty(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
