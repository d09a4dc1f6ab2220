//! Volumes as files: `emptyDir` directories, and `configMap`, `secret`,
//! `downwardAPI` and `projected` volumes written the way the kubelet writes
//! them — the files live in a timestamped directory that a `..data` link
//! points at, and each top-level name is a link through `..data`, so an
//! update switches every file at once (one rename) and a program that
//! re-reads a file sees either the old contents or the new, never half.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Pod, Volume};
use stratus_pod::{PodError, PodResources, ResourceKind};

/// The mode of files with no `defaultMode` (the kubelet's 0644).
const DEFAULT_MODE: i32 = 0o644;

/// One file of a volume: its path inside the volume, contents and mode.
type Files = BTreeMap<PathBuf, (Vec<u8>, i32)>;

/// Whether `volume` is a kind this provider writes.
pub(crate) fn supported(volume: &Volume) -> Result<(), String> {
    if volume.empty_dir.is_some()
        || volume.config_map.is_some()
        || volume.secret.is_some()
        || volume.downward_api.is_some()
    {
        return Ok(());
    }
    if let Some(projected) = &volume.projected {
        for source in projected.sources.iter().flatten() {
            if source.cluster_trust_bundle.is_some() || source.pod_certificate.is_some() {
                return Err(
                    "projected volumes with clusterTrustBundle or podCertificate sources".into(),
                );
            }
        }
        return Ok(());
    }
    Err(String::new())
}

/// Whether `volume` shows the object `kind` `name` (directly or through a
/// projection).
pub(crate) fn uses(volume: &Volume, kind: ResourceKind, name: &str) -> bool {
    let config_map = |n: &str| kind == ResourceKind::ConfigMap && n == name;
    let secret = |n: Option<&str>| kind == ResourceKind::Secret && n == Some(name);
    if let Some(c) = &volume.config_map {
        return config_map(&c.name);
    }
    if let Some(s) = &volume.secret {
        return secret(s.secret_name.as_deref());
    }
    volume.projected.as_ref().is_some_and(|p| {
        p.sources.iter().flatten().any(|s| {
            s.config_map.as_ref().is_some_and(|c| config_map(&c.name))
                || s.secret
                    .as_ref()
                    .is_some_and(|c| secret(Some(c.name.as_str())))
        })
    })
}

