//! What a pod becomes on the host: for each container the program, its
//! arguments, environment and directories; or why the node refuses it.
//!
//! Volume mounts: every container has a root directory of its own; each
//! `volumeMount` appears inside it at its `mountPath` (a symbolic link to
//! the pod's volume directory), the process starts in that root (or in
//! `workingDir` under it), and `STRATUS_CONTAINER_ROOT` holds the root's
//! absolute path: a program reads `$STRATUS_CONTAINER_ROOT/data` for a
//! volume mounted at `/data`, or `data` relative to its start directory.

use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use stratus_pod::PodError;

use crate::ProcessConfig;
use crate::naming::safe;

/// The environment variable holding a container's root directory.
pub const CONTAINER_ROOT_ENV: &str = "STRATUS_CONTAINER_ROOT";

/// The largest environment a container may have (names and values), as a
/// guard against specs the host's `execve` would refuse or that would
/// exhaust memory (Linux allows 2 MiB of arguments and environment).
pub const MAX_ENVIRONMENT_BYTES: usize = 1024 * 1024;

/// One container, ready to start.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub(crate) name: String,
    pub(crate) image: String,
    pub(crate) argv: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) root: PathBuf,
    pub(crate) cwd: PathBuf,
    /// Mount path (relative to the root) → the pod's volume directory.
    pub(crate) mounts: Vec<(PathBuf, PathBuf)>,
    /// The container's ports (named ports of probes).
    pub(crate) ports: Vec<k8s_openapi::api::core::v1::ContainerPort>,
    /// Where `httpGet` and `tcpSocket` probes without a host connect: the
    /// pod's IP, as the kubelet's do.
    pub(crate) probe_host: String,
    /// The startup, liveness and readiness probes.
    pub(crate) startup: Option<k8s_openapi::api::core::v1::Probe>,
    pub(crate) liveness: Option<k8s_openapi::api::core::v1::Probe>,
    pub(crate) readiness: Option<k8s_openapi::api::core::v1::Probe>,
    /// The `preStop` hook.
    pub(crate) pre_stop: Option<k8s_openapi::api::core::v1::LifecycleHandler>,
    /// `stdin: true`: the process reads a pipe that `kubectl attach` writes.
    pub(crate) stdin: bool,
    /// `resources.limits.memory` in bytes, enforced as an `RLIMIT_DATA`
    /// (see [`crate::limits`]); `None` when the container's cgroup enforces
    /// it.
    pub(crate) memory_limit: Option<u64>,
    /// A sidecar: an init container with `restartPolicy: Always`.
    pub(crate) sidecar: bool,
    /// The cgroup of `resources.limits.cpu` (and of the memory limit on
    /// cgroup v2), where the node can make one (see [`crate::cgroups`]).
    pub(crate) cgroup: Option<crate::cgroups::ContainerCgroup>,
}

impl Launch {
    /// The directory of the pod the container belongs to (its root is
    /// `<pod dir>/containers/<name>`).
    pub(crate) fn pod_dir(&self) -> Option<&Path> {
        self.root.parent()?.parent()
    }
}

impl Launch {
    /// `program` with `args` as this container runs things: its
    /// environment only, its directory, a process group of its own (signals
    /// reach everything it starts) and killed if the handle is dropped.
    /// Standard streams are the caller's to set.
    pub(crate) fn command(&self, program: &str, args: &[String]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .process_group(0)
            .kill_on_drop(true);
        command
    }

    /// Bind `child`, just started by [`Launch::command`], to the
    /// container's memory limit, if any.
    fn limit_memory(&self, child: &tokio::process::Child) {
        let (Some(bytes), Some(pid)) = (self.memory_limit, child.id()) else {
            return;
        };
        if let Err(e) = crate::limits::apply(pid, bytes)
            && e.raw_os_error() != Some(rustix::io::Errno::SRCH.raw_os_error())
        {
            tracing::warn!(container = %self.name, %e, "cannot set the memory limit");
        }
    }

