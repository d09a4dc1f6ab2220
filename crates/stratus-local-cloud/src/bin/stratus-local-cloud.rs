//! `stratus-local-cloud`: the local cloud's daemon.
//!
//! ```text
//! stratus-local-cloud --listen 127.0.0.1:7080 --address-range 127.77.0.0/16 \
//!     --state-file /var/lib/stratus-local-cloud/state.json \
//!     --pod-network 198.19.0.0/16
//! ```
//!
//! It prints the API's address on its first line (`listening on ADDR`), so
//! that a caller that asked for port 0 can read it, and stops on SIGINT or
//! SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use stratus_local_cloud::api::Faults;
use stratus_local_cloud::{AddressRange, Config, Forwarding, LocalCloud};

/// A cloud on one machine: instances, routes and load balancers that carry
/// TCP and UDP traffic, behind an HTTP API.
#[derive(Debug, Parser)]
#[command(name = "stratus-local-cloud", version)]
struct Args {
    /// Where the API listens.
    #[arg(long, default_value = "127.0.0.1:7080")]
    listen: std::net::SocketAddr,
    /// The IPv4 range load-balancer addresses come from (addresses of this
    /// machine: any of 127.0.0.0/8 on Linux).
    #[arg(long, default_value = "127.77.0.0/16")]
    address_range: AddressRange,
    /// The ranges the cloud connects to (comma-separated): a backend
    /// elsewhere stays in its load balancer but gets no connection.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.0/8")]
    allowed_backends: Vec<AddressRange>,
    /// The IPv4 range pod CIDRs are routed in: each route (inside it) is
    /// programmed into this machine's kernel as a local route on `lo`
    /// (needs CAP_NET_ADMIN), removed when deleted or at exit. Without it
    /// routes are only recorded.
    #[arg(long)]
    pod_network: Option<AddressRange>,
    /// Where the cloud keeps its state across restarts (load balancers are
    /// listening again after a restart).
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Milliseconds added to every API call.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// API calls a second allowed (0 = unlimited); beyond it calls answer 429.
    #[arg(long, default_value_t = 0)]
    calls_per_second: u32,
    /// Who moves the load balancers' traffic: `proxy` (this process) or
    /// `kernel` (nftables DNAT rules; needs CAP_NET_ADMIN and nft).
    #[arg(long, default_value = "proxy", value_parser = ["proxy", "kernel"])]
    forwarding: String,
    /// Seconds open connections of a removed listener may go on.
    #[arg(long, default_value_t = 10)]
    drain_seconds: u64,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = Config {
        listen: args.listen,
        address_range: args.address_range,
        allowed_backends: args.allowed_backends,
        pod_network: args.pod_network,
        state_file: args.state_file,
        faults: Faults {
            latency_ms: args.latency_ms,
            calls_per_second: args.calls_per_second,
            ..Faults::default()
        },
        drain_timeout: Duration::from_secs(args.drain_seconds),
        forwarding: if args.forwarding == "kernel" {
            Forwarding::Kernel
        } else {
            Forwarding::Proxy
        },
        ..Config::default()
    };
    let cloud = match LocalCloud::start(config).await {
        Ok(cloud) => cloud,
        Err(e) => {
            eprintln!("stratus-local-cloud: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("listening on {}", cloud.addr());
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            eprintln!("stratus-local-cloud: cannot wait for SIGTERM: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    cloud.stop().await;
    std::process::ExitCode::SUCCESS
}
