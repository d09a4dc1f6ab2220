//! `kubectl exec` and `kubectl port-forward` on a process node: a command
//! started beside the container's process, with its environment and
//! directory; a connection to the port at the pod's IP, or on the host's
//! loopback when nothing listens there (pods share the host's network).

use std::process::Stdio;

use async_trait::async_trait;

use stratus_kubelet::streams::{copy_from_stream, copy_to_sink};
use stratus_pod::{
    AttachIo, ContainerExec, ContainerRef, ExitCode, PodError, PortForward, PortForwardStream,
    Result,
};

use crate::ProcessProvider;
use crate::group::GroupGuard;
use crate::state::key;

#[async_trait]
impl ContainerExec for ProcessProvider {
    async fn exec(
        &self,
        container: &ContainerRef,
        command: &[String],
        io: AttachIo,
    ) -> Result<ExitCode> {
        let key = key(&container.namespace, &container.pod);
        let launch = self
            .inner()
            .running_launch(&key, &container.container)
            .ok_or_else(|| {
                PodError::not_found(format!(
                    "container {:?} of pod {key} is not running",
                    container.container
                ))
            })?;
        let Some((program, args)) = command.split_first() else {
            return Err(PodError::invalid_input("exec needs a command"));
        };
        if io.tty {
            let code = crate::terminal::exec_on_terminal(&launch, program, args, io).await?;
            return Ok(ExitCode(code));
        }
        let mut child = launch
            .command(program, args)
            .stdin(if io.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| PodError::invalid_input(format!("cannot run {program:?}: {e}")))?;
        launch.limit(&child);
        let _guard = GroupGuard::recorded(&child, &launch).await;
        // End of the client's input closes the command's.
        let feeding = match (io.stdin, child.stdin.take()) {
            (Some(input), Some(stdin)) => Some(tokio::spawn(copy_from_stream(input, stdin))),
            _ => None,
        };
        let mut outputs = Vec::new();
        if let (Some(out), Some(sink)) = (child.stdout.take(), io.stdout) {
            outputs.push(tokio::spawn(copy_to_sink(out, sink)));
        }
        if let (Some(err), Some(sink)) = (child.stderr.take(), io.stderr) {
            outputs.push(tokio::spawn(copy_to_sink(err, sink)));
        }
        let status = child.wait().await.map_err(|e| {
            PodError::unavailable(None, format!("cannot wait for {program:?}: {e}"))
        })?;
        for output in outputs {
            let _ = output.await;
        }
        if let Some(feeding) = feeding {
            feeding.abort();
        }
        Ok(ExitCode(crate::plan::exit_code(status)))
    }
}

#[async_trait]
impl PortForward for ProcessProvider {
    async fn port_forward(
        &self,
        namespace: &str,
        pod: &str,
        port: u16,
        stream: PortForwardStream,
    ) -> Result<()> {
        let key = key(namespace, pod);
        let Some(pod_ip) = self.inner().pod_ip(&key) else {
            return Err(PodError::not_found(format!("pod {key} is not running")));
        };
        let pod_ip = pod_ip.as_str();
        // The pod's IP first; a server listening on the loopback only
        // (pods share the host's network) is reached there.
        let socket = match tokio::net::TcpStream::connect((pod_ip, port)).await {
            Err(_) if pod_ip != "127.0.0.1" => {
                tokio::net::TcpStream::connect(("127.0.0.1", port)).await
            }
            connected => connected,
        }
        .map_err(|e| {
            PodError::unavailable(
                None,
                format!("cannot connect to port {port} of pod {key}: {e}"),
            )
        })?;
        let (reader, writer) = socket.into_split();
        let PortForwardStream { incoming, outgoing } = stream;
        let mut back = tokio::spawn(copy_to_sink(reader, outgoing));
        let forth = copy_from_stream(incoming, writer);
        // The connection ends when the server closes it, or when the
        // client does and the server has answered what it sent.
        tokio::select! {
            _ = &mut back => {}
            _ = forth => {
                let _ = back.await;
            }
        }
        Ok(())
    }
}