    /// Bind `child` to the container's limits, if any: its memory limit
    /// ([`crate::limits`]) and its cgroup ([`crate::cgroups`]). A process
    /// that already ended has nothing to bind; any other failure is logged
    /// (the process runs).
    pub(crate) fn limit(&self, child: &tokio::process::Child) {
        self.limit_memory(child);
        if let (Some(cgroup), Some(pid)) = (&self.cgroup, child.id())
            && let Err(e) = cgroup.enter(pid)
            && e.raw_os_error() != Some(rustix::io::Errno::SRCH.raw_os_error())
        {
            tracing::warn!(container = %self.name, %e, "cannot set the container's cgroup limits");
        }
    }

    /// How many times the kernel killed a process of the container's cgroup
    /// for its memory limit so far (0 where memory is no cgroup limit).
    pub(crate) fn oom_kills(&self) -> u64 {
        self.cgroup.as_ref().map_or(0, |c| c.oom_kills())
    }
}

/// The exit code of a process as the kubelet reports it: its code, or 128
/// plus the signal that ended it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(128)
}

/// A pod's plan.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) dir: PathBuf,
    /// Each volume and its directory.
    pub(crate) volumes: Vec<(k8s_openapi::api::core::v1::Volume, PathBuf)>,
    pub(crate) init: Vec<Launch>,
    pub(crate) app: Vec<Launch>,
}

/// The plan of `pod`, whose IP is `pod_ip`, or an `InvalidInput` error
/// saying what the node cannot do (the node then reports `ProviderFailed`
/// with that message).
pub(crate) fn plan(
    config: &ProcessConfig,
    cgroups: Option<&crate::cgroups::Cgroups>,
    pod: &Pod,
    pod_ip: &str,
) -> Result<Plan, PodError> {
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| PodError::invalid_input("the pod has no spec"))?;
    let meta = &pod.metadata;
    let (namespace, name) = (
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    );
    let uid = meta.uid.as_deref().unwrap_or("no-uid");
    if spec.host_pid == Some(true) || spec.host_ipc == Some(true) {
        return Err(PodError::invalid_input(
            "hostPID and hostIPC are not supported by the process provider (pods are host processes already; nothing is isolated)",
        ));
    }
    let dir = config
        .root_dir
        .join(format!("{}_{}_{}", safe(namespace), safe(name), safe(uid)));
    let mut volumes = Vec::new();
    let mut volume_dirs = std::collections::BTreeMap::new();
    for volume in spec.volumes.iter().flatten() {
        if let Some(host) = &volume.host_path {
            let path = allowed_host_path(config, &host.path).ok_or_else(|| {
                PodError::invalid_input(format!(
                    "volume {:?}: hostPath {:?} is not under a prefix this node allows ({})",
                    volume.name,
                    host.path,
                    if config.host_path_prefixes.is_empty() {
                        "none".to_owned()
                    } else {
                        config
                            .host_path_prefixes
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ))
            })?;
            volume_dirs.insert(volume.name.clone(), path.clone());
            volumes.push((volume.clone(), path));
            continue;
        }
        if let Err(what) = crate::volumes::supported(volume) {
            let what = if what.is_empty() {
                format!("{} volumes", volume_kind(volume))
            } else {
                what
            };
            return Err(PodError::invalid_input(format!(
                "volume {:?}: {what} are not supported by the process provider (supported: emptyDir, configMap, secret, downwardAPI, projected, and hostPath under the node's allowed prefixes)",
                volume.name
            )));
        }
        let path = volume_dir(&dir, &volume.name);
        volume_dirs.insert(volume.name.clone(), path.clone());
        volumes.push((volume.clone(), path));
    }
    let launch = |c: &Container| -> Result<Launch, PodError> {
        let mut launch = launch_of(config, &dir, &volume_dirs, c, name)?;
        launch.probe_host = pod_ip.to_owned();
        if let Some(cgroups) = cgroups {
            let millicores = crate::limits::cpu_limit(c)?;
            launch.cgroup = cgroups.limit(uid, &c.name, millicores, launch.memory_limit);
            if cgroups.limits_memory() {
                // memory.max enforces it; no RLIMIT_DATA as well.
                launch.memory_limit = None;
            }
        }
        Ok(launch)
    };
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(launch)
        .collect::<Result<_, _>>()?;
    let app = spec
        .containers
        .iter()
        .map(launch)
        .collect::<Result<_, _>>()?;
    Ok(Plan {
        dir,
        volumes,
        init,
        app,
    })
}

