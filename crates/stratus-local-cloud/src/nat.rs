//! Kernel forwarding (`Forwarding::Kernel`): the load balancers' traffic
//! moved by the kernel instead of this process, as kube-proxy's iptables
//! mode does. Each listener is one nftables rule in a table of this
//! daemon's own, in a `nat` chain on the `output` hook (traffic this
//! machine sends, which is all of it on one machine): connections to the
//! load balancer's address and port are DNATed to one of its healthy
//! backends, in turn (`numgen inc`). Connection tracking keeps a connection
//! on its backend for its whole life, so a backend taken out drains.
//!
//! The listeners' sockets stay bound and served by the proxy: they hold the
//! port (a taken one is still `PortInUse`) and answer whatever reaches them
//! while a rule is not (yet) written, e.g. when no backend is healthy. The
//! rules are rewritten as one `nft -f` transaction after each change,
//! coalesced, by a task of their own; the table is deleted when the daemon
//! stops. Needs `CAP_NET_ADMIN` and the `nft` command (nftables).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use crate::api::Protocol;

/// A listener: the load balancer's address, protocol and port.
pub(crate) type ListenerKey = (IpAddr, Protocol, u16);

/// Why the kernel's rules could not be written.
#[derive(Debug, thiserror::Error)]
#[error("nft: {0}")]
pub struct NatError(String);

/// The daemon's nftables table and the rules it should hold.
#[derive(Debug, Clone)]
pub(crate) struct Nat(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    table: String,
    rules: Mutex<BTreeMap<ListenerKey, Vec<SocketAddr>>>,
    /// Bumped on each change; the writer applies the latest.
    changed: watch::Sender<u64>,
    /// The change last written (or failed), for tests and the stop.
    written: watch::Sender<u64>,
}

impl Nat {
    /// Create this daemon's table (empty) and start the task that writes
    /// its rules.
    pub(crate) async fn start() -> Result<Self, NatError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let table = format!(
            "{TABLE_PREFIX}{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        reap_stale().await;
        nft(&script(&table, &BTreeMap::new())).await?;
        let inner = Arc::new(Inner {
            table,
            rules: Mutex::default(),
            changed: watch::channel(0).0,
            written: watch::channel(0).0,
        });
        tokio::spawn(write_rules(
            Arc::downgrade(&inner),
            inner.changed.subscribe(),
        ));
        Ok(Self(inner))
    }

    /// Send the listener's new connections to `backends` in turn (none:
    /// leave them to the proxy).
    pub(crate) fn set(&self, key: ListenerKey, backends: Vec<SocketAddr>) {
        let mut rules = self.0.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = if backends.is_empty() {
            rules.remove(&key).is_some()
        } else {
            rules.insert(key, backends.clone()) != Some(backends)
        };
        drop(rules);
        if changed {
            self.0.changed.send_modify(|n| *n += 1);
        }
    }

    /// Wait until every change made so far is written (at most 5 s).
    pub(crate) async fn flushed(&self) {
        let want = *self.0.changed.borrow();
        let mut written = self.0.written.subscribe();
        if tokio::time::timeout(Duration::from_secs(5), written.wait_for(|n| *n >= want))
            .await
            .is_err()
        {
            tracing::warn!(table = %self.0.table, "the kernel's rules are not written after 5 s; answering anyway");
        }
    }

    /// Delete the table: the kernel forgets every rule.
    pub(crate) async fn stop(&self) {
        if let Err(e) = nft(&format!("delete table ip {}\n", self.0.table)).await {
            tracing::error!(error = %e, table = %self.0.table, "the nftables table cannot be deleted");
        }
    }
}

/// The start of every table's name; the rest is `<pid>_<n>`.
const TABLE_PREFIX: &str = "stratus_local_cloud_";

