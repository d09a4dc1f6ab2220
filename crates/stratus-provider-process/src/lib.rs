//! A virtual-kubelet provider that runs pods as local processes, in the
//! manner of Nomad's `raw_exec` and InterLink: each container is a process
//! group on the host.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_pod::PodLifecycleHandler;
//! use stratus_provider_process::{ProcessConfig, ProcessProvider};
//!
//! let mut config = ProcessConfig::new("/var/lib/stratus-process");
//! // Containers of `busybox` without a command run the host's shell.
//! config.images.insert("busybox".into(), vec!["sh".into()]);
//! let provider: Arc<dyn PodLifecycleHandler> = Arc::new(ProcessProvider::new(config));
//! // Run it as a virtual node: stratus_kubelet::VirtualNode::builder(...).provider(provider)
//! # let _ = provider;
//! ```
//!
//! What a pod becomes:
//! - **Containers**: `command` + `args` (or the program the operator maps
//!   the image to, then `args`), with the resolved environment, in a
//!   directory of its own; init containers first, in order, each to
//!   completion; then every container at once.
//! - **Restarts**: `restartPolicy` Always / OnFailure / Never with the
//!   kubelet's back-off (first restart at once, then 10 s doubling to
//!   5 min, reset after 10 min of running), `restartCount`, `lastState`.
//! - **Status**: Waiting / Running / Terminated with exit codes and times;
//!   the phase and the PodScheduled, Initialized, ContainersReady and Ready
//!   conditions by the kubelet's rules; pushed through the notifier.
//! - **Probes**: `exec`, `httpGet` and `tcpSocket` startup, liveness and
//!   readiness probes with the kubelet's timings; readiness drives
//!   `ready` and the Ready condition, a failing liveness or startup probe
//!   restarts the container.
//! - **Deletion**: SIGTERM to the container's process group, the grace
//!   period, then SIGKILL; whatever the process left in its group is killed
//!   when it ends. The pod's directory is removed.
//! - **Logs**: stdout and stderr captured per container instance (CRI
//!   format), served with `follow`, `tailLines`, `sinceSeconds` /
//!   `sinceTime`, `timestamps`, `limitBytes` and `previous`.
//! - **Exec and port-forward**: `kubectl exec` runs the command beside
//!   the container's process, with its environment and directory (stdin,
//!   stdout, stderr, exit code; with `-t` on a pseudo-terminal whose
//!   window size follows the client's); `kubectl attach` to the running
//!   process's output and (with `stdin: true`) its stdin; `kubectl port-forward`
//!   connects to the port on the host's loopback.
//! - **Stats**: the kubelet's stats summary and `/metrics/resource` from
//!   `/proc` (CPU time and resident memory of each container's process
//!   group, the host's CPU and memory for the node).
//! - **Volumes**: `emptyDir`; `configMap`, `secret`, `downwardAPI` and
//!   `projected` as files rewritten when their source changes (with
//!   [`ProcessProvider::with_resources`]); see [`CONTAINER_ROOT_ENV`] for
//!   how mounts appear to a process. Other kinds are refused with a clear
//!   reason.
//! - **Refused**: `hostPID`, `hostIPC`, privileged containers, images with
//!   no mapping and no command, environments over
//!   [`MAX_ENVIRONMENT_BYTES`]: `create_pod` fails with `InvalidInput` and
//!   the node reports `ProviderFailed` with the message and an event.
//!
//! Pods share the host's network. Their IP is the node's
//! ([`ProcessConfig::pod_ip`]), or, with [`PodNetwork::PodCidr`], one each
//! from the node's pod CIDR, which the node learns by following its Node
//! and which the local cloud's routes make this machine's
//! (`docs/providers/process.md`, "Pod addresses"). Security: the processes run as the node's
//! user and see the host; restrict who can schedule onto the node (its
//! `virtual-kubelet.io/provider=process:NoSchedule` taint).

mod cgroups;
mod config;
mod config_file;
mod exec;
mod group;
mod host_node;
mod leftovers;
mod limits;
mod logs;
mod naming;
mod network;
mod plan;
mod probe;
mod provider;
mod state;
mod stats;
mod status;
mod supervisor;
mod terminal;
mod volumes;

pub use config::ProcessConfig;
pub use config_file::ConfigFileError;
pub use host_node::{HostNode, LIMITS_ANNOTATION};
pub use leftovers::reap_leftovers;
pub use network::{CidrError, PodCidr, PodNetwork};
pub use plan::{CONTAINER_ROOT_ENV, MAX_ENVIRONMENT_BYTES};
pub use provider::ProcessProvider;

/// The provider name: nodes carry the taint
/// `virtual-kubelet.io/provider=process:NoSchedule`.
pub const PROVIDER_NAME: &str = "process";
