//! Running one pod: init containers in order, then the app containers,
//! each restarted under the pod's policy with the kubelet's back-off, and
//! stopped with SIGTERM, the grace period and SIGKILL to its process group.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::sync::watch;

use crate::logs;
use crate::plan::Launch;
use crate::state::Inner;

/// A stop request: the grace period, once the pod is being deleted.
pub(crate) type StopSignal = watch::Receiver<Option<Duration>>;

/// How one container instance ended.
struct Exit {
    code: i32,
    reason: &'static str,
    message: Option<String>,
    started: Option<Time>,
    finished: Time,
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Run the pod described by `init` and `app` until it is done or stopped.
///
/// Sidecars (init containers with `restartPolicy: Always`) start in their
/// place among the init containers — the next one starts once the sidecar
/// started — run beside the app containers, restarted whatever the pod's
/// policy, and are stopped after the app containers ended (their work
/// done, or the pod deleted), as the kubelet does.
pub(crate) async fn supervise(
    inner: Arc<Inner>,
    key: String,
    policy: String,
    init: Vec<Launch>,
    app: Vec<Launch>,
    stop: StopSignal,
) {
    let offset = init.len();
    let (stop_sidecars, sidecars_stopped) = watch::channel(None);
    let mut sidecars = Vec::new();
    let mut initialized = true;
    for (index, launch) in init.into_iter().enumerate() {
        if launch.sidecar {
            let (task_inner, task_key, task_stop) =
                (inner.clone(), key.clone(), sidecars_stopped.clone());
            sidecars.push(tokio::spawn(async move {
                run_container(
                    &task_inner,
                    &task_key,
                    "Always",
                    index,
                    &launch,
                    task_stop,
                    false,
                )
                .await;
            }));
            if !sidecar_started(&inner, &key, index, stop.clone()).await {
                initialized = false;
                break;
            }
            continue;
        }
        let succeeded =
            run_container(&inner, &key, &policy, index, &launch, stop.clone(), true).await;
        if !succeeded {
            initialized = false;
            break;
        }
    }
    if initialized {
        let runs = app.into_iter().enumerate().map(|(i, launch)| {
            let (inner, key, policy, stop) =
                (inner.clone(), key.clone(), policy.clone(), stop.clone());
            async move {
                run_container(&inner, &key, &policy, offset + i, &launch, stop, false).await;
            }
        });
        futures_util::future::join_all(runs).await;
    }
    if !sidecars.is_empty() {
        // The pod's grace when it is being deleted, else its own.
        let grace = (*stop.borrow()).unwrap_or_else(|| inner.grace(&key));
        stop_sidecars.send_replace(Some(grace));
        futures_util::future::join_all(sidecars).await;
    }
}

/// Wait until sidecar `index` started (or the pod is stopped: false).
async fn sidecar_started(inner: &Inner, key: &str, index: usize, mut stop: StopSignal) -> bool {
    loop {
        if inner.started(key, index) {
            return true;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = stop.wait_for(|s| s.is_some()) => return false,
        }
    }
}

/// Run one container (status index `index`) until it is done for good or
/// the pod stops; true when its last instance exited 0.
async fn run_container(
    inner: &Arc<Inner>,
    key: &str,
    policy: &str,
    index: usize,
    launch: &Launch,
    mut stop: StopSignal,
    init: bool,
) -> bool {
    let mut crashes: u32 = 0;
    loop {
        if stop.borrow().is_some() {
            return false;
        }
        let instance = inner.restart_count(key, index);
        let exit = run_instance(inner, key, index, launch, instance, &mut stop).await;
        let succeeded = exit.code == 0;
        let ran = exit
            .started
            .as_ref()
            .map(|s| exit.finished.0.duration_since(s.0).unsigned_abs())
            .unwrap_or_default();
        let terminated = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: exit.code,
                reason: Some(exit.reason.into()),
                message: exit.message.clone(),
                started_at: exit.started.clone(),
                finished_at: Some(exit.finished.clone()),
                container_id: None,
                signal: None,
            }),
            ..Default::default()
        };
        inner.set_state(key, index, terminated.clone(), None);
        let stopping = stop.borrow().is_some();
        let restart = !stopping
            && match policy {
                "Never" => false,
                "OnFailure" => !succeeded,
                // Always: app containers always; init containers on failure.
                _ => !init || !succeeded,
            };
        if !restart {
            return succeeded;
        }
        let config = inner.config();
        if ran >= config.backoff_reset {
            crashes = 0;
        }
        // The first restart is immediate; then 10 s, 20 s, ... up to 5 min.
        let delay = match crashes {
            0 => Duration::ZERO,
            n => config
                .backoff_initial
                .saturating_mul(2u32.saturating_pow(n - 1))
                .min(config.backoff_max),
        };
        crashes = crashes.saturating_add(1);
        let waiting = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(
                    if delay.is_zero() {
                        "ContainerCreating"
                    } else {
                        "CrashLoopBackOff"
                    }
                    .into(),
                ),
                message: (!delay.is_zero()).then(|| {
                    format!(
                        "back-off {}s restarting failed container={} pod={}",
                        delay.as_secs(),
                        launch.name,
                        key.rsplit('/').next().unwrap_or(key)
                    )
                }),
            }),
            ..Default::default()
        };
        inner.set_state(key, index, waiting, Some(terminated));
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.wait_for(|s| s.is_some()) => {
                // Deleted while backing off: the last instance's end stands.
                inner.restore_terminated(key, index);
                return succeeded;
            }
        }
    }
}