/// Delete the tables of daemons that are gone (killed before they could
/// delete theirs): their rules would send a reused address's connections to
/// backends of old.
async fn reap_stale() {
    let Ok(out) = tokio::process::Command::new("nft")
        .args(["list", "tables"])
        .output()
        .await
    else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.strip_prefix("table ip ") else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix(TABLE_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            tracing::info!(
                table = name,
                "deleting the nftables table of a daemon that is gone"
            );
            if let Err(e) = nft(&format!("delete table ip {name}\n")).await {
                tracing::warn!(error = %e, table = name, "cannot delete a stale table");
            }
        }
    }
}

/// Write the latest rules after each change until the `Nat` is dropped.
async fn write_rules(inner: std::sync::Weak<Inner>, mut changed: watch::Receiver<u64>) {
    while changed.changed().await.is_ok() {
        // Changes made together (a load balancer's listeners, a pass of
        // health checks) go in one transaction.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let Some(inner) = inner.upgrade() else { return };
        let version = *changed.borrow_and_update();
        let rules = inner
            .rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Err(e) = nft(&script(&inner.table, &rules)).await {
            tracing::error!(error = %e, "the load balancers' kernel rules cannot be written; the proxy serves");
        }
        inner.written.send_replace(version);
    }
}

/// The whole table: created if missing, its chain's rules replaced.
fn script(table: &str, rules: &BTreeMap<ListenerKey, Vec<SocketAddr>>) -> String {
    let mut text = format!(
        "table ip {table} {{\n  chain output {{\n    type nat hook output priority -100; policy accept;\n  }}\n}}\nflush chain ip {table} output\n"
    );
    for ((address, protocol, port), backends) in rules {
        let IpAddr::V4(address) = address else {
            continue;
        };
        let l4 = match protocol {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        };
        let v4: Vec<_> = backends
            .iter()
            .filter_map(|b| match b {
                SocketAddr::V4(b) => Some(*b),
                SocketAddr::V6(_) => None,
            })
            .collect();
        let target = match v4.as_slice() {
            [] => continue,
            [one] => format!("{}:{}", one.ip(), one.port()),
            many => {
                let mut map = format!("numgen inc mod {} map {{ ", many.len());
                for (i, b) in many.iter().enumerate() {
                    let sep = if i + 1 < many.len() { ", " } else { " }" };
                    let _ = write!(map, "{i} : {} . {}{sep}", b.ip(), b.port());
                }
                map
            }
        };
        let _ = writeln!(
            text,
            "add rule ip {table} output ip daddr {address} {l4} dport {port} dnat ip to {target}"
        );
    }
    text
}

/// Run `nft -f -` with `script` on its input.
async fn nft(script: &str) -> Result<(), NatError> {
    let mut child = tokio::process::Command::new("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| NatError(format!("cannot run nft (nftables): {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .await
            .map_err(|e| NatError(format!("writing to nft: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| NatError(format!("nft: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NatError(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_per_listener_with_its_backends_in_turn() {
        let lb: IpAddr = "127.78.0.4".parse().unwrap();
        let rules = BTreeMap::from([
            (
                (lb, Protocol::Tcp, 80),
                vec![
                    "198.19.7.2:8080".parse().unwrap(),
                    "198.19.8.2:8080".parse().unwrap(),
                ],
            ),
            (
                (lb, Protocol::Udp, 53),
                vec!["198.19.7.2:8081".parse().unwrap()],
            ),
        ]);
        let text = script("t", &rules);
        assert!(text.starts_with("table ip t {\n  chain output {\n    type nat hook output"));
        assert!(text.contains("flush chain ip t output\n"));
        assert!(text.contains(
            "add rule ip t output ip daddr 127.78.0.4 tcp dport 80 dnat ip to numgen inc mod 2 map { 0 : 198.19.7.2 . 8080, 1 : 198.19.8.2 . 8080 }\n"
        ));
        assert!(text.contains(
            "add rule ip t output ip daddr 127.78.0.4 udp dport 53 dnat ip to 198.19.7.2:8081\n"
        ));
    }
}
