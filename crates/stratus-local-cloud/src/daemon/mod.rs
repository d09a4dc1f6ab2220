//! The daemon: started from its configuration (`config`), its state
//! restored from the state file (`state`), its HTTP API served
//! (`handlers`) until it is stopped.

mod config;
mod handlers;
mod state;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::sync::{Mutex, watch};

pub use config::{Config, Forwarding, StartError};
use handlers::serve;
use state::{Cloud, FaultState, Lb, Saved, State, balancer};

/// A running local cloud.
///
/// ```
/// use stratus_local_cloud::{Config, LocalCloud};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cloud = LocalCloud::start(Config::default()).await?;
/// println!("the cloud's API is at http://{}", cloud.addr());
/// cloud.stop().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LocalCloud {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LocalCloud {
    /// Load the state file (if any), bind every load balancer it has,
    /// program its routes (with a pod network), and serve the API.
    pub async fn start(mut config: Config) -> Result<Self, StartError> {
        if let Some(pods) = config.pod_network {
            config.allowed_backends.push(pods);
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| StartError::Listen {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
        let nat = match config.forwarding {
            Forwarding::Kernel => Some(crate::nat::Nat::start().await?),
            Forwarding::Proxy => None,
        };
        let state = restore(&config, nat.as_ref()).await?;
        let cloud = Arc::new(Cloud {
            nat,
            faults: std::sync::Mutex::new(FaultState::new(config.faults.clone())),
            config,
            state: Mutex::new(state),
            calls: std::sync::Mutex::default(),
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(serve(listener, cloud, stopped));
        tracing::info!(%addr, "local cloud serving");
        Ok(Self { addr, stop, task })
    }

    /// The API's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop serving, close every load balancer's listeners and remove the
    /// kernel's routes and forwarding rules (the state stays in the state
    /// file).
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn restore(config: &Config, nat: Option<&crate::nat::Nat>) -> Result<State, StartError> {
    let mut state = State::default();
    let Some(path) = &config.state_file else {
        return Ok(state);
    };
    let text = match tokio::fs::read(path).await {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(state),
        Err(e) => {
            return Err(StartError::StateFile {
                path: path.clone(),
                why: e.to_string(),
            });
        }
    };
    let saved: Saved = serde_json::from_slice(&text).map_err(|e| StartError::StateFile {
        path: path.clone(),
        why: e.to_string(),
    })?;
    state.instances = saved
        .instances
        .into_iter()
        .map(|i| (i.id.clone(), i))
        .collect();
    state.routes = saved
        .routes
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect();
    if config.pod_network.is_some() {
        for cidr in state.programmed() {
            if let Err(e) = crate::kernel::add(cidr).await {
                // Kept: the next PUT of the route writes it again.
                tracing::error!(error = %e, "a restored route cannot be programmed");
            }
        }
    }
    for record in saved.load_balancers {
        let address: IpAddr = record.address.parse().map_err(|_| StartError::StateFile {
            path: path.clone(),
            why: format!(
                "load balancer {}: bad address {:?}",
                record.name, record.address
            ),
        })?;
        let mut plane = balancer(address, config, nat);
        if let Err(e) = plane.apply(&record.spec).await {
            // Kept: the next PUT binds what is missing.
            tracing::error!(lb = %record.name, addr = %e.addr, error = %e.source,
                "a restored load balancer's port cannot be listened on");
        }
        state
            .load_balancers
            .insert(record.name.clone(), Lb { record, plane });
    }
    Ok(state)
}
