//! Hostile clients against the harness API server: hundreds of connections
//! held silent, with a partial TLS ClientHello, a finished handshake then a
//! partial header, or idle after one request are all closed after the
//! server's timeouts, while `/healthz` keeps answering; at the connection
//! limit, further clients wait until a place frees, then are answered.
//! (`stratus-runtime`'s `serving_options` tests do the same against the
//! listener of the manager's admin port and the kubelet API.)

use std::time::Duration;

use stratus_testing::hostile::{besiege_tls, limit_holds};
use stratus_testing::{ApiServer, ConnectionLimits};

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
    besiege_tls(api.addr(), 75, Duration::from_secs(15))
        .await
        .unwrap();
    let healthz = http::Request::get("/healthz").body(Vec::new()).unwrap();
    assert_eq!(api.client().request_text(healthz).await.unwrap(), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_limit_a_client_waits_for_a_free_place() {
    let api = ApiServer::builder()
        .connections(limits(20))
        .start()
        .await
        .unwrap();
    limit_holds(api.addr(), 20, false).await.unwrap();
}
