//! How the daemon is set up, and why it may not start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::AddressRange;
use crate::api::Faults;

/// How the daemon is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where its API listens (`127.0.0.1:0` picks a port).
    pub listen: SocketAddr,
    /// The range load-balancer addresses come from.
    pub address_range: AddressRange,
    /// The addresses the cloud connects to: a backend elsewhere stays in
    /// its load balancer's record but gets no connection and no health
    /// check, so that the cloud sends traffic only where its operator
    /// allows. IPv4 only.
    pub allowed_backends: Vec<AddressRange>,
    /// The range pod CIDRs are routed in. When set, every route (whose
    /// CIDR must lie in it) is programmed into this machine's kernel as a
    /// local route on the loopback interface, so its addresses are this
    /// machine's own and pods may bind them; the route is removed when it
    /// is deleted or the daemon stops, and written again from the state
    /// file when it starts. Backends in it are allowed. Needs
    /// `CAP_NET_ADMIN` and iproute2's `ip`. `None` (the default): routes
    /// are only recorded.
    pub pod_network: Option<AddressRange>,
    /// Where the state is kept across restarts; `None` keeps it in memory.
    pub state_file: Option<PathBuf>,
    /// Faults injected from the start.
    pub faults: Faults,
    /// How often an unhealthy backend is checked again.
    pub health_interval: Duration,
    /// How long a connection to a backend may take.
    pub connect_timeout: Duration,
    /// How long open connections of a removed listener may go on.
    pub drain_timeout: Duration,
    /// How long a UDP client's session lives without a datagram.
    pub udp_idle: Duration,
    /// Who moves the load balancers' traffic: this process (the default)
    /// or the kernel.
    pub forwarding: Forwarding,
}

/// Who moves a load balancer's traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Forwarding {
    /// This process: it accepts each connection (each UDP client) and
    /// relays it to a backend (`splice(2)` for TCP on Linux), trying the
    /// next backend when one does not answer.
    #[default]
    Proxy,
    /// The kernel: an nftables DNAT rule per listener sends new
    /// connections to the healthy backends in turn (every backend is
    /// health-checked each interval); the proxy still holds the ports and
    /// serves what no rule covers. Needs `CAP_NET_ADMIN` and `nft`.
    Kernel,
}

impl Default for Config {
    /// `127.0.0.1:0`, addresses from `127.77.0.0/16`, backends in
    /// `127.0.0.0/8` (this machine's loopback) only, routes recorded but
    /// not programmed, no state file, no faults, health checks every
    /// second, 1 s to connect, 10 s of draining, UDP sessions idle out
    /// after 30 s, traffic relayed by this process.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            address_range: "127.77.0.0/16"
                .parse()
                .unwrap_or_else(|_| unreachable!("a valid range")),
            allowed_backends: vec![
                "127.0.0.0/8"
                    .parse()
                    .unwrap_or_else(|_| unreachable!("a valid range")),
            ],
            pod_network: None,
            state_file: None,
            faults: Faults::default(),
            health_interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(10),
            udp_idle: Duration::from_secs(30),
            forwarding: Forwarding::Proxy,
        }
    }
}

/// Why the daemon did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The API's address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Kernel forwarding was asked for and its rules cannot be written.
    #[error("kernel forwarding: {0}")]
    Forwarding(#[from] crate::nat::NatError),
    /// The state file cannot be read or does not parse.
    #[error("state file {path}: {why}")]
    StateFile {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}
