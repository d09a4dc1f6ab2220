//! Test helpers for HTTPS endpoints served next to the API server (admin
//! servers, webhooks): a request through a `kube::Client` answered as its
//! status code and body, whatever the code.

/// Send `request`: `(200, body)` on success, `(code, message)` for an
/// error status. Panics if the request cannot be made at all (a test
/// helper: the endpoint is expected to answer).
///
/// ```no_run
/// # async fn run(client: kube::Client) {
/// let request = http::Request::get("/healthz").body(Vec::new()).unwrap();
/// let (code, body) = stratus_testing::http_status::send(&client, request).await;
/// assert_eq!((code, body.as_str()), (200, "ok"));
/// # }
/// ```
pub async fn send(client: &kube::Client, request: http::Request<Vec<u8>>) -> (u16, String) {
    let what = format!("{} {}", request.method(), request.uri());
    match client.request_text(request).await {
        Ok(body) => (200, body),
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// GET `path` (see [`send`]).
pub async fn get(client: &kube::Client, path: &str) -> (u16, String) {
    let request = http::Request::get(path)
        .body(Vec::new())
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    send(client, request).await
}

/// A client of the HTTPS endpoint at `addr` that accepts any server
/// certificate (self-signed admin and webhook servers in tests). Call it
/// within a Tokio runtime, as any `kube::Client` is made.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let client = stratus_testing::http_status::insecure_client("127.0.0.1:10258".parse().unwrap());
/// # let _ = client;
/// # });
/// ```
pub fn insecure_client(addr: std::net::SocketAddr) -> kube::Client {
    let mut config = kube::Config::new(
        format!("https://{addr}")
            .parse()
            .unwrap_or_else(|e| panic!("https://{addr}: {e}")),
    );
    config.accept_invalid_certs = true;
    kube::Client::try_from(config).unwrap_or_else(|e| panic!("a client of {addr}: {e}"))
}
