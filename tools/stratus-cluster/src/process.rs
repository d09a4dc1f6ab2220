//! The components' processes: started, signalled, checked for health;
//! the node address on the loopback device.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::BoxError;

use super::state::{Component, State};

/// Start one component in the background (its own process group, so that
/// Ctrl-C in the terminal that ran `up` does not reach it).
pub(crate) fn spawn(component: &mut Component) -> Result<(), BoxError> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&component.log)
        .map_err(|e| format!("{}: {e}", component.log.display()))?;
    let child = Command::new(&component.program)
        .args(&component.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", component.program.display()))?;
    component.pid = child.id();
    Ok(())
}

/// True if a cluster of `cargo xtask cluster` is up (its state saved and
/// every component running).
pub(crate) fn is_up() -> bool {
    State::load().is_some_and(|s| s.components.iter().all(|c| alive(c.pid)))
}

pub(crate) fn alive(pid: u32) -> bool {
    pid != 0
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            // A zombie (state Z) has exited.
            .is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
}

pub(crate) fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Stop a component: SIGTERM, then SIGKILL after 10 s.
pub(crate) fn terminate(component: &mut Component) {
    if !alive(component.pid) {
        component.pid = 0;
        return;
    }
    signal(component.pid, "TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(component.pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(component.pid) {
        signal(component.pid, "KILL");
        while alive(component.pid) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    component.pid = 0;
}

/// An HTTP(S) client for a health endpoint (the components' own serving
/// certificates are self-signed, so they are not verified; the request
/// goes to 127.0.0.1 only).
pub(crate) fn health_client(url: &str) -> Result<kube::Client, BoxError> {
    let uri: http::Uri = url.parse()?;
    let base: http::Uri = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        uri.authority().ok_or("health URL without a host")?
    )
    .parse()?;
    let mut config = kube::Config::new(base);
    config.accept_invalid_certs = true;
    config.read_timeout = Some(Duration::from_secs(5));
    Ok(kube::Client::try_from(config)?)
}

/// Whether a component answers `ok` on its health endpoint (kube-apiserver
/// is asked as the administrator).
pub(crate) async fn healthy(state: &State, component: &Component) -> bool {
    let client = if component.name == "kube-apiserver" {
        state.client().await
    } else {
        health_client(&component.health)
    };
    let Ok(client) = client else {
        return false;
    };
    let path = component
        .health
        .parse::<http::Uri>()
        .ok()
        .map(|u| u.path().to_owned())
        .unwrap_or_default();
    let Ok(request) = http::Request::get(path).body(Vec::new()) else {
        return false;
    };
    match client.request_text(request).await {
        Ok(body) => body.trim() == "ok" || body.contains("\"health\":\"true\""),
        Err(_) => false,
    }
}

/// Wait until `component` is healthy; fail early if its process exits.
pub(crate) async fn wait_healthy(
    state: &State,
    name: &str,
    within: Duration,
) -> Result<Duration, BoxError> {
    let started = Instant::now();
    let component = state
        .components
        .iter()
        .find(|c| c.name == name)
        .ok_or("no such component")?;
    loop {
        if healthy(state, component).await {
            return Ok(started.elapsed());
        }
        if !alive(component.pid) {
            return Err(format!(
                "{name} exited; the end of {}:\n{}",
                component.log.display(),
                tail(&component.log, 20)
            )
            .into());
        }
        if started.elapsed() > within {
            return Err(format!(
                "{name} was not healthy within {}s; the end of {}:\n{}",
                within.as_secs(),
                component.log.display(),
                tail(&component.log, 20)
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Run `ip ARGS`: its error output when it fails.
pub(crate) fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether `address` is on the loopback device.
pub(crate) fn address_present(address: &str) -> bool {
    Command::new("ip")
        .args(["-o", "addr", "show", "dev", "lo"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!(" {address}/")))
}
