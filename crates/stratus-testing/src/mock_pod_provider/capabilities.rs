//! The kubelet-API capabilities of [`MockPodProvider`]: logs, exec,
//! attach, port-forward, stats summary and resource metrics, all in
//! memory and deterministic enough to assert on.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{
    AttachIo, ByteStream, ContainerAttach, ContainerExec, ContainerLogOptions, ContainerLogs,
    ContainerRef, ContainerStats, CpuStats, ExitCode, MemoryStats, NodeStats, OutputStream,
    PodError, PodReference, PodStats, PortForward, PortForwardStream, ResourceMetrics, Result,
    StatsSummary, Summary, TermSize, render_resource_metrics,
};

use super::{LOG_ANNOTATION, MockPodProvider, key, now};

/// One line of a container's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When it was written.
    pub time: Time,
    /// The text, without its newline.
    pub text: String,
}

/// Memory each running mock container reports (working set), 8 MiB.
pub const CONTAINER_MEMORY_BYTES: u64 = 8 * 1024 * 1024;
/// CPU each running mock container reports: 10 millicores.
pub const CONTAINER_NANO_CORES: u64 = 10_000_000;

fn log_key(namespace: &str, pod: &str, container: &str) -> String {
    format!("{namespace}/{pod}/{container}")
}

/// Forget the logs of pod key `ns/name`: its containers' keys are the
/// range that starts with `ns/name/` (a lookup, not a scan of every pod's).
pub(super) fn forget_logs(logs: &mut BTreeMap<String, Vec<LogLine>>, pod_key: &str) {
    let prefix = format!("{pod_key}/");
    let containers: Vec<String> = logs
        .range(prefix.clone()..)
        .map(|(key, _)| key)
        .take_while(|key| key.starts_with(&prefix))
        .cloned()
        .collect();
    for key in containers {
        logs.remove(&key);
    }
}

/// Write the start lines of every container of a started pod.
pub(super) fn start_logs(logs: &mut BTreeMap<String, Vec<LogLine>>, pod: &Pod) {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let extra = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LOG_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    for c in pod.spec.iter().flat_map(|s| &s.containers) {
        let time = now();
        let mut lines = vec![LogLine {
            time: time.clone(),
            text: format!("started container {}", c.name),
        }];
        lines.extend(extra.lines().map(|l| LogLine {
            time: time.clone(),
            text: l.to_owned(),
        }));
        logs.insert(log_key(namespace, name, &c.name), lines);
    }
}

fn render(lines: &[LogLine], timestamps: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        if timestamps {
            out.extend_from_slice(
                format!("{} ", line.time.0.strftime("%Y-%m-%dT%H:%M:%S%.9fZ")).as_bytes(),
            );
        }
        out.extend_from_slice(line.text.as_bytes());
        out.push(b'\n');
    }
    out
}

/// Where a container stands.
enum Running {
    Yes,
    Pending,
    Ended,
}

