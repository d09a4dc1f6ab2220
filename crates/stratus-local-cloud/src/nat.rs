//! Kernel forwarding (`Forwarding::Kernel`): the load balancers' traffic
//! moved by the kernel instead of this process, as kube-proxy's iptables
//! mode does. Each listener is one nftables rule in a table of this
//! daemon's own, in a `nat` chain on the `output` hook (traffic this
//! machine sends, which is all of it on one machine): connections to the
//! load balancer's address and port are DNATed to one of its healthy
//! backends, in turn (`numgen inc`). Connection tracking keeps a connection
//! on its backend for its whole life, so a backend taken out drains.
//!
//! Each listener's rule also marks its connections (`ct mark`, one mark per
//! listener for its whole life, `0x5a000000` and up). When a listener is
//! removed (its port, or its load balancer), its connections get the drain
//! time; then its mark joins the cut ones, and a filter chain of the same
//! table rejects every packet of a marked connection (a TCP reset, else a
//! drop), both ways, as the proxy closes its own connections at the drain
//! timeout. A cut mark stays for five days (the kernel's default life of an
//! established connection's tracking) or until the daemon stops.
//!
//! The filter chain always holds a rule that reads the connection tracking
//! (it counts the translated connections): the kernel tracks connections
//! only while some rule needs it, and without the tracking, connections
//! already translated lose their translation (each one reset) the moment
//! the last listener's rule goes.
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
use std::time::{Duration, Instant};

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
    rules: Mutex<Rules>,
    /// Bumped on each change; the writer applies the latest.
    changed: watch::Sender<u64>,
    /// The change last written (or failed), for tests and the stop.
    written: watch::Sender<u64>,
    /// Held while the table is written; true once it is deleted, after
    /// which nothing writes it again (a cut due after the stop would
    /// otherwise bring the table back).
    deleted: tokio::sync::Mutex<bool>,
}

/// What the table should hold.
#[derive(Debug, Clone, Default)]
struct Rules {
    /// The listeners with healthy backends, each with them.
    listeners: BTreeMap<ListenerKey, Vec<SocketAddr>>,
    /// Each listener's connection mark, from its first rule until it is
    /// removed.
    marks: BTreeMap<ListenerKey, u32>,
    /// The marks of removed listeners whose drain time is over, each until
    /// it expires: their connections are cut.
    cut: BTreeMap<u32, Instant>,
    /// The last mark given.
    last_mark: u32,
}

/// The marks' high byte, telling them from other programs' marks.
const MARK_BASE: u32 = 0x5a00_0000;

/// How long a removed listener's connections stay cut: the kernel's default
/// tracking of an established TCP connection
/// (`nf_conntrack_tcp_timeout_established`).
const CUT_FOR: Duration = Duration::from_secs(5 * 24 * 3600);

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
        nft(&script(&table, &Rules::default())).await?;
        let inner = Arc::new(Inner {
            table,
            rules: Mutex::default(),
            changed: watch::channel(0).0,
            written: watch::channel(0).0,
            deleted: tokio::sync::Mutex::new(false),
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
            rules.listeners.remove(&key).is_some()
        } else {
            if !rules.marks.contains_key(&key) {
                rules.last_mark = (rules.last_mark + 1) & 0x00ff_ffff;
                let mark = MARK_BASE | rules.last_mark;
                rules.marks.insert(key, mark);
            }
            rules.listeners.insert(key, backends.clone()) != Some(backends)
        };
        drop(rules);
        if changed {
            self.changed();
        }
    }

    /// The listener is gone: no new connection goes anywhere, and the ones
    /// the kernel carries are cut after `drain`.
    pub(crate) fn remove(&self, key: ListenerKey, drain: Duration) {
        let mut rules = self.0.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = rules.listeners.remove(&key).is_some();
        let mark = rules.marks.remove(&key);
        drop(rules);
        if changed {
            self.changed();
        }
        if let Some(mark) = mark {
            let inner = Arc::downgrade(&self.0);
            tokio::spawn(async move {
                tokio::time::sleep(drain).await;
                if let Some(inner) = inner.upgrade() {
                    inner
                        .rules
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .cut
                        .insert(mark, Instant::now() + CUT_FOR);
                    Self(inner).changed();
                }
            });
        }
    }

    fn changed(&self) {
        self.0.changed.send_modify(|n| *n += 1);
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
        let mut deleted = self.0.deleted.lock().await;
        *deleted = true;
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
        let rules = {
            let mut rules = inner.rules.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            rules.cut.retain(|_, until| *until > now);
            rules.clone()
        };
        let deleted = inner.deleted.lock().await;
        if *deleted {
            return;
        }
        if let Err(e) = nft(&script(&inner.table, &rules)).await {
            tracing::error!(error = %e, "the load balancers' kernel rules cannot be written; the proxy serves");
        }
        drop(deleted);
        inner.written.send_replace(version);
    }
}