/// Write `volume` of `pod` into `dir` (create or refresh).
pub(crate) async fn write(
    volume: &Volume,
    dir: &Path,
    pod: &Pod,
    resources: Option<&dyn PodResources>,
) -> Result<(), PodError> {
    let io =
        |e: std::io::Error| PodError::unavailable(None, format!("volume {:?}: {e}", volume.name));
    if let Some(host) = &volume.host_path {
        // The host's own directory (allowed by the plan); created only
        // when the pod asks for it.
        let create = matches!(host.type_.as_deref(), Some("DirectoryOrCreate"));
        if create {
            tokio::fs::create_dir_all(dir).await.map_err(io)?;
        }
        return Ok(());
    }
    tokio::fs::create_dir_all(dir).await.map_err(io)?;
    if volume.empty_dir.is_some() {
        return Ok(());
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut files = Files::new();
    let mut default_mode = DEFAULT_MODE;
    if let Some(source) = &volume.config_map {
        default_mode = source.default_mode.unwrap_or(DEFAULT_MODE);
        let source = Source {
            kind: ResourceKind::ConfigMap,
            name: &source.name,
            items: source.items.as_deref(),
            optional: source.optional,
        };
        object_files(source, namespace, resources, &mut files).await?;
    } else if let Some(source) = &volume.secret {
        default_mode = source.default_mode.unwrap_or(DEFAULT_MODE);
        let source = Source {
            kind: ResourceKind::Secret,
            name: source.secret_name.as_deref().unwrap_or_default(),
            items: source.items.as_deref(),
            optional: source.optional,
        };
        object_files(source, namespace, resources, &mut files).await?;
    } else if let Some(source) = &volume.downward_api {
        default_mode = source.default_mode.unwrap_or(DEFAULT_MODE);
        downward_files(source.items.as_deref().unwrap_or_default(), pod, &mut files)?;
    } else if let Some(projected) = &volume.projected {
        default_mode = projected.default_mode.unwrap_or(DEFAULT_MODE);
        for source in projected.sources.iter().flatten() {
            let objects = [
                source.config_map.as_ref().map(|c| Source {
                    kind: ResourceKind::ConfigMap,
                    name: &c.name,
                    items: c.items.as_deref(),
                    optional: c.optional,
                }),
                source.secret.as_ref().map(|c| Source {
                    kind: ResourceKind::Secret,
                    name: &c.name,
                    items: c.items.as_deref(),
                    optional: c.optional,
                }),
            ];
            for object in objects.into_iter().flatten() {
                object_files(object, namespace, resources, &mut files).await?;
            }
            if let Some(d) = &source.downward_api {
                downward_files(d.items.as_deref().unwrap_or_default(), pod, &mut files)?;
            }
            if source.service_account_token.is_some() {
                tracing::warn!(
                    volume = volume.name,
                    "serviceAccountToken projections are not written by the process provider"
                );
            }
        }
    }
    for (_, mode) in files.values_mut() {
        if *mode < 0 {
            *mode = default_mode;
        }
    }
    publish(dir, &files).await.map_err(io)
}

/// The files of `items` (or of every key) with their modes; -1 stands for
/// the volume's default mode.
fn select(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    what: &str,
    files: &mut Files,
) -> Result<(), PodError> {
    match items {
        None => {
            for (key, bytes) in data {
                files.insert(PathBuf::from(key), (bytes, -1));
            }
        }
        Some(items) => {
            for item in items {
                let bytes = data.get(&item.key).cloned().ok_or_else(|| {
                    PodError::invalid_input(format!("{what} has no key {:?}", item.key))
                })?;
                let path = inside(&item.path).ok_or_else(|| {
                    PodError::invalid_input(format!("item path {:?} is not usable", item.path))
                })?;
                files.insert(path, (bytes, item.mode.unwrap_or(-1)));
            }
        }
    }
    Ok(())
}

/// A ConfigMap or Secret a volume shows: its name, the keys it maps and
/// whether it may be missing.
struct Source<'a> {
    kind: ResourceKind,
    name: &'a str,
    items: Option<&'a [KeyToPath]>,
    optional: Option<bool>,
}

