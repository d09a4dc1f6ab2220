//! The cloud's state: its load balancers and routes, the fault bucket,
//! and what the state file keeps.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::AddressRange;
use crate::api::{Faults, Instance, LoadBalancer, Route};
use crate::proxy::{Balancer, DataPlane};

use super::config::Config;

/// What the state file holds.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Saved {
    pub(super) instances: Vec<Instance>,
    pub(super) load_balancers: Vec<LoadBalancer>,
    pub(super) routes: Vec<Route>,
}

/// A load balancer: what it is and its data plane.
#[derive(Debug)]
pub(super) struct Lb {
    pub(super) record: LoadBalancer,
    pub(super) plane: Balancer,
}

/// Everything the cloud has.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) instances: BTreeMap<String, Instance>,
    pub(super) load_balancers: BTreeMap<String, Lb>,
    pub(super) routes: BTreeMap<String, Route>,
}

impl State {
    /// The CIDRs of the routes, each once: what the kernel has with a pod
    /// network.
    pub(super) fn programmed(&self) -> Vec<AddressRange> {
        let mut cidrs: Vec<AddressRange> = self
            .routes
            .values()
            .filter_map(|r| r.destination_cidr.parse().ok())
            .collect();
        cidrs.sort_by_key(|c| c.to_string());
        cidrs.dedup();
        cidrs
    }
}

/// The fault state: the configuration and the token bucket.
#[derive(Debug)]
pub(super) struct FaultState {
    pub(super) faults: Faults,
    pub(super) tokens: f64,
    pub(super) refilled: Instant,
}

impl FaultState {
    pub(super) fn new(faults: Faults) -> Self {
        Self {
            tokens: f64::from(burst(&faults)),
            faults,
            refilled: Instant::now(),
        }
    }

    /// Take a token; the wait until one is there if none is.
    pub(super) fn take(&mut self) -> Result<(), Duration> {
        let rate = f64::from(self.faults.calls_per_second);
        if rate == 0.0 {
            return Ok(());
        }
        let now = Instant::now();
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = (self.tokens + elapsed * rate).min(f64::from(burst(&self.faults)));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
        }
    }
}

pub(super) fn burst(faults: &Faults) -> u32 {
    if faults.burst == 0 {
        faults.calls_per_second
    } else {
        faults.burst
    }
}

pub(super) struct Cloud {
    pub(super) config: Config,
    /// The kernel's rules, with kernel forwarding.
    pub(super) nat: Option<crate::nat::Nat>,
    pub(super) state: Mutex<State>,
    pub(super) faults: std::sync::Mutex<FaultState>,
    /// API calls answered (faults included), by `METHOD /v1/kind[/{name}]`.
    pub(super) calls: std::sync::Mutex<BTreeMap<String, u64>>,
}

/// A load balancer's data plane on `address`, as `config` says.
pub(super) fn balancer(
    address: IpAddr,
    config: &Config,
    nat: Option<&crate::nat::Nat>,
) -> Balancer {
    let plane = DataPlane {
        health_interval: config.health_interval,
        connect_timeout: config.connect_timeout,
        drain_timeout: config.drain_timeout,
        udp_idle: config.udp_idle,
    };
    Balancer::new(
        address,
        plane,
        Arc::from(config.allowed_backends.as_slice()),
        nat.cloned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_refuses_beyond_its_burst_and_says_how_long_to_wait() {
        let mut f = FaultState::new(Faults {
            calls_per_second: 10,
            burst: 2,
            ..Faults::default()
        });
        assert!(f.take().is_ok());
        assert!(f.take().is_ok());
        let wait = f.take().unwrap_err();
        assert!(
            wait <= Duration::from_millis(100) && wait > Duration::ZERO,
            "{wait:?}"
        );
        let mut unlimited = FaultState::new(Faults::default());
        assert!((0..1000).all(|_| unlimited.take().is_ok()));
    }
}