/// Start one instance, wait for it to end (or stop it), and say how it
/// ended. Nothing of its process group outlives it.
async fn run_instance(
    inner: &Arc<Inner>,
    key: &str,
    index: usize,
    launch: &Launch,
    instance: i32,
    stop: &mut StopSignal,
) -> Exit {
    let failed_start = |message: String| Exit {
        code: 128,
        reason: "StartError",
        message: Some(message),
        started: None,
        finished: now(),
    };
    if let Err(e) = prepare_root(launch).await {
        return failed_start(format!("cannot prepare the container's directory: {e}"));
    }
    let mut command = launch.command(&launch.argv[0], &launch.argv[1..]);
    command
        .stdin(if launch.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return failed_start(format!("failed to start {:?}: {e}", launch.argv[0]));
        }
    };
    launch.limit(&child);
    let oom_kills = launch.oom_kills();
    let started = now();
    let group = crate::group::process_group(&child);
    if let (Some(group), Some(dir)) = (group, inner.pod_dir(key)) {
        crate::leftovers::record(&dir, &launch.name, group.as_raw_nonzero().get()).await;
    }
    if let Some(mut input) = child.stdin.take() {
        // What attach sessions send goes to the process's stdin.
        let (sender, mut received) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        inner.set_stdin(key, index, Some(sender));
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Some(chunk) = received.recv().await {
                if input.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
    }
    let log = match (child.stdout.take(), child.stderr.take()) {
        (Some(out), Some(err)) => {
            let path = logs::log_path(
                inner.pod_dir(key).as_deref().unwrap_or(&launch.root),
                &launch.name,
                instance,
            );
            Some(tokio::spawn(logs::capture(
                path,
                out,
                err,
                logs::LogLimits {
                    max_bytes: inner.config().log_limit_bytes,
                    max_files: inner.config().log_max_files,
                },
            )))
        }
        _ => None,
    };
    inner.set_group(key, index, group.map(|g| g.as_raw_nonzero().get()));
    inner.set_state(
        key,
        index,
        ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(started.clone()),
            }),
            ..Default::default()
        },
        None,
    );
    let stop_requested = async {
        match stop.wait_for(|s| s.is_some()).await {
            Ok(grace) => grace.unwrap_or_default(),
            // The pod's entry is gone: stop at once.
            Err(_) => Duration::ZERO,
        }
    };
    let probes = probe_container(inner, key, index, launch);
    let ended = tokio::select! {
        status = child.wait() => Ok(status),
        grace = stop_requested => Err((grace, None)),
        failed = probes => Err((inner.grace(key), Some(failed))),
    };
    let mut killed_because = None;
    let status = match ended {
        Ok(status) => status,
        Err((grace, because)) => {
            if let Some(because) = &because {
                tracing::info!(pod = key, container = launch.name, %because, "killing the container");
            }
            killed_because = because;
            // The kubelet's order: the preStop hook within the grace
            // period, then SIGTERM with what is left of it (at least 2 s),
            // then SIGKILL.
            let deadline = tokio::time::Instant::now() + grace;
            if let Some(hook) = &launch.pre_stop
                && let Err(e) = pre_stop(hook, launch, grace).await
            {
                tracing::warn!(pod = key, container = launch.name, error = %e, "the preStop hook failed");
            }
            let left = deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .max(if launch.pre_stop.is_some() {
                    MINIMUM_GRACE_AFTER_HOOK
                } else {
                    Duration::ZERO
                });
            signal(group, Signal::TERM);
            match tokio::time::timeout(left, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    signal(group, Signal::KILL);
                    child.wait().await
                }
            }
        }
    };
    // Whatever the main process left behind in its group goes with it.
    signal(group, Signal::KILL);
    inner.set_group(key, index, None);
    inner.set_stdin(key, index, None);
    if let Some(log) = log {
        // The output is on disk once both pipes are drained; a log that
        // could not be written is said, not dropped silently.
        match tokio::time::timeout(Duration::from_secs(2), log).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::warn!(pod = key, container = launch.name, error = %e, "the container's output could not be written to its log")
            }
            Ok(Err(e)) => {
                tracing::warn!(pod = key, container = launch.name, error = %e, "the log writer failed")
            }
            Err(_) => {
                tracing::warn!(
                    pod = key,
                    container = launch.name,
                    "the container's log was still open 2 s after it ended (a process outside its group holds its output)"
                )
            }
        }
    }
    let (code, mut message) = match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            let code = crate::plan::exit_code(s);
            (
                code,
                s.signal().map(|sig| format!("killed by signal {sig}")),
            )
        }
        Err(e) => (128, Some(format!("cannot wait for the process: {e}"))),
    };
    if let Some(because) = killed_because {
        message = Some(because);
    }
    // The kernel killed it for its memory limit (cgroup v2 memory.max).
    let oom_killed = code != 0 && launch.oom_kills() > oom_kills;
    Exit {
        code,
        reason: match code {
            0 => "Completed",
            _ if oom_killed => "OOMKilled",
            _ => "Error",
        },
        message,
        started: Some(started),
        finished: now(),
    }
}

