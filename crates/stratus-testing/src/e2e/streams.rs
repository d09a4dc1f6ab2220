//! The kubelet API's streaming capabilities probed through the API server
//! as kubectl calls them (`exec`, `attach`, `port-forward`), shared by the
//! e2e runner and the pod conformance suite. Each answers `Ok(None)` when
//! the node does not declare the capability (a 501 before the upgrade),
//! `Ok(Some(()))` when it works, and an error naming the provider's method
//! otherwise, a declared capability answering `NotImplemented` included.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::AttachParams;
use stratus_kubelet::api::FORWARD_NOT_IMPLEMENTED;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long an attach or a port-forward is given to fail: both stream for
/// as long as the client stays, so a working one is told by the absence
/// of a failure.
const NO_FAILURE_WITHIN: Duration = Duration::from_secs(2);

/// Whether `e` is the 501 a node answers, before the upgrade, for a
/// capability its provider does not declare.
fn undeclared(e: &kube::Error) -> bool {
    match e {
        kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(
            status,
        )) => *status == http::StatusCode::NOT_IMPLEMENTED,
        kube::Error::Api(s) => s.code == 501,
        _ => false,
    }
}

/// Run `echo stratus-e2e-exec` in the pod's container `app` through the API
/// server (`pods/exec`); `Ok(None)` when the node serves no exec (501
/// before the upgrade: the provider does not declare it); a declared exec
/// answering `NotImplemented` fails the command, an error naming
/// `ContainerExec::exec`.
pub(crate) async fn exec_echo(pods: &Api<Pod>, name: &str) -> Result<Option<()>, String> {
    let params = AttachParams::default().container("app").stderr(false);
    let mut process = match pods.exec(name, ["echo", "stratus-e2e-exec"], &params).await {
        Ok(p) => p,
        Err(e) if undeclared(&e) => return Ok(None),
        Err(e) => return Err(format!("POST pods/{name}/exec: {e}")),
    };
    let mut out = String::new();
    if let Some(mut stdout) = process.stdout() {
        stdout
            .read_to_string(&mut out)
            .await
            .map_err(|e| format!("reading the exec's stdout: {e}"))?;
    }
    let status = process.take_status();
    process
        .join()
        .await
        .map_err(|e| format!("the exec stream broke: {e}"))?;
    if let Some(status) = status
        && let Some(status) = status.await
        && status.status.as_deref() == Some("Failure")
    {
        return Err(format!(
            "the command failed: {} (ContainerExec::exec)",
            status.message.unwrap_or_default()
        ));
    }
    if out.trim() == "stratus-e2e-exec" {
        Ok(Some(()))
    } else {
        Err(format!(
            "`echo stratus-e2e-exec` printed {out:?} (ContainerExec::exec)"
        ))
    }
}

/// `kubectl attach`'s request (stdout only) on the pod's container `app`:
/// `Ok(None)` when the node serves no attach; an error when the attach
/// fails within [`NO_FAILURE_WITHIN`] (a declared attach answering
/// `NotImplemented` is named so).
pub(crate) async fn attach_probe(pods: &Api<Pod>, name: &str) -> Result<Option<()>, String> {
    let params = AttachParams::default()
        .container("app")
        .stdin(false)
        .stdout(true)
        .stderr(false);
    let mut attached = match pods.attach(name, &params).await {
        Ok(a) => a,
        Err(e) if undeclared(&e) => return Ok(None),
        Err(e) => return Err(format!("POST pods/{name}/attach: {e}")),
    };
    let verdict = match attached.take_status() {
        Some(status) => match tokio::time::timeout(NO_FAILURE_WITHIN, status).await {
            Ok(Some(s)) if s.status.as_deref() == Some("Failure") => {
                Err(match s.reason.as_deref() {
                    Some("NotImplemented") => "attach() is declared (Some) but answers NotImplemented; return None from attach() if the provider cannot attach".into(),
                    _ => format!(
                        "the attach failed: {} (ContainerAttach::attach)",
                        s.message.unwrap_or_default()
                    ),
                })
            }
            _ => Ok(Some(())),
        },
        None => Ok(Some(())),
    };
    attached.abort();
    verdict
}

/// `kubectl port-forward`'s request for the pod's `port`, a line written
/// through it: `Ok(None)` when the node serves no port-forward; an error
/// when the forward cannot be opened, or when the provider declares
/// port-forwarding and answers `NotImplemented`. What listens in the pod is
/// the vendor's, so an answer, the connection closed, or an error of the
/// pod's port (nothing listening) within [`NO_FAILURE_WITHIN`] all pass.
pub(crate) async fn port_forward_probe(
    pods: &Api<Pod>,
    name: &str,
    port: u16,
) -> Result<Option<()>, String> {
    let mut forwarder = match pods.portforward(name, &[port]).await {
        Ok(f) => f,
        Err(e) if undeclared(&e) => return Ok(None),
        Err(e) => return Err(format!("GET pods/{name}/portforward: {e}")),
    };
    let (Some(mut stream), Some(error)) = (forwarder.take_stream(port), forwarder.take_error(port))
    else {
        forwarder.abort();
        return Err(format!(
            "the forward of port {port} has no data or error stream"
        ));
    };
    let mut error = Box::pin(error);
    let mut answer = [0u8; 64];
    let failure = async {
        stream
            .write_all(b"stratus-port-forward\n")
            .await
            .map_err(|e| format!("writing through the forward: {e}"))?;
        Ok::<_, String>(tokio::select! {
            message = &mut error => message,
            read = stream.read(&mut answer) => match read {
                Ok(n) if n > 0 => None,
                // Closed: the reason, if any, follows on the error stream.
                _ => tokio::time::timeout(NO_FAILURE_WITHIN, &mut error).await.ok().flatten(),
            },
            () = tokio::time::sleep(NO_FAILURE_WITHIN) => None,
        })
    }
    .await;
    forwarder.abort();
    match failure? {
        Some(message) if message.contains(FORWARD_NOT_IMPLEMENTED) => Err(format!(
            "port_forward() is declared (Some) but answers NotImplemented ({message}); return None from port_forward() if the provider cannot forward"
        )),
        _ => Ok(Some(())),
    }
}
