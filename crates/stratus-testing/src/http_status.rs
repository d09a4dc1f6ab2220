//! Test helpers for HTTP endpoints: a request through a `kube::Client` to
//! an HTTPS endpoint served next to the API server (admin servers,
//! webhooks), answered as its status code and body, whatever the code; and
//! [`page`], one plain HTTP/1.0 `GET /` to an address (a load balancer, a
//! pod's server).

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

/// `GET /` over plain HTTP/1.0 to `addr` with `Host: host`, the server
/// closing the connection after its answer: the body of a 200, or why
/// there is none (the answer, an IO error, no answer within 5 s).
///
/// ```no_run
/// # async fn run() {
/// let addr = "127.0.0.1:8080".parse().unwrap();
/// let body = stratus_testing::http_status::page(addr, "web").await.unwrap();
/// assert!(body.contains("hello"));
/// # }
/// ```
pub async fn page(addr: std::net::SocketAddr, host: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET / HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
            .await?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(std::time::Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
        .map_err(|e| e.to_string())?;
    match answer.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.0 200") => Ok(body.to_owned()),
        _ => Err(format!("answer {answer:?}")),
    }
}
