//! What the tests of this crate share: backends and a client.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP server on `ip:port` that writes `name` to each connection and
/// closes it; stops when the returned handle is aborted.
pub(crate) async fn named_server(
    ip: &str,
    port: u16,
    name: &'static str,
) -> tokio::task::JoinHandle<()> {
    let listener = TcpListener::bind((ip, port)).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.write_all(name.as_bytes()).await;
        }
    })
}

/// Connect and read until the server closes.
pub(crate) async fn fetch(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr).await?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).await?;
    Ok(answer)
}