/// The whole table: created if missing, its chains' rules replaced.
fn script(table: &str, rules: &Rules) -> String {
    let mut text = format!(
        "table ip {table} {{\n  chain output {{\n    type nat hook output priority -100; policy accept;\n  }}\n  chain cut {{\n    type filter hook output priority 0; policy accept;\n  }}\n}}\nflush chain ip {table} output\nflush chain ip {table} cut\nadd rule ip {table} cut ct status dnat counter\n"
    );
    if !rules.cut.is_empty() {
        let marks: Vec<String> = rules.cut.keys().map(|m| format!("{m:#010x}")).collect();
        let marks = marks.join(", ");
        let _ = writeln!(
            text,
            "add rule ip {table} cut ct mark {{ {marks} }} meta l4proto tcp reject with tcp reset"
        );
        let _ = writeln!(text, "add rule ip {table} cut ct mark {{ {marks} }} drop");
    }
    for (key, backends) in &rules.listeners {
        let (address, protocol, port) = key;
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
        let mark = rules.marks.get(key).copied().unwrap_or(MARK_BASE);
        let _ = writeln!(
            text,
            "add rule ip {table} output ip daddr {address} {l4} dport {port} ct mark set {mark:#010x} dnat ip to {target}"
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
        let listeners = BTreeMap::from([
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
        let rules = Rules {
            marks: BTreeMap::from([
                ((lb, Protocol::Tcp, 80), MARK_BASE | 1),
                ((lb, Protocol::Udp, 53), MARK_BASE | 2),
            ]),
            listeners,
            ..Rules::default()
        };
        let text = script("t", &rules);
        assert!(text.starts_with("table ip t {\n  chain output {\n    type nat hook output"));
        assert!(text.contains("chain cut {\n    type filter hook output priority 0;"));
        assert!(text.contains(
            "flush chain ip t output\nflush chain ip t cut\nadd rule ip t cut ct status dnat counter\n"
        ));
        assert!(text.contains(
            "add rule ip t output ip daddr 127.78.0.4 tcp dport 80 ct mark set 0x5a000001 dnat ip to numgen inc mod 2 map { 0 : 198.19.7.2 . 8080, 1 : 198.19.8.2 . 8080 }\n"
        ));
        assert!(text.contains(
            "add rule ip t output ip daddr 127.78.0.4 udp dport 53 ct mark set 0x5a000002 dnat ip to 198.19.7.2:8081\n"
        ));
        assert!(
            !text.contains("add rule ip t cut ct mark"),
            "nothing cut yet"
        );
    }

    #[test]
    fn the_connections_of_drained_listeners_are_cut_both_ways() {
        let later = Instant::now() + CUT_FOR;
        let rules = Rules {
            cut: BTreeMap::from([(MARK_BASE | 3, later), (MARK_BASE | 9, later)]),
            ..Rules::default()
        };
        let text = script("t", &rules);
        assert!(text.contains(
            "add rule ip t cut ct mark { 0x5a000003, 0x5a000009 } meta l4proto tcp reject with tcp reset\n"
        ));
        assert!(text.contains("add rule ip t cut ct mark { 0x5a000003, 0x5a000009 } drop\n"));
    }

    #[tokio::test]
    async fn a_listener_keeps_its_mark_while_it_has_no_healthy_backend() {
        let (changed, _) = watch::channel(0);
        let nat = Nat(Arc::new(Inner {
            table: "t".into(),
            rules: Mutex::default(),
            changed,
            written: watch::channel(0).0,
            deleted: tokio::sync::Mutex::new(false),
        }));
        let key = ("127.78.0.4".parse().unwrap(), Protocol::Tcp, 80);
        let other = ("127.78.0.5".parse().unwrap(), Protocol::Tcp, 80);
        let one = vec!["198.19.7.2:8080".parse().unwrap()];
        nat.set(key, one.clone());
        nat.set(other, one.clone());
        nat.set(key, Vec::new());
        nat.set(key, one.clone());
        let marks = nat.0.rules.lock().unwrap().marks.clone();
        assert_eq!(marks[&key], MARK_BASE | 1);
        assert_eq!(marks[&other], MARK_BASE | 2);
        nat.remove(key, Duration::ZERO);
        let deadline = Instant::now() + Duration::from_secs(5);
        while nat.0.rules.lock().unwrap().cut.is_empty() {
            assert!(Instant::now() < deadline, "never cut");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let rules = nat.0.rules.lock().unwrap().clone();
        assert_eq!(
            rules.cut.keys().copied().collect::<Vec<_>>(),
            [MARK_BASE | 1]
        );
        assert!(!rules.marks.contains_key(&key));
        assert!(!rules.listeners.contains_key(&key));
    }
}
