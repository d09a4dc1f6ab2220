//! Container probes — `exec`, `httpGet` and `tcpSocket` — with the
//! kubelet's timings: `initialDelaySeconds`, `periodSeconds` (10),
//! `timeoutSeconds` (1), `successThreshold` (1) and `failureThreshold`
//! (3). `httpGet` and `tcpSocket` connect to the probe's host, or to the
//! pod's IP (the node's [`pod_ip`](crate::ProcessConfig::pod_ip), the
//! host's loopback by default) as the kubelet's do.

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerPort, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::plan::Launch;

/// The probe's timings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) initial_delay: Duration,
    pub(crate) period: Duration,
    pub(crate) timeout: Duration,
    pub(crate) success_threshold: u32,
    pub(crate) failure_threshold: u32,
}

fn seconds(value: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(value.map_or(default, |v| u64::try_from(v.max(0)).unwrap_or(default)))
}

/// The timings of `probe`, with the kubelet's defaults.
pub(crate) fn timing(probe: &Probe) -> Timing {
    let count = |v: Option<i32>| v.map_or(0, |v| u32::try_from(v).unwrap_or(0));
    Timing {
        initial_delay: seconds(probe.initial_delay_seconds, 0),
        period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
        timeout: seconds(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
        success_threshold: count(probe.success_threshold).max(1),
        failure_threshold: probe.failure_threshold.map_or(3, |v| count(Some(v)).max(1)),
    }
}

/// Run `probe` once against the container `launch`: success, or why not.
pub(crate) async fn check(probe: &Probe, launch: &Launch, timeout: Duration) -> Result<(), String> {
    let attempt = async {
        if let Some(exec) = &probe.exec {
            return exec_check(exec.command.as_deref().unwrap_or_default(), launch).await;
        }
        if let Some(http) = &probe.http_get {
            let port = port(&http.port, &launch.ports)?;
            let host = http
                .host
                .clone()
                .unwrap_or_else(|| launch.probe_host.clone());
            return http_check(&host, port, http.path.as_deref().unwrap_or("/")).await;
        }
        if let Some(tcp) = &probe.tcp_socket {
            let port = port(&tcp.port, &launch.ports)?;
            let host = tcp
                .host
                .clone()
                .unwrap_or_else(|| launch.probe_host.clone());
            return tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map(drop)
                .map_err(|e| format!("dial tcp {host}:{port}: {e}"));
        }
        Err("no probe handler".into())
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(format!("timed out after {}s", timeout.as_secs())),
    }
}

/// A port number, or a container port's name.
fn port(port: &IntOrString, ports: &[ContainerPort]) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port)
            .ok_or_else(|| format!("no container port named {name:?}"))?,
    };
    u16::try_from(number).map_err(|_| format!("port {number} is out of range"))
}

async fn exec_check(command: &[String], launch: &Launch) -> Result<(), String> {
    let (program, args) = command
        .split_first()
        .ok_or("the exec probe has no command")?;
    let mut child = launch
        .command(program, args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {program:?}: {e}"))?;
    launch.limit(&child);
    let _guard = crate::group::GroupGuard::recorded(&child, launch).await;
    let status = child.wait().await.map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("command {command:?} exited with {status}"))
    }
}

async fn http_check(host: &str, port: u16, path: &str) -> Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("Get \"http://{host}:{port}{path}\": {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/stratus\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = vec![0u8; 64];
    let n = stream.read(&mut head).await.map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&head[..n]);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {line:?}"))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(format!("HTTP probe failed with statuscode: {code}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_default_as_the_kubelet() {
        let t = timing(&Probe::default());
        assert_eq!(t.period, Duration::from_secs(10));
        assert_eq!(t.timeout, Duration::from_secs(1));
        assert_eq!((t.success_threshold, t.failure_threshold), (1, 3));
        let t = timing(&Probe {
            period_seconds: Some(2),
            failure_threshold: Some(1),
            initial_delay_seconds: Some(5),
            ..Default::default()
        });
        assert_eq!((t.period, t.failure_threshold), (Duration::from_secs(2), 1));
        assert_eq!(t.initial_delay, Duration::from_secs(5));
    }

    #[test]
    fn named_ports_resolve() {
        let ports = vec![ContainerPort {
            name: Some("http".into()),
            container_port: 8080,
            ..Default::default()
        }];
        assert_eq!(port(&IntOrString::String("http".into()), &ports), Ok(8080));
        assert_eq!(port(&IntOrString::Int(81), &ports), Ok(81));
        assert!(port(&IntOrString::String("grpc".into()), &ports).is_err());
        assert!(port(&IntOrString::Int(70000), &ports).is_err());
    }
}
