//! Hostile clients against the harness API server: hundreds of connections
//! held silent, with a partial TLS ClientHello, a finished handshake then a
//! partial header, or idle after one request are all closed after the
//! server's timeouts, while `/healthz` keeps answering; at the connection
//! limit, further clients wait until a place frees, then are answered.
//! (`stratus-runtime`'s `serving_options` tests do the same against the
//! listener of the manager's admin port and the kubelet API.)

use std::time::Duration;

use stratus_testing::hostile::{Hostile, hold_with};
use stratus_testing::{ApiServer, ConnectionLimits, poll};

fn limits(max_connections: usize) -> ConnectionLimits {
    ConnectionLimits {
        max_connections,
        handshake_timeout: Duration::from_secs(1),
        first_request_timeout: Duration::from_secs(1),
        header_read_timeout: Duration::from_secs(1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_connections_are_closed_after_the_timeouts_and_healthz_answers_meanwhile() {
    let api = ApiServer::builder()
        .tls()
        .connections(limits(2_000))
        .start()
        .await
        .unwrap();
    let addr = api.addr();
    let mut held = Vec::new();
    for (kind, tls) in [
        (Hostile::Silent, false),
        (Hostile::PartialClientHello, false),
        (Hostile::HandshakeThenPartialHeader, true),
        (Hostile::IdleAfterRequest, true),
    ] {
        let group = hold_with(addr, kind, 75, tls).await;
        assert_eq!(group.refused, 0, "{kind:?} connections were refused");
        // Answered meanwhile, on a connection of its own.
        let answered = hold_with(addr, Hostile::IdleAfterRequest, 1, true).await;
        assert_eq!(
            answered.refused, 0,
            "/healthz went unanswered while {kind:?} connections were held"
        );
        held.push((kind, group));
    }
    let held = std::sync::Arc::new(tokio::sync::Mutex::new(held));
    let client = api.client();
    let healthz = http::Request::get("/healthz").body(Vec::new()).unwrap();
    assert_eq!(client.request_text(healthz).await.unwrap(), "ok");
    poll(
        "every held connection closed by the server",
        Duration::from_secs(15),
    )
    .every(Duration::from_millis(250))
    .until(|| {
        let held = held.clone();
        async move {
            let mut open = Vec::new();
            for (kind, group) in held.lock().await.iter_mut() {
                let n = group.still_open().await;
                if n > 0 {
                    open.push(format!("{n} {kind:?}"));
                }
            }
            (!open.is_empty()).then(|| format!("still open: {}", open.join(", ")))
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_limit_a_client_waits_for_a_free_place() {
    let api = ApiServer::builder()
        .connections(limits(20))
        .start()
        .await
        .unwrap();
    let mut silent = hold_with(api.addr(), Hostile::Silent, 20, false).await;
    assert_eq!(silent.refused, 0);
    // The 21st is not served while the 20 hold every place; it is once
    // the first of them is closed (after a second).
    let answered = hold_with(api.addr(), Hostile::IdleAfterRequest, 1, false).await;
    assert_eq!(answered.refused, 0, "the waiting client was never answered");
    assert!(
        silent.still_open().await < 20,
        "the 21st client was answered while 20 connections held every place"
    );
}
