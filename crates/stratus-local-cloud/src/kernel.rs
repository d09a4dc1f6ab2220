//! Routes in this machine's kernel: a pod CIDR made this machine's own on
//! the loopback interface (`ip route replace local <cidr> dev lo`, Linux's
//! "AnyIP"), so that a pod's process may bind any address in it and
//! traffic to those addresses is delivered here. Without the route, binding
//! such an address fails (`EADDRNOTAVAIL`) and connections to it go to the
//! default route, so a node's pods are reachable exactly while its route
//! is programmed.
//!
//! The routes are written with the `ip` command of iproute2 and need
//! `CAP_NET_ADMIN`; only CIDRs inside the operator's pod network
//! (`Config::pod_network`) are ever written.

use crate::AddressRange;

/// Why a kernel route was not written or removed.
#[derive(Debug, thiserror::Error)]
#[error("ip route {verb} local {cidr} dev lo: {why}")]
pub(crate) struct RouteError {
    verb: &'static str,
    cidr: AddressRange,
    why: String,
}

/// Make every address of `cidr` this machine's own (again, if it was).
pub(crate) async fn add(cidr: AddressRange) -> Result<(), RouteError> {
    ip("replace", cidr).await
}

/// Remove what [`add`] wrote; a route already gone is not an error.
pub(crate) async fn remove(cidr: AddressRange) -> Result<(), RouteError> {
    match ip("del", cidr).await {
        Err(e) if e.why.contains("No such process") => Ok(()),
        other => other,
    }
}

async fn ip(verb: &'static str, cidr: AddressRange) -> Result<(), RouteError> {
    let failed = |why: String| RouteError { verb, cidr, why };
    let out = tokio::process::Command::new("ip")
        .args(["-4", "route", verb, "local"])
        .arg(cidr.to_string())
        .args(["dev", "lo", "table", "local"])
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| failed(format!("cannot run ip: {e}")))?;
    if out.status.success() {
        tracing::debug!(%cidr, verb, "kernel route");
        Ok(())
    } else {
        Err(failed(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ))
    }
}