impl MockPodProvider {
    /// Append a line to a container's log (followers see it at once).
    /// `NotFound` if the container is not running here.
    pub fn append_log(&self, container: &ContainerRef, line: &str) -> Result<()> {
        {
            let mut s = self.lock();
            let lines = s
                .logs
                .get_mut(&log_key(
                    &container.namespace,
                    &container.pod,
                    &container.container,
                ))
                .ok_or_else(|| PodError::not_found(format!("container {container} is not here")))?;
            lines.extend(line.lines().map(|l| LogLine {
                time: now(),
                text: l.to_owned(),
            }));
        }
        self.changed.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Exec, attach and port-forward calls running now (a call whose
    /// client went away is dropped, and no longer counts).
    pub fn active_sessions(&self) -> usize {
        self.sessions.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn session(&self) -> SessionGuard {
        self.sessions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        SessionGuard(self.sessions.clone())
    }

    /// Every ConfigMap and Secret change the node told, in order.
    pub fn resource_changes_told(&self) -> Vec<stratus_pod::ResourceChange> {
        self.lock().changes.clone()
    }

    /// Every terminal resize exec and attach sessions received, in order.
    pub fn resizes(&self) -> Vec<TermSize> {
        self.lock().resizes.clone()
    }

    /// Check the container exists: its pod, and whether it runs.
    fn container_state(&self, c: &ContainerRef) -> Result<Running> {
        let s = self.lock();
        let pod = s.pods.get(&key(&c.namespace, &c.pod)).ok_or_else(|| {
            PodError::not_found(format!("pod {}/{} not found", c.namespace, c.pod))
        })?;
        let status = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|s| s.name == c.container));
        let Some(status) = status else {
            return Err(PodError::not_found(format!(
                "container {:?} not found in pod {}/{}",
                c.container, c.namespace, c.pod
            )));
        };
        let state = status.state.clone().unwrap_or_default();
        Ok(if state.running.is_some() {
            Running::Yes
        } else if state.terminated.is_some() {
            Running::Ended
        } else {
            Running::Pending
        })
    }

    fn require_running(&self, c: &ContainerRef) -> Result<()> {
        match self.container_state(c)? {
            Running::Yes => Ok(()),
            Running::Pending => Err(PodError::invalid_input(format!(
                "container {:?} in pod {}/{} is waiting to start",
                c.container, c.namespace, c.pod
            ))),
            Running::Ended => Err(PodError::invalid_input(format!(
                "container {:?} in pod {}/{} is not running",
                c.container, c.namespace, c.pod
            ))),
        }
    }

    /// Resolves when the container is no longer running (or its pod is
    /// gone).
    async fn ended(&self, c: &ContainerRef) {
        let mut changed = self.changed.subscribe();
        loop {
            if !matches!(self.container_state(c), Ok(Running::Yes | Running::Pending)) {
                return;
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    fn env_of(&self, c: &ContainerRef) -> Vec<String> {
        let s = self.lock();
        s.pods
            .get(&key(&c.namespace, &c.pod))
            .and_then(|p| p.spec.as_ref())
            .and_then(|spec| spec.containers.iter().find(|x| x.name == c.container))
            .and_then(|x| x.env.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|e| format!("{}={}", e.name, e.value.unwrap_or_default()))
            .collect()
    }

    /// Run one built-in command.
    async fn run(
        &self,
        c: &ContainerRef,
        command: &[String],
        io: &mut AttachIo,
    ) -> std::io::Result<i32> {
        let Some((program, args)) = command.split_first() else {
            return Ok(0);
        };
        if program == "sh" && args.first().map(String::as_str) == Some("-c") {
            let script: Vec<String> = args
                .get(1)
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default();
            return Box::pin(self.run(c, &script, io)).await;
        }
        match program.as_str() {
            "echo" => {
                write_to(&mut io.stdout, format!("{}\n", args.join(" ")).as_bytes()).await?;
                Ok(0)
            }
            "cat" => {
                if let Some(stdin) = io.stdin.as_mut() {
                    while let Some(chunk) = stdin.next().await {
                        write_to(&mut io.stdout, &chunk?).await?;
                    }
                }
                Ok(0)
            }
            "env" => {
                let mut text = self.env_of(c).join("\n");
                text.push('\n');
                write_to(&mut io.stdout, text.as_bytes()).await?;
                Ok(0)
            }
            "hostname" => {
                write_to(&mut io.stdout, format!("{}\n", c.pod).as_bytes()).await?;
                Ok(0)
            }
            "size" => {
                let size = match io.resize.as_mut() {
                    Some(r) => tokio::time::timeout(Duration::from_secs(5), r.next())
                        .await
                        .ok()
                        .flatten(),
                    None => None,
                };
                if let Some(size) = size {
                    self.lock().resizes.push(size);
                    let text = format!("{}x{}\n", size.width, size.height);
                    write_to(&mut io.stdout, text.as_bytes()).await?;
                    Ok(0)
                } else {
                    write_to(&mut io.stderr, b"size: no terminal size received\n").await?;
                    Ok(1)
                }
            }
            "stderr" => {
                let text = format!("{}\n", args.join(" "));
                if io.tty {
                    write_to(&mut io.stdout, text.as_bytes()).await?;
                } else {
                    write_to(&mut io.stderr, text.as_bytes()).await?;
                }
                Ok(0)
            }
            "sleep" => {
                let secs: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(0.0);
                tokio::time::sleep(Duration::from_secs_f64(secs.clamp(0.0, 3600.0))).await;
                Ok(0)
            }
            "exit" => Ok(args.first().and_then(|a| a.parse().ok()).unwrap_or(0)),
            "true" => Ok(0),
            "false" => Ok(1),
            other => {
                let text = format!("mock: {other}: command not found\n");
                if io.tty {
                    write_to(&mut io.stdout, text.as_bytes()).await?;
                } else {
                    write_to(&mut io.stderr, text.as_bytes()).await?;
                }
                Ok(127)
            }
        }
    }
}

/// Counts a running session until dropped.
struct SessionGuard(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

async fn write_to(sink: &mut Option<OutputStream>, data: &[u8]) -> std::io::Result<()> {
    match sink {
        Some(s) => s.write(data).await,
        None => Ok(()),
    }
}

#[async_trait]
impl ContainerLogs for MockPodProvider {
    async fn container_logs(
        &self,
        container: &ContainerRef,
        options: &ContainerLogOptions,
    ) -> Result<ByteStream> {
        self.begin("container_logs", container.to_string()).await?;
        self.container_state(container)?;
        if options.previous {
            return Err(PodError::invalid_input(format!(
                "previous terminated container {:?} in pod {}/{} not found",
                container.container, container.namespace, container.pod
            )));
        }
        let key = log_key(&container.namespace, &container.pod, &container.container);
        let lines = self.lock().logs.get(&key).cloned().unwrap_or_default();
        let since = options.since(k8s_openapi::jiff::Timestamp::now());
        let selected: Vec<LogLine> = lines
            .iter()
            .filter(|l| since.is_none_or(|s| l.time.0 >= s))
            .cloned()
            .collect();
        let tail = options
            .tail_lines
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .unwrap_or(usize::MAX);
        let start = selected.len().saturating_sub(tail);
        let first = render(&selected[start..], options.timestamps);
        if !options.follow {
            return Ok(stratus_pod::stream_from_chunks(vec![first]));
        }
        let timestamps = options.timestamps;
        let container = container.clone();
        let state = (
            self.clone(),
            self.changed.subscribe(),
            lines.len(),
            Some(first),
        );
        Ok(Box::pin(futures_util::stream::unfold(
            state,
            move |(this, mut changed, seen, first)| {
                let (key, container) = (key.clone(), container.clone());
                async move {
                    if let Some(first) = first {
                        return Some((Ok(first), (this, changed, seen, None)));
                    }
                    loop {
                        let new = this
                            .lock()
                            .logs
                            .get(&key)
                            .map(|l| l.get(seen..).unwrap_or_default().to_vec());
                        match new {
                            Some(new) if !new.is_empty() => {
                                let seen = seen + new.len();
                                let bytes = render(&new, timestamps);
                                return Some((Ok(bytes), (this, changed, seen, None)));
                            }
                            None => return None,
                            Some(_) => {}
                        }
                        if !matches!(
                            this.container_state(&container),
                            Ok(Running::Yes | Running::Pending)
                        ) {
                            return None;
                        }
                        changed.changed().await.ok()?;
                    }
                }
            },
        )))
    }
}

#[async_trait]
impl ContainerExec for MockPodProvider {
    async fn exec(
        &self,
        container: &ContainerRef,
        command: &[String],
        mut io: AttachIo,
    ) -> Result<ExitCode> {
        self.begin("exec", container.to_string()).await?;
        self.require_running(container)?;
        let _session = self.session();
        let code = self
            .run(container, command, &mut io)
            .await
            .map_err(PodError::other)?;
        Ok(ExitCode(code))
    }
}

#[async_trait]
impl ContainerAttach for MockPodProvider {
    async fn attach(&self, container: &ContainerRef, mut io: AttachIo) -> Result<()> {
        self.begin("attach", container.to_string()).await?;
        self.require_running(container)?;
        let _session = self.session();
        match io.stdin.take() {
            Some(mut stdin) => {
                while let Some(chunk) = stdin.next().await {
                    let chunk = chunk.map_err(PodError::other)?;
                    write_to(&mut io.stdout, &chunk)
                        .await
                        .map_err(PodError::other)?;
                }
            }
            None => {
                let hello = format!("attached to {}\n", container.container);
                write_to(&mut io.stdout, hello.as_bytes())
                    .await
                    .map_err(PodError::other)?;
                self.ended(container).await;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl PortForward for MockPodProvider {
    async fn port_forward(
        &self,
        namespace: &str,
        pod: &str,
        port: u16,
        mut stream: PortForwardStream,
    ) -> Result<()> {
        self.begin("port_forward", key(namespace, pod)).await?;
        if !self.lock().pods.contains_key(&key(namespace, pod)) {
            return Err(PodError::not_found(format!(
                "pod {namespace}/{pod} not found"
            )));
        }
        tracing::debug!(namespace, pod, port, "mock port-forward echoes");
        let _session = self.session();
        while let Some(chunk) = stream.incoming.next().await {
            let chunk = chunk.map_err(PodError::other)?;
            stream
                .outgoing
                .write(&chunk)
                .await
                .map_err(PodError::other)?;
        }
        stream.outgoing.close().await.map_err(PodError::other)?;
        Ok(())
    }
}

#[async_trait]
impl StatsSummary for MockPodProvider {
    async fn stats_summary(&self) -> Result<Summary> {
        self.begin("stats_summary", String::new()).await?;
        let taken = now();
        let elapsed_nanos = |start: &Option<Time>| {
            start
                .as_ref()
                .map(|s| (taken.0 - s.0).get_nanoseconds().max(0) as u64)
                .unwrap_or_default()
        };
        let cpu = |usage: u64, cores: u64| CpuStats {
            time: Some(taken.clone()),
            usage_nano_cores: Some(cores),
            usage_core_nano_seconds: Some(usage),
            ..Default::default()
        };
        let memory = |bytes: u64| MemoryStats {
            time: Some(taken.clone()),
            usage_bytes: Some(bytes),
            working_set_bytes: Some(bytes),
            ..Default::default()
        };
        let s = self.lock();
        let mut pods = Vec::new();
        for pod in s.pods.values() {
            let status = pod.status.clone().unwrap_or_default();
            let containers: Vec<ContainerStats> = status
                .container_statuses
                .iter()
                .flatten()
                .filter_map(|c| {
                    let started = c.state.as_ref()?.running.as_ref()?.started_at.clone();
                    let usage = elapsed_nanos(&started) / 100;
                    Some(ContainerStats {
                        name: c.name.clone(),
                        start_time: started,
                        cpu: Some(cpu(usage, CONTAINER_NANO_CORES)),
                        memory: Some(memory(CONTAINER_MEMORY_BYTES)),
                        ..Default::default()
                    })
                })
                .collect();
            if containers.is_empty() {
                continue;
            }
            let n = containers.len() as u64;
            let usage: u64 = containers
                .iter()
                .filter_map(|c| c.cpu.as_ref()?.usage_core_nano_seconds)
                .sum();
            pods.push(PodStats {
                pod_ref: PodReference {
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                },
                start_time: status.start_time.clone(),
                containers,
                cpu: Some(cpu(usage, n * CONTAINER_NANO_CORES)),
                memory: Some(memory(n * CONTAINER_MEMORY_BYTES)),
                ..Default::default()
            });
        }
        let node_usage: u64 = pods
            .iter()
            .filter_map(|p| p.cpu.as_ref()?.usage_core_nano_seconds)
            .sum();
        let node_cores: u64 = pods
            .iter()
            .filter_map(|p| p.cpu.as_ref()?.usage_nano_cores)
            .sum();
        let node_memory: u64 = pods
            .iter()
            .filter_map(|p| p.memory.as_ref()?.working_set_bytes)
            .sum();
        Ok(Summary {
            node: NodeStats {
                node_name: self.node_name.to_string(),
                start_time: Some(self.started.clone()),
                cpu: Some(cpu(node_usage, node_cores)),
                memory: Some(memory(node_memory)),
                ..Default::default()
            },
            pods,
        })
    }
}

#[async_trait]
impl stratus_pod::ResourceChanges for MockPodProvider {
    async fn resource_changed(&self, change: &stratus_pod::ResourceChange) -> Result<()> {
        self.begin(
            "resource_changed",
            format!("{}/{}", change.namespace, change.name),
        )
        .await?;
        self.lock().changes.push(change.clone());
        Ok(())
    }
}

#[async_trait]
impl ResourceMetrics for MockPodProvider {
    async fn resource_metrics(&self) -> Result<String> {
        Ok(render_resource_metrics(&self.stats_summary().await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_a_pods_logs_leaves_the_pods_sharing_its_name_prefix() {
        let line = || {
            vec![LogLine {
                time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                text: "started".into(),
            }]
        };
        let mut logs: BTreeMap<String, Vec<LogLine>> = [
            "default/web/app",
            "default/web/sidecar",
            "default/web-2/app",
            "default/webx/app",
            "other/web/app",
        ]
        .into_iter()
        .map(|k| (k.to_owned(), line()))
        .collect();
        forget_logs(&mut logs, "default/web");
        let left: Vec<&str> = logs.keys().map(String::as_str).collect();
        assert_eq!(
            left,
            ["default/web-2/app", "default/webx/app", "other/web/app"]
        );
        forget_logs(&mut logs, "default/none");
        assert_eq!(logs.len(), 3);
    }
}