/// The keys of the ConfigMap or Secret `source` names, as bytes; `None`
/// when it does not exist.
async fn object_data(
    source: &Source<'_>,
    namespace: &str,
    resources: &dyn PodResources,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, PodError> {
    Ok(match source.kind {
        ResourceKind::ConfigMap => {
            resources
                .get_config_map(namespace, source.name)
                .await?
                .map(|map| {
                    let text = map.data.unwrap_or_default().into_iter();
                    let binary = map.binary_data.unwrap_or_default().into_iter();
                    text.map(|(k, v)| (k, v.into_bytes()))
                        .chain(binary.map(|(k, v)| (k, v.0)))
                        .collect()
                })
        }
        ResourceKind::Secret => resources
            .get_secret(namespace, source.name)
            .await?
            .map(|secret| {
                let data = secret.data.unwrap_or_default().into_iter();
                let text = secret.string_data.unwrap_or_default().into_iter();
                data.map(|(k, v)| (k, v.0))
                    .chain(text.map(|(k, v)| (k, v.into_bytes())))
                    .collect()
            }),
    })
}

/// Add the files of `source` (every key, or its `items`).
async fn object_files(
    source: Source<'_>,
    namespace: &str,
    resources: Option<&dyn PodResources>,
    files: &mut Files,
) -> Result<(), PodError> {
    let resources = resources.ok_or_else(no_resources)?;
    let what = format!(
        "{} {:?}",
        source.kind.to_string().to_lowercase(),
        source.name
    );
    match object_data(&source, namespace, resources).await? {
        Some(data) => select(data, source.items, &what, files),
        None if source.optional == Some(true) => Ok(()),
        None => Err(PodError::unavailable(
            Some(std::time::Duration::from_secs(5)),
            format!("{what} not found"),
        )),
    }
}

fn no_resources() -> PodError {
    PodError::invalid_input(
        "configMap and secret volumes need the node's resources (ProcessProvider::with_resources)",
    )
}

/// Downward-API files: the pod's name, namespace, UID, labels and
/// annotations (as the kubelet formats them).
fn downward_files(
    items: &[DownwardAPIVolumeFile],
    pod: &Pod,
    files: &mut Files,
) -> Result<(), PodError> {
    let meta = &pod.metadata;
    let pairs = |map: &Option<BTreeMap<String, String>>| {
        map.iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for item in items {
        let path = inside(&item.path).ok_or_else(|| {
            PodError::invalid_input(format!("downwardAPI path {:?} is not usable", item.path))
        })?;
        let Some(field) = &item.field_ref else {
            return Err(PodError::invalid_input(format!(
                "downwardAPI {:?}: only fieldRef items are supported by the process provider",
                item.path
            )));
        };
        let value = match field.field_path.as_str() {
            "metadata.name" => meta.name.clone().unwrap_or_default(),
            "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
            "metadata.uid" => meta.uid.clone().unwrap_or_default(),
            "metadata.labels" => pairs(&meta.labels),
            "metadata.annotations" => pairs(&meta.annotations),
            other => {
                let one = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
                    let key = other.strip_prefix(prefix)?.strip_suffix("']")?;
                    Some(map.as_ref()?.get(key).cloned().unwrap_or_default())
                };
                one("metadata.labels['", &meta.labels)
                    .or_else(|| one("metadata.annotations['", &meta.annotations))
                    .ok_or_else(|| {
                        PodError::invalid_input(format!(
                            "downwardAPI field {other:?} is not supported by the process provider"
                        ))
                    })?
            }
        };
        files.insert(path, (value.into_bytes(), item.mode.unwrap_or(-1)));
    }
    Ok(())
}

/// A relative path inside a volume: no `..`, not absolute, not empty.
fn inside(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let ok = !path.is_empty()
        && p.components().all(|c| matches!(c, Component::Normal(_)))
        && !path.starts_with("..");
    ok.then(|| p.to_path_buf())
}

/// Write `files` into a new timestamped directory of `dir`, switch `..data`
/// to it, link each top-level name through `..data`, and remove what the
/// previous version had and this one has not.
async fn publish(dir: &Path, files: &Files) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let stamp = format!(
        "..{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let version = dir.join(&stamp);
    tokio::fs::create_dir_all(&version).await?;
    let mut top = std::collections::BTreeSet::new();
    for (path, (bytes, mode)) in files {
        let target = version.join(path);
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::write(&target, bytes).await?;
        let mode = u32::try_from(*mode).unwrap_or(0o644) & 0o777;
        tokio::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).await?;
        if let Some(Component::Normal(first)) = path.components().next() {
            top.insert(first.to_os_string());
        }
    }
    let next = dir.join("..data_tmp");
    let _ = tokio::fs::remove_file(&next).await;
    tokio::fs::symlink(&stamp, &next).await?;
    tokio::fs::rename(&next, dir.join("..data")).await?;
    for name in &top {
        let link = dir.join(name);
        if tokio::fs::symlink_metadata(&link).await.is_err() {
            tokio::fs::symlink(Path::new("..data").join(name), &link).await?;
        }
    }
    let mut entries = tokio::fs::read_dir(dir).await?;
    while let Some(entry) = entries.next_entry().await? {
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if text == "..data" || *text == *stamp {
            continue;
        }
        if text.starts_with("..") {
            let _ = tokio::fs::remove_dir_all(entry.path()).await;
        } else if !top.contains(&name) {
            let _ = tokio::fs::remove_file(entry.path()).await;
        }
    }
    Ok(())
}
