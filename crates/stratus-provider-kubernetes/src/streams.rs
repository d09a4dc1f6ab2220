//! Logs, exec, attach and port-forward, proxied to the remote cluster's
//! API server (its `pods/log`, `pods/exec`, `pods/attach` and
//! `pods/portforward` subresources, over WebSocket as kubectl does).

use async_trait::async_trait;
use futures_util::{AsyncReadExt as _, SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, AttachedProcess, LogParams};
use stratus_pod::{
    AttachIo, ByteStream, ContainerAttach, ContainerExec, ContainerLogOptions, ContainerLogs,
    ContainerRef, ExitCode, OutputStream, PodError, PortForward, PortForwardStream, Result,
};
use tokio::io::{AsyncRead, AsyncWrite};

use stratus_kubelet::streams::{copy_from_stream, copy_to_sink};

use crate::KubernetesProvider;
use crate::dependencies::remote_error;

const CHUNK: usize = 32 * 1024;

impl KubernetesProvider {
    /// The remote pods API and the remote name of home pod `namespace/pod`.
    fn locate(&self, namespace: &str, pod: &str) -> Result<(Api<Pod>, String)> {
        let (remote_ns, remote_name) = self.remote_pod(namespace, pod).ok_or_else(|| {
            PodError::not_found(format!("pod {namespace}/{pod} is not offloaded"))
        })?;
        Ok((
            Api::namespaced(self.inner.remote.clone(), &remote_ns),
            remote_name,
        ))
    }
}

#[async_trait]
impl ContainerLogs for KubernetesProvider {
    async fn container_logs(
        &self,
        container: &ContainerRef,
        options: &ContainerLogOptions,
    ) -> Result<ByteStream> {
        options.validate()?;
        let (api, name) = self.locate(&container.namespace, &container.pod)?;
        let params = LogParams {
            container: Some(container.container.clone()),
            follow: options.follow,
            limit_bytes: options.limit_bytes,
            pretty: false,
            previous: options.previous,
            since_seconds: options.since_seconds,
            since_time: options.since_time.as_ref().map(|t| t.0),
            tail_lines: options.tail_lines,
            timestamps: options.timestamps,
        };
        let reader = api.log_stream(&name, &params).await.map_err(remote_error)?;
        let reader = Box::pin(reader);
        Ok(Box::pin(futures_util::stream::unfold(
            reader,
            |mut reader| async move {
                let mut buf = vec![0; CHUNK];
                match reader.read(&mut buf).await {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok(buf), reader))
                    }
                    Err(e) => Some((Err(e), reader)),
                }
            },
        )))
    }
}

/// Open an exec or attach session on the remote API server with the
/// streams `io` asks for.
fn attach_params(container: &ContainerRef, io: &AttachIo) -> AttachParams {
    AttachParams {
        container: Some(container.container.clone()),
        stdin: io.stdin.is_some(),
        stdout: io.stdout.is_some(),
        // With a terminal, stderr is merged into stdout.
        stderr: io.stderr.is_some() && !io.tty,
        tty: io.tty,
        ..AttachParams::default()
    }
}

/// Copy `reader` to the client's `sink`, if it asked for that stream.
async fn pump_out(reader: impl AsyncRead + Unpin, sink: Option<OutputStream>) {
    if let Some(sink) = sink {
        copy_to_sink(reader, sink).await;
    }
}

/// Copy the client's `stream` into `writer`, when both exist.
async fn pump_in(stream: Option<ByteStream>, writer: Option<impl AsyncWrite + Unpin>) {
    if let (Some(stream), Some(writer)) = (stream, writer) {
        copy_from_stream(stream, writer).await;
    }
}

/// Run the session's streams to their end; the remote status, if any.
async fn run_session(
    mut process: AttachedProcess,
    mut io: AttachIo,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status> {
    let status = process.take_status();
    let stdin = pump_in(io.stdin.take(), process.stdin());
    let stdout = pump_out(
        process.stdout().unwrap_or_else(|| tokio::io::simplex(1).0),
        io.stdout.take(),
    );
    let stderr = pump_out(
        process.stderr().unwrap_or_else(|| tokio::io::simplex(1).0),
        io.stderr.take(),
    );
    let resize = async {
        if let (Some(mut sizes), Some(mut sender)) = (io.resize.take(), process.terminal_size()) {
            while let Some(size) = sizes.next().await {
                let size = kube::api::TerminalSize {
                    width: size.width,
                    height: size.height,
                };
                if sender.send(size).await.is_err() {
                    break;
                }
            }
        }
    };
    // Stdin and resizes end with the client; the session ends when the
    // remote output ends.
    let input = async {
        tokio::join!(stdin, resize);
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = async { tokio::join!(stdout, stderr) } => {}
        () = input => {}
    }
    let status = match status {
        Some(status) => status.await,
        None => None,
    };
    let _ = process.join().await;
    status
}

/// The exit code in a remote exec's final status (`Success`, or
/// `NonZeroExitCode` with an `ExitCode` cause).
fn exit_code(
    status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
) -> Result<ExitCode> {
    let Some(status) = status else {
        return Ok(ExitCode::SUCCESS);
    };
    if status.status.as_deref() == Some("Success") {
        return Ok(ExitCode::SUCCESS);
    }
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        let code = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.reason.as_deref() == Some("ExitCode"))
            .and_then(|c| c.message.as_deref()?.parse().ok())
            .unwrap_or(1);
        return Ok(ExitCode(code));
    }
    Err(PodError::other(std::io::Error::other(format!(
        "remote exec failed: {}",
        status.message.as_deref().unwrap_or("no message")
    ))))
}

#[async_trait]
impl ContainerExec for KubernetesProvider {
    async fn exec(
        &self,
        container: &ContainerRef,
        command: &[String],
        io: AttachIo,
    ) -> Result<ExitCode> {
        let (api, name) = self.locate(&container.namespace, &container.pod)?;
        let process = api
            .exec(&name, command.to_vec(), &attach_params(container, &io))
            .await
            .map_err(remote_error)?;
        let status = run_session(process, io).await;
        exit_code(status.as_ref())
    }
}

#[async_trait]
impl ContainerAttach for KubernetesProvider {
    async fn attach(&self, container: &ContainerRef, io: AttachIo) -> Result<()> {
        let (api, name) = self.locate(&container.namespace, &container.pod)?;
        let process = api
            .attach(&name, &attach_params(container, &io))
            .await
            .map_err(remote_error)?;
        run_session(process, io).await;
        Ok(())
    }
}

#[async_trait]
impl PortForward for KubernetesProvider {
    async fn port_forward(
        &self,
        namespace: &str,
        pod: &str,
        port: u16,
        stream: PortForwardStream,
    ) -> Result<()> {
        let (api, name) = self.locate(namespace, pod)?;
        let mut forwarder = api
            .portforward(&name, &[port])
            .await
            .map_err(remote_error)?;
        let remote = forwarder.take_stream(port).ok_or_else(|| {
            PodError::other(std::io::Error::other(
                "the remote port-forward has no stream",
            ))
        })?;
        let (reader, writer) = tokio::io::split(remote);
        let PortForwardStream { incoming, outgoing } = stream;
        tokio::join!(
            copy_from_stream(incoming, writer),
            copy_to_sink(reader, outgoing)
        );
        forwarder.abort();
        Ok(())
    }
}