fn launch_of(
    config: &ProcessConfig,
    dir: &Path,
    volumes: &std::collections::BTreeMap<String, PathBuf>,
    c: &Container,
    pod_name: &str,
) -> Result<Launch, PodError> {
    let refuse = |what: String| PodError::invalid_input(format!("container {:?}: {what}", c.name));
    if c.security_context
        .as_ref()
        .is_some_and(|s| s.privileged == Some(true))
    {
        return Err(refuse(
            "privileged containers are not supported by the process provider".into(),
        ));
    }
    if let Some(added) = c
        .security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|caps| caps.add.as_ref())
        .filter(|add| !add.is_empty())
    {
        return Err(refuse(format!(
            "capabilities {added:?} cannot be granted: the process provider runs containers as its own unprivileged user"
        )));
    }
    if c.volume_devices.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(refuse(
            "volumeDevices (raw block devices) are not supported by the process provider".into(),
        ));
    }
    if let Some(device) = device_resource(c) {
        return Err(refuse(format!(
            "resource {device:?} (a device or extended resource) is not offered by the process provider"
        )));
    }
    let image = c.image.clone().unwrap_or_default();
    let root = dir.join("containers").join(safe(&c.name));
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        ),
        ("HOSTNAME".into(), pod_name.into()),
        ("HOME".into(), root.display().to_string()),
    ];
    for var in c.env.iter().flatten() {
        env.retain(|(k, _)| *k != var.name);
        env.push((var.name.clone(), var.value.clone().unwrap_or_default()));
    }
    env.push((CONTAINER_ROOT_ENV.into(), root.display().to_string()));
    // `$(VAR)` in the command and arguments, from the container's
    // environment, as the kubelet expands them (the image's entrypoint is
    // left as it is).
    let expand = |arg: &String| {
        stratus_pod::env::expand(arg, |name| {
            c.env
                .iter()
                .flatten()
                .rev()
                .find(|v| v.name == name)
                .map(|v| v.value.clone().unwrap_or_default())
        })
    };
    let mut argv: Vec<String> = match c.command.as_deref() {
        Some(command) if !command.is_empty() => command.iter().map(expand).collect(),
        _ => match config.entrypoint(&image) {
            Some(entry) if !entry.is_empty() => entry.to_vec(),
            _ => {
                return Err(refuse(format!(
                    "image {image:?} is not mapped to a program on this node and the container has no command"
                )));
            }
        },
    };
    argv.extend(c.args.iter().flatten().map(expand));
    let size: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if size > MAX_ENVIRONMENT_BYTES {
        return Err(refuse(format!(
            "the environment is {size} bytes; the process provider allows {MAX_ENVIRONMENT_BYTES}"
        )));
    }
    if argv
        .iter()
        .chain(env.iter().map(|(k, _)| k))
        .any(|s| s.contains('\0'))
    {
        return Err(refuse(
            "a command, argument or variable name holds a NUL byte".into(),
        ));
    }
    let mut mounts = Vec::new();
    for mount in c.volume_mounts.iter().flatten() {
        let source = volumes.get(&mount.name).ok_or_else(|| {
            refuse(format!(
                "volume mount {:?} names no volume of the pod",
                mount.name
            ))
        })?;
        let at = relative(&mount.mount_path)
            .ok_or_else(|| refuse(format!("mount path {:?} is not usable", mount.mount_path)))?;
        mounts.push((at, source.clone()));
    }
    let cwd = match c.working_dir.as_deref() {
        Some(w) if !w.is_empty() => root.join(
            relative(w).ok_or_else(|| refuse(format!("working directory {w:?} is not usable")))?,
        ),
        _ => root.clone(),
    };
    for probe in [&c.startup_probe, &c.liveness_probe, &c.readiness_probe]
        .into_iter()
        .flatten()
    {
        supported(probe).map_err(|e| refuse(e.into()))?;
    }
    let memory_limit = crate::limits::memory_limit(c).map_err(refuse)?;
    Ok(Launch {
        name: c.name.clone(),
        image,
        argv,
        env,
        root,
        cwd,
        mounts,
        ports: c.ports.clone().unwrap_or_default(),
        probe_host: String::new(),
        startup: c.startup_probe.clone(),
        liveness: c.liveness_probe.clone(),
        readiness: c.readiness_probe.clone(),
        pre_stop: c.lifecycle.as_ref().and_then(|l| l.pre_stop.clone()),
        stdin: c.stdin == Some(true),
        memory_limit,
        sidecar: c.restart_policy.as_deref() == Some("Always"),
        cgroup: None,
    })
}

