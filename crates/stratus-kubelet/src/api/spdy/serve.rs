//! Exec, attach and port-forward over SPDY/3.1, as kube-apiserver speaks
//! them to kubelets: the client opens one stream per channel (header
//! `streamType`), or per forwarded connection a `data` and an `error`
//! stream sharing a `requestID`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use stratus_pod::{
    AttachIo, ByteStream, PodError, PodLifecycleHandler, PortForwardStream, ResizeStream, TermSize,
};
use tokio::io::{AsyncRead, AsyncWrite};

use super::StreamSink;
use crate::api::params::StreamOptions;
use crate::api::remote_command::{Outcome, report};
use crate::api::session::ResizeMessage;
use stratus_httpstream::spdy::{Session, Stream, StreamWriter, header};
use stratus_httpstream::wsstream::ChannelProtocol;

/// The channel protocol whose error reporting a SPDY version uses.
fn reporting(version: Option<&str>) -> ChannelProtocol {
    match version {
        Some("v5.channel.k8s.io") => ChannelProtocol::V5,
        Some("v4.channel.k8s.io") => ChannelProtocol::V4,
        _ => ChannelProtocol::V1,
    }
}

/// Turn a stream of concatenated JSON sizes into resizes.
fn resizes(input: ByteStream) -> ResizeStream {
    let state = (
        input,
        Vec::<u8>::new(),
        std::collections::VecDeque::<TermSize>::new(),
    );
    Box::pin(futures_util::stream::unfold(
        state,
        |(mut input, mut buf, mut ready)| async move {
            loop {
                if let Some(size) = ready.pop_front() {
                    return Some((size, (input, buf, ready)));
                }
                let chunk = input.next().await?.ok()?;
                buf.extend_from_slice(&chunk);
                let mut values =
                    serde_json::Deserializer::from_slice(&buf).into_iter::<serde_json::Value>();
                let mut used = 0;
                loop {
                    match values.next() {
                        Some(Ok(v)) => {
                            used = values.byte_offset();
                            // Valid JSON that is not a size is skipped.
                            if let Ok(size) =
                                serde_json::from_value::<ResizeMessage>(v).map(TermSize::from)
                            {
                                ready.push_back(size);
                            }
                        }
                        Some(Err(e)) if e.is_eof() => break,
                        Some(Err(_)) => {
                            used = buf.len();
                            break;
                        }
                        None => break,
                    }
                }
                buf.drain(..used);
            }
        },
    ))
}

/// Serve one exec or attach over SPDY on `io`.
pub(crate) async fn remote_command<T>(
    io: T,
    version: Option<&'static str>,
    options: StreamOptions,
    timeouts: (Duration, Duration),
    call: impl FnOnce(AttachIo) -> BoxFuture<'static, Outcome>,
) where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (creation_timeout, idle_timeout) = timeouts;
    let mut session = Session::start(io);
    let resize_supported = !matches!(version, None | Some("v2.channel.k8s.io"));
    let mut expected: Vec<&str> = vec!["error"];
    if options.stdin {
        expected.push("stdin");
    }
    if options.stdout {
        expected.push("stdout");
    }
    if options.stderr {
        expected.push("stderr");
    }
    if options.tty && resize_supported {
        expected.push("resize");
    }
    let mut streams: HashMap<String, Stream> = HashMap::new();
    let waited = tokio::time::timeout(creation_timeout, async {
        while !expected.iter().all(|e| streams.contains_key(*e)) {
            let stream = session.accept().await?;
            let kind = header(&stream.headers, "streamtype")
                .unwrap_or_default()
                .to_owned();
            if !expected.contains(&kind.as_str()) || streams.contains_key(&kind) {
                stream.writer().reset();
                continue;
            }
            streams.insert(kind, stream);
        }
        Some(())
    })
    .await;
    if !matches!(waited, Ok(Some(()))) {
        tracing::debug!(?expected, got = ?streams.keys().collect::<Vec<_>>(), "SPDY streams did not arrive in time");
        if let Some(error) = streams.get("error") {
            let _ = error
                .writer()
                .write(b"timed out waiting for client to create streams");
        }
        session.finish().await;
        return;
    }
    let error = streams.remove("error").map(|s| s.writer());
    let mut writers: Vec<StreamWriter> = Vec::new();
    let mut output = |name: &str| {
        streams.remove(name).map(|s| {
            let w = s.writer();
            writers.push(w.clone());
            StreamSink::boxed(w.clone())
        })
    };
    let stdout = output("stdout");
    let stderr = output("stderr");
    let stdin = streams.remove("stdin").map(|s| s.input().0);
    let resize = streams.remove("resize").map(|s| resizes(s.input().0));
    let io = AttachIo {
        stdin,
        stdout,
        stderr,
        tty: options.tty,
        resize,
    };
    let outcome = tokio::select! {
        outcome = call(io) => Some(outcome),
        _ = session.peer_gone() => None,
        _ = session.idle(idle_timeout) => Some(Err(PodError::unavailable(
            None,
            format!("the stream was idle for {}s", idle_timeout.as_secs()),
        ))),
    };
    if let (Some(outcome), Some(error)) = (outcome, &error)
        && let Some(message) = report(reporting(version), &outcome)
    {
        let _ = error.write(&message);
    }
    for w in writers.iter().chain(error.iter()) {
        w.close();
    }
    session.finish().await;
}

