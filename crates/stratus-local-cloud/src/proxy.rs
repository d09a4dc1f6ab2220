//! The data plane: one load balancer's listeners, forwarding TCP connections
//! and UDP datagrams to its backends.
//!
//! Backends are picked round-robin among the healthy ones. Without a health
//! check in the load balancer's spec, a backend is healthy until a
//! connection to it fails; an unhealthy one is checked (a TCP connect) every
//! health interval and taken back when it answers. With an HTTP health check
//! ([`HealthCheck`]), every backend of every listener (TCP and UDP) is asked
//! each interval, and at once when backends are added or the check changes;
//! only a 2xx makes it healthy (a new backend is unhealthy until it answers
//! one), and a connection that succeeds proves nothing.
//! Changing the backends takes effect for the next connection; connections
//! already made keep their backend (draining). A listener stopped (its port
//! removed, its load balancer deleted) closes its socket at once and gives
//! its open connections the drain timeout to finish.
//!
//! With kernel forwarding ([`crate::nat`]) each listener also publishes its
//! healthy backends to its kernel rule, which then carries the connections;
//! every backend is checked each health interval (this process sees no
//! failed connection), and the sockets here hold the ports and serve what
//! no rule covers.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use stratus_accept::{Acceptor, ConnectionLimits};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;

use crate::AddressRange;
use crate::api::{Backend, HealthCheck, LoadBalancerSpec, Protocol};
use crate::nat::{ListenerKey, Nat};

/// How the data plane behaves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataPlane {
    /// How often unhealthy backends are checked.
    pub(crate) health_interval: Duration,
    /// How long a connection to a backend may take.
    pub(crate) connect_timeout: Duration,
    /// How long open connections of a stopped listener may go on.
    pub(crate) drain_timeout: Duration,
    /// How long a UDP client's session lives without a datagram.
    pub(crate) udp_idle: Duration,
}

/// A backend and whether it is believed to answer.
#[derive(Debug)]
struct Target {
    addr: SocketAddr,
    healthy: AtomicBool,
}

/// A listener's backends, swapped whole on a change.
#[derive(Debug, Default)]
struct Targets {
    list: RwLock<Arc<Vec<Arc<Target>>>>,
    next: AtomicUsize,
    /// The load balancer's HTTP health check, if it has one.
    check: RwLock<Option<HealthCheck>>,
    /// Wakes the health checker: backends were added or the check changed.
    changed: tokio::sync::Notify,
    /// One publication to the kernel's rules at a time, so that the last
    /// written is the latest state; true once the listener is removed
    /// (nothing is published after).
    publishing: Mutex<bool>,
}

impl Targets {
    /// Send the listener's new connections to its healthy backends in the
    /// kernel (with kernel forwarding).
    fn publish(&self, nat: &Option<(Nat, ListenerKey)>) {
        if let Some((nat, key)) = nat {
            let removed = self
                .publishing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *removed {
                return;
            }
            let healthy = self
                .current()
                .iter()
                .filter(|t| t.healthy.load(Ordering::Relaxed))
                .map(|t| t.addr)
                .collect();
            nat.set(*key, healthy);
        }
    }

    /// The listener is removed: take its rule out (its kernel-carried
    /// connections cut after `drain`); a health check still under way
    /// publishes nothing after this.
    fn unpublish(&self, nat: &Option<(Nat, ListenerKey)>, drain: Duration) {
        let mut removed = self
            .publishing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *removed = true;
        if let Some((nat, key)) = nat {
            nat.remove(*key, drain);
        }
    }