/// Run the container's probes while it runs: the startup probe first
/// (liveness and readiness wait for it), then readiness (reported as the
/// container's `ready`) and liveness together. Resolves, with the reason,
/// when the startup or liveness probe failed `failureThreshold` times in a
/// row: the container is then killed and restarted under the pod's policy.
async fn probe_container(inner: &Arc<Inner>, key: &str, index: usize, launch: &Launch) -> String {
    use crate::probe::{check, timing};
    if let Some(probe) = &launch.startup {
        let t = timing(probe);
        tokio::time::sleep(t.initial_delay).await;
        let mut failures = 0;
        loop {
            match check(probe, launch, t.timeout).await {
                Ok(()) => break,
                Err(e) => {
                    failures += 1;
                    if failures >= t.failure_threshold {
                        return format!(
                            "Container {} failed startup probe, will be restarted: {e}",
                            launch.name
                        );
                    }
                }
            }
            tokio::time::sleep(t.period).await;
        }
        inner.set_probed(key, index, Some(true), None);
    }
    let readiness = async {
        let Some(probe) = &launch.readiness else {
            return std::future::pending::<()>().await;
        };
        let t = timing(probe);
        tokio::time::sleep(t.initial_delay).await;
        let (mut successes, mut failures) = (0, 0);
        loop {
            match check(probe, launch, t.timeout).await {
                Ok(()) => {
                    (successes, failures) = (successes + 1, 0);
                    if successes >= t.success_threshold {
                        inner.set_probed(key, index, None, Some(true));
                    }
                }
                Err(_) => {
                    (successes, failures) = (0, failures + 1);
                    if failures >= t.failure_threshold {
                        inner.set_probed(key, index, None, Some(false));
                    }
                }
            }
            tokio::time::sleep(t.period).await;
        }
    };
    let liveness = async {
        let Some(probe) = &launch.liveness else {
            return std::future::pending::<String>().await;
        };
        let t = timing(probe);
        tokio::time::sleep(t.initial_delay).await;
        let mut failures = 0;
        loop {
            match check(probe, launch, t.timeout).await {
                Ok(()) => failures = 0,
                Err(e) => {
                    failures += 1;
                    if failures >= t.failure_threshold {
                        return format!(
                            "Container {} failed liveness probe, will be restarted: {e}",
                            launch.name
                        );
                    }
                }
            }
            tokio::time::sleep(t.period).await;
        }
    };
    tokio::select! {
        failed = liveness => failed,
        // Readiness probes for as long as the container runs.
        () = readiness => unreachable!("the readiness loop does not end"),
    }
}

/// The least time a process gets between SIGTERM and SIGKILL after its
/// preStop hook used up the grace period (the kubelet's 2 s).
const MINIMUM_GRACE_AFTER_HOOK: Duration = Duration::from_secs(2);

/// Run a `preStop` hook (`exec`, `httpGet` or `sleep`) within `grace`.
async fn pre_stop(
    hook: &k8s_openapi::api::core::v1::LifecycleHandler,
    launch: &Launch,
    grace: Duration,
) -> Result<(), String> {
    if let Some(sleep) = &hook.sleep {
        let seconds = u64::try_from(sleep.seconds.max(0)).unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(seconds).min(grace)).await;
        return Ok(());
    }
    // exec and httpGet run as the probes of the same kinds do.
    let as_probe = k8s_openapi::api::core::v1::Probe {
        exec: hook.exec.clone(),
        http_get: hook.http_get.clone(),
        tcp_socket: hook.tcp_socket.clone(),
        ..Default::default()
    };
    crate::probe::check(&as_probe, launch, grace).await
}

/// Send `sig` to the process group; a group already gone is fine.
fn signal(group: Option<Pid>, sig: Signal) {
    if let Some(group) = group {
        let _ = kill_process_group(group, sig);
    }
}

/// The container's root, its working directory and its mounts.
async fn prepare_root(launch: &Launch) -> std::io::Result<()> {
    tokio::fs::create_dir_all(&launch.root).await?;
    for (at, source) in &launch.mounts {
        tokio::fs::create_dir_all(source).await?;
        let link = launch.root.join(at);
        if let Some(parent) = link.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        if tokio::fs::symlink_metadata(&link).await.is_err() {
            tokio::fs::symlink(source, &link).await?;
        }
    }
    tokio::fs::create_dir_all(&launch.cwd).await
}