/// Serve one port-forward session over SPDY on `io`.
pub(crate) async fn port_forward<T>(
    io: T,
    provider: Arc<dyn PodLifecycleHandler>,
    namespace: String,
    pod: String,
    timeouts: (Duration, Duration),
) where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (creation_timeout, idle_timeout) = timeouts;
    let mut session = Session::start(io);
    // requestID → the first stream of the pair, and when it came.
    let mut pending: HashMap<String, (Stream, tokio::time::Instant)> = HashMap::new();
    let mut forwards = tokio::task::JoinSet::new();
    loop {
        let next_deadline = pending.values().map(|(_, at)| *at + creation_timeout).min();
        let idle = session.idle(idle_timeout);
        let stream = tokio::select! {
            s = session.accept() => s,
            _ = idle => break,
            _ = async {
                match next_deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {
                let now = tokio::time::Instant::now();
                pending.retain(|_, (s, at)| {
                    let keep = *at + creation_timeout > now;
                    if !keep {
                        s.writer().reset();
                    }
                    keep
                });
                continue;
            }
        };
        let Some(stream) = stream else { break };
        let kind = header(&stream.headers, "streamtype").unwrap_or_default();
        if kind != "data" && kind != "error" {
            stream.writer().reset();
            continue;
        }
        let key = header(&stream.headers, "requestid")
            .or_else(|| header(&stream.headers, "port"))
            .unwrap_or_default()
            .to_owned();
        let Some((first, _)) = pending.remove(&key) else {
            pending.insert(key, (stream, tokio::time::Instant::now()));
            continue;
        };
        let first_kind = header(&first.headers, "streamtype").unwrap_or_default();
        let (data, error) = match (first_kind, kind) {
            ("data", "error") => (first, stream),
            ("error", "data") => (stream, first),
            _ => {
                first.writer().reset();
                stream.writer().reset();
                continue;
            }
        };
        let error = error.writer();
        let port = header(&data.headers, "port").and_then(|p| p.parse::<u16>().ok());
        let Some(port) = port.filter(|p| *p > 0) else {
            let _ = error.write(b"invalid port header: must be a number in 1-65535");
            error.close();
            data.writer().reset();
            continue;
        };
        let provider = provider.clone();
        let (namespace, pod) = (namespace.clone(), pod.clone());
        forwards.spawn(async move {
            let (incoming, outgoing) = data.input();
            let stream = PortForwardStream {
                incoming,
                outgoing: StreamSink::boxed(outgoing.clone()),
            };
            let result = match provider.port_forward() {
                Some(forward) => forward.port_forward(&namespace, &pod, port, stream).await,
                None => Err(PodError::not_implemented("port-forward")),
            };
            if let Err(e) = result {
                let message = crate::api::server::forward_error(port, &namespace, &pod, &e);
                let _ = error.write(message.as_bytes());
            }
            error.close();
            outgoing.close();
        });
    }
    for (stream, _) in pending.into_values() {
        stream.writer().reset();
    }
    forwards.abort_all();
    session.finish().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resizes_are_read_from_concatenated_json() {
        let input = stratus_pod::stream_from_chunks(vec![
            br#"{"Width":80,"Height":24}{"other":true}{"Wid"#.to_vec(),
            br#"th":100,"Height":30}"#.to_vec(),
            b"garbage".to_vec(),
            br#"{"Width":1,"Height":2}"#.to_vec(),
        ]);
        let got: Vec<TermSize> = resizes(input).collect().await;
        let sizes: Vec<(u16, u16)> = got.iter().map(|s| (s.width, s.height)).collect();
        assert_eq!(sizes, [(80, 24), (100, 30), (1, 2)]);
    }

    #[tokio::test]
    async fn an_idle_spdy_exec_is_ended_with_a_status() {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let options = StreamOptions {
            command: vec!["sleep".into()],
            stdout: true,
            ..Default::default()
        };
        let server = tokio::spawn(remote_command(
            server_io,
            Some("v5.channel.k8s.io"),
            options,
            (Duration::from_secs(5), Duration::from_millis(200)),
            |_io| Box::pin(std::future::pending()),
        ));
        let client = Session::start(client_io);
        let error = client.open(vec![("streamType".into(), "error".into())], false);
        let _stdout = client.open(vec![("streamType".into(), "stdout".into())], false);
        let (mut status, _) = error.input();
        let first = tokio::time::timeout(Duration::from_secs(5), status.next())
            .await
            .expect("a status in time")
            .unwrap()
            .unwrap();
        let text = String::from_utf8(first).unwrap();
        assert!(text.contains("idle"), "{text}");
        assert!(text.contains("ServiceUnavailable"), "{text}");
        server.await.unwrap();
    }

    #[tokio::test]
    async fn missing_streams_time_out() {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let options = StreamOptions {
            command: vec!["true".into()],
            stdout: true,
            ..Default::default()
        };
        let server = tokio::spawn(remote_command(
            server_io,
            Some("v4.channel.k8s.io"),
            options,
            (Duration::from_millis(200), Duration::from_secs(5)),
            |_io| Box::pin(async { Ok(None) }),
        ));
        let client = Session::start(client_io);
        // Only the error stream: stdout never comes.
        let error = client.open(vec![("streamType".into(), "error".into())], false);
        let (mut status, _) = error.input();
        let first = tokio::time::timeout(Duration::from_secs(5), status.next())
            .await
            .expect("an error in time")
            .unwrap()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&first)
                .contains("timed out waiting for client to create streams")
        );
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the session ends")
            .unwrap();
    }

    #[test]
    fn versions() {
        assert_eq!(reporting(Some("v3.channel.k8s.io")), ChannelProtocol::V1);
        assert_eq!(reporting(Some("v5.channel.k8s.io")), ChannelProtocol::V5);
    }
}
