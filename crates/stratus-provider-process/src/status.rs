//! Pod phase and conditions from the containers' states, by the kubelet's
//! rules (`getPhase` and the status manager's conditions). Pure: no IO.

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What the phase depends on, per container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    /// Not started yet, never terminated.
    Waiting,
    /// Waiting to restart after a termination.
    Restarting,
    /// Running now.
    Running,
    /// Terminated with this exit code, not restarting.
    Exited(i32),
}

/// How one container stands.
pub(crate) fn run_of(status: &ContainerStatus) -> Run {
    let state = status.state.clone().unwrap_or_default();
    if state.running.is_some() {
        return Run::Running;
    }
    if let Some(t) = state.terminated {
        return Run::Exited(t.exit_code);
    }
    let terminated_before = status
        .last_state
        .as_ref()
        .is_some_and(|s: &ContainerState| s.terminated.is_some());
    if terminated_before {
        Run::Restarting
    } else {
        Run::Waiting
    }
}

/// How init container `run` counts for the pod's initialization: a sidecar
/// (`restartPolicy: Always`) is done with once it started, whatever it does
/// after (it restarts on its own); an ordinary one as it stands.
pub(crate) fn as_init(run: Run, sidecar: bool) -> Run {
    match run {
        Run::Waiting => Run::Waiting,
        _ if sidecar => Run::Exited(0),
        other => other,
    }
}

/// The pod phase, as the kubelet computes it: init containers first, then
/// the app containers under the restart policy.
pub(crate) fn phase(restart_policy: &str, init: &[Run], app: &[Run]) -> &'static str {
    for run in init {
        match run {
            Run::Exited(0) => {}
            Run::Exited(_) if restart_policy == "Never" => return "Failed",
            _ => return "Pending",
        }
    }
    let (mut waiting, mut running, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for run in app {
        match run {
            Run::Waiting => waiting += 1,
            Run::Running => running += 1,
            Run::Restarting => stopped += 1,
            Run::Exited(code) => {
                stopped += 1;
                if *code == 0 {
                    succeeded += 1;
                }
            }
        }
    }
    if waiting > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    if stopped > 0 {
        if restart_policy == "Always" {
            return "Running";
        }
        if stopped == succeeded {
            return "Succeeded";
        }
        if restart_policy == "Never" {
            return "Failed";
        }
        return "Running";
    }
    "Pending"
}

/// The phase a pod may report while its sidecars are still up: a pod is
/// not terminal (`Succeeded` / `Failed`) until every container has stopped,
/// sidecars included, so until the last sidecar has been stopped the pod
/// stays `Running`. (The virtual node drops status writes for a terminal
/// pod, as the kubelet does, so reporting it early would hide the sidecars'
/// final states.)
pub(crate) fn while_sidecars_run(phase: &'static str, sidecar_running: bool) -> &'static str {
    match phase {
        "Succeeded" | "Failed" if sidecar_running => "Running",
        other => other,
    }
}

/// PodScheduled, Initialized, ContainersReady and Ready; `app_ready` says
/// which app containers are ready (running, and passing their readiness
/// probe if they have one).
pub(crate) fn conditions(
    phase: &str,
    init: &[Run],
    app_ready: &[bool],
    since: &Time,
) -> Vec<PodCondition> {
    let condition = |type_: &str, ok: bool, reason: Option<&str>| PodCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: (!ok).then(|| reason.map(str::to_owned)).flatten(),
        last_transition_time: Some(since.clone()),
        ..Default::default()
    };
    let initialized = init.iter().all(|r| *r == Run::Exited(0));
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let ready = !terminal && app_ready.iter().all(|r| *r);
    let not_ready = if terminal {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    };
    vec![
        condition("PodScheduled", true, None),
        condition("Initialized", initialized, Some("ContainersNotInitialized")),
        condition("ContainersReady", ready, Some(not_ready)),
        condition("Ready", ready, Some(not_ready)),
    ]
}

#[cfg(test)]
mod tests {
    use super::Run::*;
    use super::*;

    #[test]
    fn phases_follow_the_kubelet() {
        let cases: &[(&str, &[Run], &[Run], &str)] = &[
            ("Always", &[Running], &[Waiting], "Pending"),
            ("Never", &[Exited(1)], &[Waiting], "Failed"),
            ("OnFailure", &[Restarting], &[Waiting], "Pending"),
            ("Always", &[Exited(0)], &[Running, Waiting], "Pending"),
            ("Always", &[Exited(0)], &[Running, Running], "Running"),
            ("Always", &[], &[Exited(0)], "Running"),
            ("OnFailure", &[], &[Exited(0), Exited(0)], "Succeeded"),
            ("Never", &[], &[Exited(0), Exited(3)], "Failed"),
            ("OnFailure", &[], &[Exited(0), Restarting], "Running"),
            ("Never", &[], &[Running, Exited(3)], "Running"),
            ("Never", &[], &[], "Pending"),
        ];
        for (policy, init, app, want) in cases {
            assert_eq!(phase(policy, init, app), *want, "{policy} {init:?} {app:?}");
        }
    }

    #[test]
    fn a_pod_is_not_terminal_while_a_sidecar_runs() {
        assert_eq!(while_sidecars_run("Succeeded", true), "Running");
        assert_eq!(while_sidecars_run("Failed", true), "Running");
        assert_eq!(while_sidecars_run("Succeeded", false), "Succeeded");
        assert_eq!(while_sidecars_run("Failed", false), "Failed");
        assert_eq!(while_sidecars_run("Pending", true), "Pending");
        assert_eq!(while_sidecars_run("Running", false), "Running");
    }

    #[test]
    fn a_started_sidecar_lets_initialization_go_on() {
        assert_eq!(as_init(Waiting, true), Waiting);
        assert_eq!(as_init(Running, true), Exited(0));
        assert_eq!(as_init(Restarting, true), Exited(0));
        assert_eq!(as_init(Running, false), Running);
        assert_eq!(as_init(Exited(1), false), Exited(1));
        // Its own end does not fail a Never pod, and the app decides.
        let init = [as_init(Exited(137), true)];
        assert_eq!(phase("Never", &init, &[Exited(0)]), "Succeeded");
    }

    #[test]
    fn ready_only_while_every_container_runs() {
        let since = Time(k8s_openapi::jiff::Timestamp::now());
        let status =
            |c: &[PodCondition], t: &str| c.iter().find(|c| c.type_ == t).unwrap().status.clone();
        let up = conditions("Running", &[Exited(0)], &[true, true], &since);
        assert_eq!(status(&up, "Ready"), "True");
        assert_eq!(status(&up, "Initialized"), "True");
        let half = conditions("Running", &[Exited(0)], &[true, false], &since);
        assert_eq!(status(&half, "ContainersReady"), "False");
        let done = conditions("Succeeded", &[], &[false], &since);
        let ready = done.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.reason.as_deref(), Some("PodCompleted"));
        let init = conditions("Pending", &[Running], &[false], &since);
        assert_eq!(status(&init, "Initialized"), "False");
    }
}