    fn current(&self) -> Arc<Vec<Arc<Target>>> {
        self.list
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The HTTP health check, if the load balancer has one.
    fn check(&self) -> Option<HealthCheck> {
        self.check
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether the load balancer has an HTTP health check (read without
    /// copying it: asked on every connection).
    fn has_check(&self) -> bool {
        self.check
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// Replace the backends and the health check, keeping what is known of
    /// the backends that stay. A new backend is healthy until a connection
    /// fails without an HTTP check, unhealthy until it answers one with it;
    /// the checker is woken when there is something new to ask.
    fn set(&self, backends: &[SocketAddr], check: Option<&HealthCheck>) {
        let check_changed = {
            let mut current = self
                .check
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let changed = current.as_ref() != check;
            *current = check.cloned();
            changed
        };
        let old = self.current();
        let mut added = false;
        let list = backends
            .iter()
            .map(|addr| {
                old.iter()
                    .find(|t| t.addr == *addr)
                    .cloned()
                    .unwrap_or_else(|| {
                        added = true;
                        Arc::new(Target {
                            addr: *addr,
                            healthy: AtomicBool::new(check.is_none()),
                        })
                    })
            })
            .collect();
        *self
            .list
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(list);
        if check_changed || (added && check.is_some()) {
            self.changed.notify_one();
        }
    }

    /// The backends to try, in order: the healthy ones from the next in
    /// turn, then the unhealthy ones (a stale verdict is better than no
    /// answer).
    fn order(&self) -> Vec<Arc<Target>> {
        let list = self.current();
        if list.is_empty() {
            return Vec::new();
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % list.len();
        let rotated = list.iter().cycle().skip(start).take(list.len());
        let (mut healthy, unhealthy): (Vec<_>, Vec<_>) = rotated
            .cloned()
            .partition(|t| t.healthy.load(Ordering::Relaxed));
        healthy.extend(unhealthy);
        healthy
    }
}

/// One bound port.
#[derive(Debug)]
struct Port {
    targets: Arc<Targets>,
    stop: watch::Sender<bool>,
    /// The listener's task: its socket is closed once the task is done.
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Port {
    /// Stop listening; done once the socket is closed. Open connections
    /// get the drain time.
    async fn close(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Why a listener cannot be programmed.
#[derive(Debug)]
pub(crate) struct BindError {
    pub(crate) addr: SocketAddr,
    pub(crate) protocol: Protocol,
    pub(crate) source: io::Error,
}

/// One load balancer's data plane.
#[derive(Debug)]
pub(crate) struct Balancer {
    address: IpAddr,
    ports: BTreeMap<(Protocol, u16), Port>,
    plane: DataPlane,
    allowed: Arc<[AddressRange]>,
    /// The kernel's rules, with kernel forwarding.
    nat: Option<Nat>,
}

impl Balancer {
    /// A load balancer on `address` with no port yet, connecting only to
    /// backends in `allowed`, its connections forwarded by the kernel's
    /// `nat` rules if given (else by this process).
    pub(crate) fn new(
        address: IpAddr,
        plane: DataPlane,
        allowed: Arc<[AddressRange]>,
        nat: Option<Nat>,
    ) -> Self {
        Self {
            address,
            ports: BTreeMap::new(),
            plane,
            allowed,
            nat,
        }
    }

    /// The kernel rule of the listener `key`, with kernel forwarding.
    fn rule(&self, key: (Protocol, u16)) -> Option<(Nat, ListenerKey)> {
        self.nat
            .clone()
            .map(|nat| (nat, (self.address, key.0, key.1)))
    }

    /// Make the listeners and the health check `spec`'s: ports bound (all
    /// new ones, or none of them), ports removed stopped, backends swapped.
    pub(crate) async fn apply(&mut self, spec: &LoadBalancerSpec) -> Result<(), BindError> {
        let listeners = &spec.listeners;
        // A listener that was there, or one removed, changes where
        // connections already routed by the kernel go: the call returns once
        // the kernel has the change. A new one is served by the proxy until
        // its rule is written.
        let mut changes_rules = listeners
            .iter()
            .any(|l| self.ports.contains_key(&(l.protocol, l.port)));
        let mut bound = Vec::new();
        for l in listeners {
            if self.ports.contains_key(&(l.protocol, l.port)) {
                continue;
            }
            let addr = SocketAddr::new(self.address, l.port);
            let socket = match l.protocol {
                Protocol::Tcp => TcpListener::bind(addr).await.map(Socket::Tcp),
                Protocol::Udp => UdpSocket::bind(addr).await.map(Socket::Udp),
            };
            match socket {
                Ok(socket) => bound.push(((l.protocol, l.port), socket)),
                Err(source) => {
                    return Err(BindError {
                        addr,
                        protocol: l.protocol,
                        source,
                    });
                }
            }
        }
        for (key, socket) in bound {
            let targets = Arc::new(Targets::default());
            let (stop, stopped) = watch::channel(false);
            let task = match socket {
                Socket::Tcp(listener) => tokio::spawn(serve_tcp(
                    listener,
                    targets.clone(),
                    stopped,
                    self.plane,
                    self.rule(key),
                )),
                Socket::Udp(socket) => {
                    tokio::spawn(serve_udp(socket, targets.clone(), stopped, self.plane))
                }
            };
            self.ports.insert(
                key,
                Port {
                    targets,
                    stop,
                    task: Some(task),
                },
            );
        }
        let removed: Vec<(Protocol, u16)> = self
            .ports
            .keys()
            .filter(|key| !listeners.iter().any(|l| (l.protocol, l.port) == **key))
            .copied()
            .collect();
        for key in removed {
            changes_rules = true;
            if let Some(port) = self.ports.remove(&key) {
                port.targets
                    .unpublish(&self.rule(key), self.plane.drain_timeout);
                port.close().await;
            }
        }
        for l in listeners {
            let key = (l.protocol, l.port);
            if let Some(port) = self.ports.get(&key) {
                port.targets.set(
                    &resolve(&l.backends, &self.allowed),
                    spec.health_check.as_ref(),
                );
                port.targets.publish(&self.rule(key));
            }
        }
        if let Some(nat) = &self.nat
            && changes_rules
        {
            nat.flushed().await;
        }
        Ok(())
    }
}

impl Balancer {
    /// Close every listener; done once no socket of this load balancer is
    /// open and (with kernel forwarding) no rule sends to its backends.
    pub(crate) async fn close(mut self) {
        let ports = std::mem::take(&mut self.ports);
        for (key, port) in ports {
            port.targets
                .unpublish(&self.rule(key), self.plane.drain_timeout);
            port.close().await;
        }
        if let Some(nat) = &self.nat {
            nat.flushed().await;
        }
    }
}

enum Socket {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

/// The backends' socket addresses, without the ones outside the allowed
/// ranges (kept in the load balancer's record, never connected to); ones
/// whose address does not parse were refused by the API before.
fn resolve(backends: &[Backend], allowed: &[AddressRange]) -> Vec<SocketAddr> {
    backends
        .iter()
        .filter_map(|b| {
            let ip: Ipv4Addr = b.address.parse().ok()?;
            if !allowed.iter().any(|r| r.contains(ip)) {
                tracing::debug!(backend = %b.address, "outside the allowed backend ranges: not connected to");
                return None;
            }
            Some(SocketAddr::new(IpAddr::V4(ip), b.port))
        })
        .collect()
}

/// The buffer of each direction of a TCP connection when it is not
/// spliced.
const COPY_BUFFER: usize = 256 * 1024;

/// Completes once the listener is stopped.
async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

async fn serve_tcp(
    listener: TcpListener,
    targets: Arc<Targets>,
    mut stopped: watch::Receiver<bool>,
    plane: DataPlane,
    rule: Option<(Nat, ListenerKey)>,
) {
    let acceptor = Acceptor::new(listener, ConnectionLimits::default());
    tokio::spawn(check_health(
        targets.clone(),
        stopped.clone(),
        plane,
        Protocol::Tcp,
        rule,
    ));
    loop {
        let connection = tokio::select! {
            c = acceptor.accept() => c,
            _ = until_stopped(&mut stopped) => return,
        };
        let (targets, stopped) = (targets.clone(), stopped.clone());
        tokio::spawn(async move {
            let _permit = connection.permit;
            forward_tcp(connection.stream, &targets, stopped, plane).await;
        });
    }
}

async fn forward_tcp(
    mut client: TcpStream,
    targets: &Targets,
    mut stopped: watch::Receiver<bool>,
    plane: DataPlane,
) {
    let _ = client.set_nodelay(true);
    let mut backend = None;
    for target in targets.order() {
        match tokio::time::timeout(plane.connect_timeout, TcpStream::connect(target.addr)).await {
            Ok(Ok(stream)) => {
                // With an HTTP check, only its answer makes a backend healthy
                // (a node's NodePort accepts even where it has no endpoint).
                if !targets.has_check() {
                    target.healthy.store(true, Ordering::Relaxed);
                }
                backend = Some(stream);
                break;
            }
            _ => {
                tracing::debug!(backend = %target.addr, "backend did not answer; marked unhealthy");
                target.healthy.store(false, Ordering::Relaxed);
            }
        }
    }
    let Some(mut backend) = backend else {
        return;
    };
    let _ = backend.set_nodelay(true);
    tokio::select! {
        _ = relay(&mut client, &mut backend) => {}
        _ = async {
            until_stopped(&mut stopped).await;
            tokio::time::sleep(plane.drain_timeout).await;
        } => {}
    }
}

/// Move bytes both ways until both sides have closed: on Linux through
/// kernel pipes (`splice(2)`: the bytes never enter this process), else (or
/// when no pipe can be made) through 256 KiB buffers.
async fn relay(client: &mut TcpStream, backend: &mut TcpStream) {
    #[cfg(target_os = "linux")]
    if let (Ok(up), Ok(down)) = (splice::Pipe::new(), splice::Pipe::new()) {
        // An error in one direction (a reset) ends both.
        let _ = tokio::try_join!(
            up.relay(&*client, &*backend),
            down.relay(&*backend, &*client)
        );
        return;
    }
    // tokio's default is 8 KiB a direction: far more reads and writes.
    let _ =
        tokio::io::copy_bidirectional_with_sizes(client, backend, COPY_BUFFER, COPY_BUFFER).await;
}

/// Zero-copy relaying with `splice(2)` through a pipe per direction.
#[cfg(target_os = "linux")]
mod splice {
    use std::io;
    use std::os::fd::OwnedFd;

    use rustix::pipe::{PipeFlags, SpliceFlags, splice};
    use tokio::io::Interest;
    use tokio::net::TcpStream;

    /// The pipe's capacity asked for, the most moved by one `splice`.
    const CHUNK: usize = 1024 * 1024;

    /// One direction's pipe.
    pub(super) struct Pipe {
        read: OwnedFd,
        write: OwnedFd,
        /// The pipe's capacity.
        chunk: usize,
    }

    impl Pipe {
        pub(super) fn new() -> io::Result<Self> {
            let (read, write) = rustix::pipe::pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
            // A larger pipe moves more a call; where the system refuses
            // (its pipe-size limit), the default 64 KiB serves.
            let chunk = rustix::pipe::fcntl_setpipe_size(&write, CHUNK).unwrap_or(64 * 1024);
            Ok(Self { read, write, chunk })
        }

        /// Move everything `from` sends to `to`; at `from`'s end of stream,
        /// shut `to`'s sending side (a half-close passes through).
        pub(super) async fn relay(self, from: &TcpStream, to: &TcpStream) -> io::Result<u64> {
            let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
            let mut total = 0u64;
            loop {
                let n = loop {
                    from.readable().await?;
                    match from.try_io(Interest::READABLE, || {
                        splice(from, None, &self.write, None, self.chunk, flags)
                            .map_err(io::Error::from)
                    }) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(e) => {
                            let _ = rustix::net::shutdown(to, rustix::net::Shutdown::Write);
                            return Err(e);
                        }
                    }
                };
                if n == 0 {
                    let _ = rustix::net::shutdown(to, rustix::net::Shutdown::Write);
                    return Ok(total);
                }
                let mut left = n;
                while left > 0 {
                    to.writable().await?;
                    match to.try_io(Interest::WRITABLE, || {
                        splice(&self.read, None, to, None, left, flags).map_err(io::Error::from)
                    }) {
                        Ok(m) => left -= m,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(e) => return Err(e),
                    }
                }
                total += n as u64;
            }
        }
    }
}

/// Check the listener's backends every health interval (and at once when
/// [`Targets::set`] wakes it) until stopped: with an HTTP health check, every
/// backend by its answer; without one, a TCP listener's unhealthy backends by
/// a connect, and with kernel forwarding (`rule`, where this process sees no
/// failed connection) every backend. The healthy ones go to the rule.
async fn check_health(
    targets: Arc<Targets>,
    mut stopped: watch::Receiver<bool>,
    plane: DataPlane,
    protocol: Protocol,
    rule: Option<(Nat, ListenerKey)>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(plane.health_interval) => {}
            _ = targets.changed.notified() => {}
            _ = until_stopped(&mut stopped) => return,
        }
        let check = targets.check();
        let asked: Vec<Arc<Target>> = targets
            .current()
            .iter()
            .filter(|t| {
                check.is_some()
                    || (protocol == Protocol::Tcp
                        && (rule.is_some() || !t.healthy.load(Ordering::Relaxed)))
            })
            .cloned()
            .collect();
        // Every backend asked at once: a slow one does not delay the others.
        let mut answers = tokio::task::JoinSet::new();
        for target in asked {
            let check = check.clone();
            let timeout = plane.connect_timeout;
            answers.spawn(async move {
                let answered = match &check {
                    Some(check) => http_healthy(target.addr.ip(), check, timeout).await,
                    None => tokio::time::timeout(timeout, TcpStream::connect(target.addr))
                        .await
                        .is_ok_and(|r| r.is_ok()),
                };
                (target, answered)
            });
        }
        let mut flipped = false;
        while let Some(Ok((target, answered))) = answers.join_next().await {
            if target.healthy.swap(answered, Ordering::Relaxed) != answered {
                tracing::debug!(backend = %target.addr, answered, "backend health changed");
                flipped = true;
            }
        }
        if flipped {
            targets.publish(&rule);
        }
    }
}

/// Whether `GET {path}` on `ip:{port}` answers 2xx within `timeout` (to
/// connect and to answer).
async fn http_healthy(ip: IpAddr, check: &HealthCheck, timeout: Duration) -> bool {
    let ask = async {
        let stream = TcpStream::connect((ip, check.port)).await.ok()?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .ok()?;
        tokio::spawn(connection);
        let request = hyper::Request::get(check.path.as_str())
            .header(hyper::header::HOST, format!("{ip}:{}", check.port))
            .header(hyper::header::USER_AGENT, "stratus-local-cloud")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .ok()?;
        let response = sender.send_request(request).await.ok()?;
        Some(response.status().is_success())
    };
    matches!(tokio::time::timeout(timeout, ask).await, Ok(Some(true)))
}

/// A UDP client's session: a socket connected to its backend.
type Sessions = Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>>;

async fn serve_udp(
    socket: UdpSocket,
    targets: Arc<Targets>,
    mut stopped: watch::Receiver<bool>,
    plane: DataPlane,
) {
    tokio::spawn(check_health(
        targets.clone(),
        stopped.clone(),
        plane,
        Protocol::Udp,
        None,
    ));
    let socket = Arc::new(socket);
    let sessions: Sessions = Arc::default();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (len, client) = tokio::select! {
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(error = %e, "udp receive failed");
                    continue;
                }
            },
            _ = until_stopped(&mut stopped) => return,
        };
        let existing = sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&client)
            .cloned();
        let session = match existing {
            Some(session) => session,
            None => {
                let Some(session) = open_udp_session(&targets).await else {
                    continue;
                };
                let session = Arc::new(session);
                sessions
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(client, session.clone());
                tokio::spawn(answer_udp(
                    socket.clone(),
                    session.clone(),
                    client,
                    sessions.clone(),
                    stopped.clone(),
                    plane,
                ));
                session
            }
        };
        let _ = session.send(&buf[..len]).await;
    }
}

async fn open_udp_session(targets: &Targets) -> Option<UdpSocket> {
    let target = targets.order().into_iter().next()?;
    let local: SocketAddr = if target.addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let session = UdpSocket::bind(local).await.ok()?;
    session.connect(target.addr).await.ok()?;
    Some(session)
}

/// Send the backend's answers back to the client until the session idles
/// out or the listener stops.
async fn answer_udp(
    listener: Arc<UdpSocket>,
    session: Arc<UdpSocket>,
    client: SocketAddr,
    sessions: Sessions,
    mut stopped: watch::Receiver<bool>,
    plane: DataPlane,
) {
    let mut buf = vec![0u8; 65_536];
    loop {
        tokio::select! {
            r = tokio::time::timeout(plane.udp_idle, session.recv(&mut buf)) => match r {
                Ok(Ok(len)) => {
                    let _ = listener.send_to(&buf[..len], client).await;
                }
                // Idle, or the backend refused (ICMP): the next datagram
                // opens a new session.
                _ => break,
            },
            _ = until_stopped(&mut stopped) => break,
        }
    }
    sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&client);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn healthy_backends_come_first_in_turn() {
        let targets = Targets::default();
        targets.set(&[addr(1), addr(2), addr(3)], None);
        let firsts: Vec<_> = (0..3).map(|_| targets.order()[0].addr).collect();
        assert_eq!(firsts, [addr(1), addr(2), addr(3)]);
        targets.current()[1].healthy.store(false, Ordering::Relaxed);
        let order: Vec<_> = targets.order().iter().map(|t| t.addr).collect();
        assert_eq!(order, [addr(1), addr(3), addr(2)]);
    }

    #[test]
    fn a_change_keeps_what_is_known_of_the_backends_that_stay() {
        let targets = Targets::default();
        targets.set(&[addr(1), addr(2)], None);
        targets.current()[0].healthy.store(false, Ordering::Relaxed);
        targets.set(&[addr(1), addr(4)], None);
        let list = targets.current();
        assert!(!list[0].healthy.load(Ordering::Relaxed));
        assert!(list[1].healthy.load(Ordering::Relaxed));
        targets.set(&[], None);
        assert!(targets.order().is_empty());
    }

    #[tokio::test]
    async fn with_an_http_check_a_new_backend_waits_for_its_answer() {
        let targets = Targets::default();
        let check = HealthCheck {
            port: 1,
            path: "/healthz".into(),
        };
        targets.set(&[addr(1)], None);
        targets.set(&[addr(1), addr(2)], Some(&check));
        let list = targets.current();
        assert!(list[0].healthy.load(Ordering::Relaxed), "known: kept");
        assert!(!list[1].healthy.load(Ordering::Relaxed), "new: not yet");
        // The check changed: the checker is woken at once.
        tokio::time::timeout(Duration::from_secs(1), targets.changed.notified())
            .await
            .expect("woken");
    }

    #[tokio::test]
    async fn an_http_check_needs_a_2xx_answer() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = server.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((mut c, _)) = server.accept().await else {
                    return;
                };
                let mut buf = [0u8; 1024];
                let n = c.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let status = if head.starts_with("GET /ok ") {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = c
                    .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let t = Duration::from_secs(1);
        let ask = |path: &str| HealthCheck {
            port,
            path: path.into(),
        };
        assert!(http_healthy(ip, &ask("/ok"), t).await);
        assert!(!http_healthy(ip, &ask("/healthz"), t).await);
        // Nothing listening: unhealthy, within the timeout.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed_port = closed.local_addr().unwrap().port();
        drop(closed);
        let nothing = HealthCheck {
            port: closed_port,
            path: "/".into(),
        };
        assert!(!http_healthy(ip, &nothing, t).await);
    }
}
