//! `up`, `down` and one component's stop and start.

use std::time::{Duration, Instant};

use crate::BoxError;

use super::build::build;
use super::layout::{COMPONENTS, KUBELET_CLIENT_USER, cluster_dir};
use super::prepare::prepare;
use super::process::{address_present, alive, ip, is_up, spawn, terminate, wait_healthy};
use super::state::{State, now_micros};

/// Objects every run needs: the API server's kubelet client may call
/// kubelets (kubeadm's `kubeadm:kubelet-api-admin` binding).
pub async fn bootstrap(client: &kube::Client) -> Result<(), BoxError> {
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    use kube::api::{Api, Patch, PatchParams};
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "stratus:kubelet-api-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUBELET_CLIENT_USER}]
    }))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(
            "stratus:kubelet-api-admin",
            &PatchParams::apply("stratus-cluster").force(),
            &Patch::Apply(binding),
        )
        .await?;
    Ok(())
}

/// Wait until the controller manager made the `default` ServiceAccount of
/// `namespace` (pods cannot be created there before).
pub async fn wait_for_default_service_account(
    client: &kube::Client,
    namespace: &str,
    within: Duration,
) -> Result<(), BoxError> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
    let what = format!("the controller manager's default ServiceAccount in {namespace}");
    stratus_apiserver::poll(what, within)
        .every(Duration::from_millis(100))
        .until(|| async { accounts.get_opt("default").await.map(|a| a.is_some()) })
        .await?;
    Ok(())
}

/// Wait until the ConfigMap `namespace/name` exists (the controller manager
/// publishes `kube-root-ca.crt` in every namespace; pods mount it).
pub async fn wait_for_config_map(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    within: Duration,
) -> Result<(), BoxError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let maps: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), namespace);
    stratus_apiserver::poll(format!("ConfigMap {namespace}/{name}"), within)
        .every(Duration::from_millis(100))
        .until(|| async { maps.get_opt(name).await.map(|m| m.is_some()) })
        .await?;
    Ok(())
}

/// [`up_without`] for a benchmark side that needs a control plane of its
/// own: an error, not a shared one, if a cluster is up already.
pub async fn up_fresh(node_address: Option<&str>, disabled: &[&str]) -> Result<State, BoxError> {
    if is_up() {
        return Err("a control plane of `cargo xtask cluster` is up; the benchmark needs a fresh one: run `cargo xtask cluster down` first".into());
    }
    up_without(node_address, disabled).await
}

/// [`down`] off the runtime's threads, for a benchmark that brought the
/// cluster up; a failure is reported, with the command that cleans up.
pub async fn down_after_benchmark() {
    match tokio::task::spawn_blocking(down).await {
        Ok(true) => {}
        Ok(false) => eprintln!("taking the control plane down: none was up"),
        Err(e) => eprintln!("taking the control plane down: {e}; run `cargo xtask cluster down`"),
    }
}

/// Bring the cluster up (see the module docs); the answer is its state.
pub async fn up(node_address: Option<&str>) -> Result<State, BoxError> {
    up_without(node_address, &[]).await
}

/// [`up`] with kube-controller-manager's controllers `disabled` (their
/// names, as its `--controllers` flag spells them) off. A cluster that is
/// already up is kept as it is.
pub async fn up_without(node_address: Option<&str>, disabled: &[&str]) -> Result<State, BoxError> {
    if let Some(state) = State::load() {
        if state.components.iter().all(|c| alive(c.pid)) {
            eprintln!("cluster: already up ({})", state.server);
            return Ok(state);
        }
        eprintln!("cluster: a stopped cluster's state found; removing it");
        down_state(state);
    }
    let started = Instant::now();
    let built = tokio::task::spawn_blocking(build).await??;
    eprintln!("cluster: {built}");
    let dir = cluster_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut state = prepare(&dir, node_address, disabled)?;
    if let Some(address) = node_address {
        if address_present(address) {
            eprintln!("cluster: {address} is already on the loopback device");
        } else {
            match ip(&["addr", "add", &format!("{address}/32"), "dev", "lo"]) {
                Ok(()) => state.node_address_added = true,
                Err(e) => {
                    state.node_address = None;
                    eprintln!(
                        "cluster: could not add the node address ({e}); kube-apiserver will not \
                         proxy to kubelet APIs on loopback"
                    );
                }
            }
        }
    }
    state.save()?;
    let boot = Instant::now();
    for name in COMPONENTS {
        spawn(state.component(name)?)?;
        state.save()?;
        let wait = crate::progress::Wait::start("cluster", format!("{name} starting"));
        let took = wait_healthy(&state, name, Duration::from_secs(90)).await?;
        wait.done(&format!("healthy after {:.1} s", took.as_secs_f64()));
        if name == "kube-apiserver" {
            bootstrap(&state.client().await?).await?;
        }
    }
    wait_for_default_service_account(&state.client().await?, "default", Duration::from_secs(60))
        .await?;
    eprintln!(
        "cluster: up in {:.1}s (components started in {:.1}s): {}",
        started.elapsed().as_secs_f64(),
        boot.elapsed().as_secs_f64(),
        state.server
    );
    Ok(state)
}

/// Stop every component of `state`, newest first, remove the node
/// address and the state.
pub fn down_state(mut state: State) {
    for component in state.components.iter_mut().rev() {
        terminate(component);
    }
    if state.node_address_added
        && let Some(address) = &state.node_address
        && let Err(e) = ip(&["addr", "del", &format!("{address}/32"), "dev", "lo"])
    {
        eprintln!("cluster: {e}");
    }
    let _ = std::fs::remove_dir_all(cluster_dir());
}

/// Stop the cluster and remove its state.
pub fn down() -> bool {
    match State::load() {
        Some(state) => {
            down_state(state);
            true
        }
        None => false,
    }
}

/// Stop one component (fault tests); `start` brings it back.
pub fn stop_component(name: &str) -> Result<(), BoxError> {
    let mut state = State::load().ok_or("no cluster is up")?;
    if name == "kube-apiserver" {
        state.apiserver_outages.push((now_micros(), None));
    }
    terminate(state.component(name)?);
    state.save()
}

/// Start a stopped component with its original command line and wait until
/// it is healthy.
pub async fn start_component(name: &str) -> Result<Duration, BoxError> {
    let mut state = State::load().ok_or("no cluster is up")?;
    let component = state.component(name)?;
    if !alive(component.pid) {
        spawn(component)?;
    }
    state.save()?;
    let took = wait_healthy(&state, name, Duration::from_secs(90)).await?;
    if name == "kube-apiserver"
        && let Some(outage) = state.apiserver_outages.last_mut()
        && outage.1.is_none()
    {
        outage.1 = Some(now_micros());
        state.save()?;
    }
    Ok(took)
}
