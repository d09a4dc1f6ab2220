//! Container logs on disk, one file per container instance, in the CRI
//! format the kubelet reads (`<RFC 3339 time> <stdout|stderr> F <line>`),
//! rotated as the kubelet rotates them, and their reading with
//! `PodLogOptions`' semantics.
//!
//! Rotation: once the current file (`<instance>.log`) would pass
//! [`LogLimits::max_bytes`], it becomes `<instance>.log.1` (the older
//! ones shift to `.2`, ...; `max_files` files in all, the oldest dropped)
//! and a new file starts. Reading serves the current file, as the kubelet
//! does; a followed log (and an attach session) goes on across a rotation
//! without losing or repeating a line.

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

/// How big a container instance's log grows (the kubelet's
/// `containerLogMaxSize` and `containerLogMaxFiles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogLimits {
    /// The current file is rotated before it passes this size.
    pub(crate) max_bytes: u64,
    /// Files kept: the current one and `max_files - 1` rotated ones.
    pub(crate) max_files: u32,
}

/// Rotated file `n` of the log at `path` (`<path>.<n>`, 1 the newest).
fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Make the current file rotated file 1, shifting the others and dropping
/// what passes `keep` rotated files.
async fn rotate(path: &Path, keep: u32) -> std::io::Result<()> {
    let gone = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    if keep == 0 {
        return gone(tokio::fs::remove_file(path).await);
    }
    gone(tokio::fs::remove_file(rotated(path, keep)).await)?;
    for n in (1..keep).rev() {
        gone(tokio::fs::rename(rotated(path, n), rotated(path, n + 1)).await)?;
    }
    tokio::fs::rename(path, rotated(path, 1)).await
}

async fn append_to(path: &Path) -> std::io::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await
}

/// Copy `stdout` and `stderr` into `path`, line by line with their times,
/// until both end, rotating the file at `limits`.
pub(crate) async fn capture(
    path: PathBuf,
    stdout: impl AsyncRead + Unpin + Send + 'static,
    stderr: impl AsyncRead + Unpin + Send + 'static,
    limits: LogLimits,
) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let mut file = append_to(&path).await?;
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
    while let Some((stream, mut line)) = received.recv().await {
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        let mut record = format!("{} {stream} F ", rfc3339(Timestamp::now())).into_bytes();
        record.extend_from_slice(&line);
        // A record longer than the limit still goes whole into a file.
        if written > 0 && written + record.len() as u64 > limits.max_bytes {
            file.flush().await?;
            drop(file);
            rotate(&path, limits.max_files.saturating_sub(1)).await?;
            file = append_to(&path).await?;
            written = 0;
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
    let (inode, data) = read_file(&path, 0).await?;
    // Only complete lines are served; a partial one is left for later.
    let complete = complete_len(&data);
    let since = options.since(Timestamp::now());
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
        tail: Tail {
            path,
            offset: complete,
            inode,
        },
        left,
        timestamps: options.timestamps,
        still_running,
        pending: Some(first),
    };
    Ok(Box::pin(futures_util::stream::unfold(state, follow)))
}

