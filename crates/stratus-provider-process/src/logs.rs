//! Container logs on disk, one file per container instance, in the CRI
//! format the kubelet reads (`<RFC 3339 time> <stdout|stderr> F <line>`),
//! and their reading with `PodLogOptions`' semantics.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use stratus_pod::{ByteStream, ContainerLogOptions};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The log file of instance `instance` (the restart count) of a container.
pub(crate) fn log_path(pod_dir: &Path, container: &str, instance: i32) -> PathBuf {
    pod_dir
        .join("logs")
        .join(container)
        .join(format!("{instance}.log"))
}

/// Copy `stdout` and `stderr` into `path`, line by line with their times,
/// until both end; at most `limit` bytes, then one marker line.
pub(crate) async fn capture(
    path: PathBuf,
    stdout: impl AsyncRead + Unpin + Send + 'static,
    stderr: impl AsyncRead + Unpin + Send + 'static,
    limit: u64,
) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .await?;
    let (lines, mut received) = mpsc::channel::<(&'static str, Vec<u8>)>(16);
    for (stream, reader) in [
        (
            "stdout",
            Box::new(stdout) as Box<dyn AsyncRead + Unpin + Send>,
        ),
        ("stderr", Box::new(stderr)),
    ] {
        let lines = lines.clone();
        tokio::spawn(async move {
            // Small buffers: a node holds two per running container; longer
            // lines still arrive whole (`read_until` grows the line).
            let mut reader = BufReader::with_capacity(1024, reader);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if lines.send((stream, line)).await.is_err() {
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(lines);
    let mut written = 0u64;
    let mut cut = false;
    while let Some((stream, mut line)) = received.recv().await {
        if cut {
            continue;
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        let mut record = format!("{} {stream} F ", rfc3339(Timestamp::now())).into_bytes();
        record.extend_from_slice(&line);
        if written + record.len() as u64 > limit {
            let marker = format!(
                "{} stderr F [log cut at {limit} bytes by the process provider]\n",
                rfc3339(Timestamp::now())
            );
            file.write_all(marker.as_bytes()).await?;
            cut = true;
            continue;
        }
        written += record.len() as u64;
        file.write_all(&record).await?;
    }
    file.flush().await
}

/// Nanosecond RFC 3339 in UTC, as the CRI writes.
fn rfc3339(t: Timestamp) -> String {
    format!("{t:.9}")
}

/// One parsed log line.
struct Line {
    time: Timestamp,
    /// Written to stderr (else stdout).
    stderr: bool,
    content: Vec<u8>,
}

/// Parse complete lines; a malformed line is kept with the Unix epoch as
/// its time rather than dropped.
fn parse(data: &[u8]) -> Vec<Line> {
    data.split_inclusive(|b| *b == b'\n')
        .filter(|l| l.last() == Some(&b'\n'))
        .map(|raw| {
            let mut parts = raw.splitn(4, |b| *b == b' ');
            let time = parts
                .next()
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| t.parse::<Timestamp>().ok());
            let (stream, _tag, content) = (parts.next(), parts.next(), parts.next());
            match (time, content) {
                (Some(time), Some(content)) => Line {
                    time,
                    stderr: stream == Some(b"stderr".as_slice()),
                    content: content.to_vec(),
                },
                _ => Line {
                    time: Timestamp::UNIX_EPOCH,
                    stderr: false,
                    content: raw.to_vec(),
                },
            }
        })
        .collect()
}

/// The bytes a client gets for `lines`.
fn render(lines: &[Line], timestamps: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        if timestamps {
            out.extend_from_slice(rfc3339(line.time).as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&line.content);
    }
    out
}

/// Whether the instance whose log is read may still write.
pub(crate) type StillRunning = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// Read `path` with `options`; with `follow`, keep reading new lines
/// until `still_running` says the instance ended (then read what is left).
pub(crate) async fn read(
    path: PathBuf,
    options: &ContainerLogOptions,
    still_running: StillRunning,
) -> std::io::Result<ByteStream> {
    let data = read_all(&path).await?;
    // Only complete lines are served; a partial one is left for later.
    let complete = complete_len(&data);
    let since = match (&options.since_time, options.since_seconds) {
        (Some(t), _) => Some(t.0),
        (None, Some(secs)) => {
            Some(Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(secs))
        }
        _ => None,
    };
    let lines: Vec<Line> = parse(&data[..complete])
        .into_iter()
        .filter(|l| since.is_none_or(|s| l.time >= s))
        .collect();
    let tail = options
        .tail_lines
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let start = lines.len().saturating_sub(tail);
    let mut left = options
        .limit_bytes
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let first = take(render(&lines[start..], options.timestamps), &mut left);
    if !options.follow {
        return Ok(stratus_pod::stream_from_chunks(vec![first]));
    }
    let state = Follow {
        path,
        offset: complete,
        left,
        timestamps: options.timestamps,
        still_running,
        pending: Some(first),
    };
    Ok(Box::pin(futures_util::stream::unfold(state, follow)))
}

/// The state of a followed log.
struct Follow {
    path: PathBuf,
    offset: usize,
    left: usize,
    timestamps: bool,
    still_running: StillRunning,
    pending: Option<Vec<u8>>,
}

/// The next chunk of a followed log: new complete lines, or the end once
/// the instance ended and everything it wrote was served.
async fn follow(mut state: Follow) -> Option<(std::io::Result<Vec<u8>>, Follow)> {
    if let Some(first) = state.pending.take()
        && !first.is_empty()
    {
        return Some((Ok(first), state));
    }
    loop {
        if state.left == 0 {
            return None;
        }
        // Asked before reading: whatever the instance wrote before it ended
        // is in the file by the time it is seen ended.
        let running = (state.still_running)();
        let fresh = match read_from(&state.path, state.offset).await {
            Ok(d) => d,
            Err(e) => return Some((Err(e), state)),
        };
        let complete = complete_len(&fresh);
        if complete > 0 {
            state.offset += complete;
            let chunk = take(
                render(&parse(&fresh[..complete]), state.timestamps),
                &mut state.left,
            );
            return Some((Ok(chunk), state));
        }
        if !running {
            return None;
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

/// Where "from now on" begins in the log at `path`: the end of its last
/// complete line. Taken before the client's input reaches the process, so
/// the answer to that input is never missed.
pub(crate) async fn attach_offset(path: &Path) -> usize {
    read_all(path).await.map_or(0, |d| complete_len(&d))
}

/// Copy what the instance writes past `offset` (see [`attach_offset`]) to
/// `stdout` and `stderr` (its stderr to `stdout` when there is no
/// `stderr`), until it ends or the client goes away (a write fails):
/// `kubectl attach`'s output.
pub(crate) async fn attach_output(
    path: PathBuf,
    mut offset: usize,
    still_running: StillRunning,
    mut stdout: Option<stratus_pod::OutputStream>,
    mut stderr: Option<stratus_pod::OutputStream>,
) {
    loop {
        let running = still_running();
        let fresh = read_from(&path, offset).await.unwrap_or_default();
        let complete = complete_len(&fresh);
        for line in parse(&fresh[..complete]) {
            let sink = match (line.stderr, stderr.as_mut()) {
                (true, Some(err)) => Some(err),
                _ => stdout.as_mut(),
            };
            if let Some(sink) = sink
                && sink.write(&line.content).await.is_err()
            {
                return;
            }
        }
        offset += complete;
        if !running {
            break;
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
    for sink in [stdout.as_mut(), stderr.as_mut()].into_iter().flatten() {
        let _ = sink.close().await;
    }
}

/// How often a followed log looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

async fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    read_from(path, 0).await
}

/// What `path` holds past byte `offset` (nothing if it does not exist
/// yet): a followed log reads only what is new, not the whole file again.
async fn read_from(path: &Path, offset: usize) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    file.seek(std::io::SeekFrom::Start(offset as u64)).await?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest).await?;
    Ok(rest)
}

/// The length of the complete lines at the start of `data`.
fn complete_len(data: &[u8]) -> usize {
    data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)
}

/// At most `left` bytes of `chunk`, counted off `left`.
fn take(mut chunk: Vec<u8>, left: &mut usize) -> Vec<u8> {
    chunk.truncate(*left);
    *left -= chunk.len();
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    async fn collect(stream: ByteStream) -> String {
        let chunks: Vec<_> = stream.collect().await;
        let bytes: Vec<u8> = chunks.into_iter().flat_map(Result::unwrap).collect();
        String::from_utf8(bytes).unwrap()
    }

    #[tokio::test]
    async fn tail_limit_timestamps_and_since() {
        let dir = std::env::temp_dir().join(format!("stratus-logs-{}", std::process::id()));
        let path = log_path(&dir, "app", 0);
        let (stdout, stderr) = (&b"one\ntwo\nthree"[..], &b""[..]);
        capture(path.clone(), stdout, stderr, 1024).await.unwrap();
        let done: StillRunning = std::sync::Arc::new(|| false);
        let all = read(path.clone(), &ContainerLogOptions::default(), done.clone())
            .await
            .unwrap();
        assert_eq!(collect(all).await, "one\ntwo\nthree\n");
        let options = ContainerLogOptions {
            tail_lines: Some(2),
            limit_bytes: Some(6),
            ..Default::default()
        };
        assert_eq!(
            collect(read(path.clone(), &options, done.clone()).await.unwrap()).await,
            "two\nth"
        );
        let options = ContainerLogOptions {
            timestamps: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        let stamped = collect(read(path.clone(), &options, done.clone()).await.unwrap()).await;
        let (time, rest) = stamped.split_once(' ').unwrap();
        assert!(time.parse::<Timestamp>().is_ok(), "{stamped}");
        assert_eq!(rest, "three\n");
        // Follow ends at once for an ended instance, after what it wrote.
        let options = ContainerLogOptions {
            follow: true,
            ..Default::default()
        };
        assert_eq!(
            collect(read(path.clone(), &options, done).await.unwrap()).await,
            "one\ntwo\nthree\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn output_past_the_limit_is_cut_with_a_marker() {
        let dir = std::env::temp_dir().join(format!("stratus-logs-cut-{}", std::process::id()));
        let path = log_path(&dir, "app", 0);
        let big = "x".repeat(100) + "\n";
        let out = big.repeat(10);
        capture(
            path.clone(),
            std::io::Cursor::new(out.into_bytes()),
            &b""[..],
            400,
        )
        .await
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.len() < 600, "{}", text.len());
        assert!(text.contains("[log cut at 400 bytes"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