/// The first resource `c` requests or limits that the node does not have:
/// anything but `cpu`, `memory` and `ephemeral-storage` (GPUs and other
/// devices, hugepages, extended resources).
fn device_resource(c: &Container) -> Option<String> {
    let resources = c.resources.as_ref()?;
    [&resources.limits, &resources.requests]
        .into_iter()
        .flatten()
        .flat_map(|r| r.keys())
        .find(|k| !matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage"))
        .cloned()
}

/// `path` if it is absolute, climbs nowhere (`..`) and lies under one of
/// the node's allowed hostPath prefixes.
fn allowed_host_path(config: &ProcessConfig, path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    let clean = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    (clean
        && config
            .host_path_prefixes
            .iter()
            .any(|p| path.starts_with(p)))
    .then(|| path.to_path_buf())
}

/// The directory of volume `name` of the pod living in `pod_dir`.
pub(crate) fn volume_dir(pod_dir: &Path, name: &str) -> PathBuf {
    pod_dir.join("volumes").join(safe(name))
}

/// An absolute container path as a path under the container's root: no
/// `..`, not empty.
fn relative(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in Path::new(path).components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// The volume source's name, for messages.
fn volume_kind(volume: &k8s_openapi::api::core::v1::Volume) -> &'static str {
    let kinds: [(&'static str, bool); 8] = [
        ("configMap", volume.config_map.is_some()),
        ("secret", volume.secret.is_some()),
        ("downwardAPI", volume.downward_api.is_some()),
        ("projected", volume.projected.is_some()),
        ("hostPath", volume.host_path.is_some()),
        (
            "persistentVolumeClaim",
            volume.persistent_volume_claim.is_some(),
        ),
        ("csi", volume.csi.is_some()),
        ("nfs", volume.nfs.is_some()),
    ];
    kinds
        .into_iter()
        .find(|(_, set)| *set)
        .map_or("this kind of", |(k, _)| k)
}

/// Whether a probe kind is one this provider runs.
pub(crate) fn supported(probe: &Probe) -> Result<(), &'static str> {
    if probe.grpc.is_some() {
        return Err("gRPC probes are not supported by the process provider");
    }
    if probe.exec.is_none() && probe.http_get.is_none() && probe.tcp_socket.is_none() {
        return Err("a probe needs exec, httpGet or tcpSocket");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn command_and_args_expand_the_containers_variables_as_the_kubelet_does() {
        let mut config = ProcessConfig::new("/srv/pods");
        config.images.insert(
            "busybox".into(),
            vec!["sh".into(), "-c".into(), "$(A)".into()],
        );
        let planned = plan(
            &config,
            None,
            &pod(serde_json::json!({
                "containers": [
                    {"name": "cmd", "image": "x", "command": ["echo", "$(POD_IP)"],
                     "args": ["$(POD_IP):$(PORT)", "$$(POD_IP)", "$(UNSET)"],
                     "env": [{"name": "POD_IP", "value": "127.0.31.7"}, {"name": "PORT", "value": "8080"}]},
                    {"name": "image", "image": "busybox", "args": ["$(A)"],
                     "env": [{"name": "A", "value": "1"}]},
                ],
            })),
            "198.19.3.2",
        )
        .unwrap();
        assert_eq!(
            planned.app[0].argv,
            [
                "echo",
                "127.0.31.7",
                "127.0.31.7:8080",
                "$(POD_IP)",
                "$(UNSET)"
            ]
        );
        // The image's program is not expanded; the arguments are.
        assert_eq!(planned.app[1].argv, ["sh", "-c", "$(A)", "1"]);
    }

    #[test]
    fn commands_images_mounts_and_refusals() {
        let mut config = ProcessConfig::new("/srv/pods");
        config
            .images
            .insert("busybox".into(), vec!["sh".into(), "-c".into()]);
        let ok = plan(
            &config,
            None,
            &pod(serde_json::json!({
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "initContainers": [{"name": "init", "image": "busybox", "args": ["true"]}],
                "containers": [{
                    "name": "app", "image": "whatever", "command": ["python3"], "args": ["-m", "http.server"],
                    "workingDir": "/work", "env": [{"name": "A", "value": "1"}],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/data"}],
                }],
            })),
            "198.19.3.2",
        )
        .unwrap();
        assert_eq!(ok.dir, Path::new("/srv/pods/ns_p_u1"));
        assert_eq!(ok.init[0].argv, ["sh", "-c", "true"]);
        let app = &ok.app[0];
        assert_eq!(app.argv, ["python3", "-m", "http.server"]);
        assert_eq!(app.cwd, Path::new("/srv/pods/ns_p_u1/containers/app/work"));
        assert_eq!(
            app.mounts,
            [(
                PathBuf::from("data"),
                PathBuf::from("/srv/pods/ns_p_u1/volumes/scratch")
            )]
        );
        assert!(app.env.contains(&("A".into(), "1".into())));
        assert_eq!(app.probe_host, "198.19.3.2", "probes go to the pod's IP");
        assert!(app.env.iter().any(|(k, _)| k == CONTAINER_ROOT_ENV));

        let refused = |spec: serde_json::Value| {
            plan(&config, None, &pod(spec), "127.0.0.1")
                .unwrap_err()
                .to_string()
        };
        assert!(
            refused(serde_json::json!({"containers": [{"name": "a", "image": "nginx"}]}))
                .contains("image \"nginx\" is not mapped")
        );
        assert!(
            refused(serde_json::json!({
                "volumes": [{"name": "host", "hostPath": {"path": "/etc"}}],
                "containers": [{"name": "a", "image": "busybox"}],
            }))
            .contains("hostPath \"/etc\" is not under a prefix this node allows (none)")
        );
        assert!(refused(serde_json::json!({"hostPID": true, "containers": [{"name": "a", "image": "busybox"}]}))
            .contains("hostPID"));
        assert!(
            refused(serde_json::json!({"containers": [{
            "name": "a", "image": "busybox", "securityContext": {"privileged": true}}]}))
            .contains("privileged")
        );
        assert!(refused(serde_json::json!({"containers": [{
            "name": "a", "image": "busybox", "env": [{"name": "BIG", "value": "x".repeat(10 * 1024 * 1024)}]}]}))
        .contains("the environment is"));
        assert!(
            refused(serde_json::json!({"containers": [{
            "name": "a", "image": "busybox", "workingDir": "/../etc"}]}))
            .contains("working directory")
        );
    }
}