/// The state of a followed log.
struct Follow {
    tail: Tail,
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
        let fresh = match state.tail.next().await {
            Ok(d) => d,
            Err(e) => return Some((Err(e), state)),
        };
        if !fresh.is_empty() {
            let chunk = take(render(&parse(&fresh), state.timestamps), &mut state.left);
            return Some((Ok(chunk), state));
        }
        if !running {
            return None;
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

/// A reader of the lines appended to a log, across its rotations.
pub(crate) struct Tail {
    path: PathBuf,
    /// Bytes of the file `inode` already read.
    offset: usize,
    /// The file being read (none before the log exists).
    inode: Option<u64>,
}

impl Tail {
    /// Where "from now on" begins in the log at `path`: the end of its
    /// last complete line. Taken before the client's input reaches the
    /// process, so the answer to that input is never missed.
    pub(crate) async fn from_now(path: PathBuf) -> Self {
        let (inode, data) = read_file(&path, 0).await.unwrap_or_default();
        Self {
            offset: complete_len(&data),
            path,
            inode,
        }
    }

    /// The complete lines written since the last call: the rest of the
    /// file being read, and when the log rotated meanwhile, the files
    /// rotated after it and the start of the current one.
    async fn next(&mut self) -> std::io::Result<Vec<u8>> {
        let (current, fresh) = read_file(&self.path, self.offset).await?;
        if self.inode.is_none() || current == self.inode {
            self.inode = current;
            let complete = complete_len(&fresh);
            self.offset += complete;
            return Ok(fresh[..complete].to_vec());
        }
        // Rotated: find the file being read among the rotated ones.
        let mut out = Vec::new();
        let mut n = 1;
        let mut newer = Vec::new();
        loop {
            let path = rotated(&self.path, n);
            match read_file(&path, 0).await? {
                (None, _) => break,
                (inode, data) if inode == self.inode => {
                    let rest = data.get(self.offset..).unwrap_or_default();
                    out.extend_from_slice(&rest[..complete_len(rest)]);
                    break;
                }
                (_, data) => newer.push(data),
            }
            n += 1;
        }
        // Files rotated after the one being read, oldest first; a file
        // rotated away entirely (past max_files) is gone.
        for data in newer.iter().rev() {
            out.extend_from_slice(&data[..complete_len(data)]);
        }
        let (current, fresh) = read_file(&self.path, 0).await?;
        let complete = complete_len(&fresh);
        out.extend_from_slice(&fresh[..complete]);
        self.inode = current;
        self.offset = complete;
        Ok(out)
    }
}

/// Copy what the instance writes past `tail` (see [`Tail::from_now`]) to
/// `stdout` and `stderr` (its stderr to `stdout` when there is no
/// `stderr`), until it ends or the client goes away (a write fails):
/// `kubectl attach`'s output.
pub(crate) async fn attach_output(
    mut tail: Tail,
    still_running: StillRunning,
    mut stdout: Option<stratus_pod::OutputStream>,
    mut stderr: Option<stratus_pod::OutputStream>,
) {
    loop {
        let running = still_running();
        let fresh = tail.next().await.unwrap_or_default();
        for line in parse(&fresh) {
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

/// The file at `path` (its inode, to notice a rotation) and what it holds
/// past byte `offset`; nothing if it does not exist (yet): a followed log
/// reads only what is new, not the whole file again.
async fn read_file(path: &Path, offset: usize) -> std::io::Result<(Option<u64>, Vec<u8>)> {
    use std::os::unix::fs::MetadataExt;
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(e) => return Err(e),
    };
    let inode = file.metadata().await?.ino();
    file.seek(std::io::SeekFrom::Start(offset as u64)).await?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest).await?;
    Ok((Some(inode), rest))
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
        let limits = LogLimits {
            max_bytes: 1024,
            max_files: 5,
        };
        capture(path.clone(), stdout, stderr, limits).await.unwrap();
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
    async fn files_rotate_at_the_limit_keeping_max_files() {
        let dir = std::env::temp_dir().join(format!("stratus-logs-rotate-{}", std::process::id()));
        let path = log_path(&dir, "app", 0);
        // 20 records of about 140 bytes, files of at most 400 bytes: two
        // records a file, 10 files made, the newest 3 kept.
        let out: String = (0..20)
            .map(|i| format!("{i:02}{}\n", "x".repeat(100)))
            .collect();
        let limits = LogLimits {
            max_bytes: 400,
            max_files: 3,
        };
        capture(
            path.clone(),
            std::io::Cursor::new(out.into_bytes()),
            &b""[..],
            limits,
        )
        .await
        .unwrap();
        let lines = |p: &Path| -> Vec<String> {
            parse(&std::fs::read(p).unwrap())
                .iter()
                .map(|l| String::from_utf8_lossy(&l.content[..2]).into_owned())
                .collect()
        };
        assert_eq!(lines(&path), ["18", "19"]);
        assert_eq!(lines(&rotated(&path, 1)), ["16", "17"]);
        assert_eq!(lines(&rotated(&path, 2)), ["14", "15"]);
        assert!(!rotated(&path, 3).exists());
        for p in [path.clone(), rotated(&path, 1)] {
            assert!(std::fs::metadata(p).unwrap().len() <= 400);
        }
        // Reading serves the current file, as the kubelet does.
        let done: StillRunning = std::sync::Arc::new(|| false);
        let all = collect(
            read(path.clone(), &ContainerLogOptions::default(), done)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(all.lines().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_followed_log_goes_on_across_rotations_without_loss() {
        let dir = std::env::temp_dir().join(format!("stratus-logs-follow-{}", std::process::id()));
        let path = log_path(&dir, "app", 0);
        let (mut writer, reader) = tokio::io::duplex(1 << 16);
        let limits = LogLimits {
            max_bytes: 300,
            max_files: 4,
        };
        let capturing = tokio::spawn(capture(path.clone(), reader, &b""[..], limits));
        writer.write_all(b"first\n").await.unwrap();
        let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let still = running.clone();
        let still_running: StillRunning =
            std::sync::Arc::new(move || still.load(std::sync::atomic::Ordering::SeqCst));
        // Wait for the first line, then follow from the start.
        while std::fs::metadata(&path).map_or(0, |m| m.len()) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let options = ContainerLogOptions {
            follow: true,
            ..Default::default()
        };
        let followed = tokio::spawn(collect(
            read(path.clone(), &options, still_running).await.unwrap(),
        ));
        // Lines written in bursts between the follower's polls: the file
        // rotates several times (three per 300 bytes), even twice between
        // two polls.
        let mut sent = vec!["first".to_string()];
        for burst in 0..6 {
            for i in 0..5 {
                let line = format!("burst {burst} line {i} {}", "y".repeat(40));
                writer
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .unwrap();
                sent.push(line);
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        drop(writer);
        capturing.await.unwrap().unwrap();
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        let got = followed.await.unwrap();
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(got, sent.iter().map(String::as_str).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
