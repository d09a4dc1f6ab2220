//! A process out of file descriptors (EMFILE) does not spin accepting:
//! the accept loop backs off, and serves again once descriptors are free.
//! Alone in its test binary, as it lowers the process's descriptor limit.

use std::time::Duration;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use rustix::time::{ClockId, clock_gettime};
use stratus_accept::{Acceptor, ConnectionLimits, http_builder, serve_connection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// CPU time this process used so far.
fn cpu() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec.unsigned_abs(), t.tv_nsec.unsigned_abs() as u32)
}

/// Whether a request on a fresh connection is answered.
async fn answered(addr: std::net::SocketAddr) -> bool {
    let Ok(mut client) = TcpStream::connect(addr).await else {
        return false;
    };
    let request = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if client.write_all(request).await.is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut answer)).await;
    matches!(read, Ok(Ok(_))) && answer.starts_with(b"HTTP/1.1 200")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_accept_loop_backs_off_and_recovers() {
    let before = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(256),
            maximum: before.maximum,
        },
    )
    .unwrap();
    // A limit above what the process may open: accepting runs into EMFILE.
    let limits = ConnectionLimits {
        max_connections: 10_000,
        first_request_timeout: Duration::from_secs(1),
        ..ConnectionLimits::default()
    };
    let acceptor = Acceptor::new(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        limits.clone(),
    );
    let addr = acceptor.local_addr().unwrap();
    let builder = http_builder(&limits);
    tokio::spawn(async move {
        loop {
            let connection = acceptor.accept().await;
            let (builder, limits) = (builder.clone(), limits.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(String::from("ok")))
                });
                let io = hyper_util::rt::TokioIo::new(connection.stream);
                let _ = serve_connection(&builder, io, service, &limits).await;
            });
        }
    });
    assert!(answered(addr).await);

    // Clients take descriptors until none are left; the kernel queues
    // their connections, the server's accepts fail with EMFILE.
    let mut clients = Vec::new();
    while clients.len() < 400 {
        match TcpStream::connect(addr).await {
            Ok(c) => clients.push(c),
            Err(_) => break,
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out_of_descriptors = std::fs::read_dir("/proc/self/fd")
        .err()
        .and_then(|e| e.raw_os_error())
        == Some(rustix::io::Errno::MFILE.raw_os_error());
    assert!(
        out_of_descriptors,
        "the process still had descriptors with {} clients",
        clients.len()
    );
    // A second at EMFILE: a spinning loop would burn about a second of CPU.
    let (wall, used) = (std::time::Instant::now(), cpu());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let burnt = cpu() - used;
    println!(
        "out of descriptors with {} clients queued: {burnt:?} of CPU in {:?}",
        clients.len(),
        wall.elapsed()
    );
    assert!(
        burnt < wall.elapsed() / 5,
        "{burnt:?} of CPU in {:?} while out of descriptors",
        wall.elapsed()
    );

    // Descriptors free again: served again (the queued connections are
    // accepted and, sending nothing, closed after a second).
    drop(clients);
    let mut served = false;
    for _ in 0..50 {
        if answered(addr).await {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "not served after the descriptors were freed");
    setrlimit(Resource::Nofile, before).unwrap();
}
