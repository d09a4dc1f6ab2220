//! Exec with a terminal: the command's stdin, stdout and stderr are the
//! secondary side of a new pseudo-terminal; the client's input goes to its
//! primary side, its output comes back from it, and resizes set its window
//! size (`TIOCSWINSZ`), as the kubelet's runtimes do.

use std::process::Stdio;

use futures_util::StreamExt;
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};
use stratus_kubelet::streams::{copy_from_stream, copy_to_sink};
use stratus_pod::{AttachIo, PodError, Result};

use crate::plan::Launch;

/// A new pseudo-terminal: the primary side, and the path of the secondary.
fn open_terminal() -> std::io::Result<(std::os::fd::OwnedFd, std::path::PathBuf)> {
    let primary = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&primary)?;
    unlockpt(&primary)?;
    let name = ptsname(&primary, Vec::new())?;
    let path = std::path::PathBuf::from(
        <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(name.into_bytes()),
    );
    Ok((primary, path))
}

/// Run `program` with `args` on a terminal, in `launch`'s environment and
/// directory; the exit code.
pub(crate) async fn exec_on_terminal(
    launch: &Launch,
    program: &str,
    args: &[String],
    mut io: AttachIo,
) -> Result<i32> {
    let unavailable =
        |e: std::io::Error| PodError::unavailable(None, format!("cannot open a terminal: {e}"));
    let (primary, path) = open_terminal().map_err(unavailable)?;
    let secondary = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(unavailable)?;
    let stdio = |f: &std::fs::File| f.try_clone().map(Stdio::from).map_err(unavailable);
    let mut child = launch
        .command(program, args)
        .env("TERM", "xterm")
        .stdin(stdio(&secondary)?)
        .stdout(stdio(&secondary)?)
        .stderr(stdio(&secondary)?)
        .spawn()
        .map_err(|e| PodError::invalid_input(format!("cannot run {program:?}: {e}")))?;
    launch.limit(&child);
    // Only the child holds the secondary side now: when it (and what it
    // started) ends, reading the primary side ends too.
    drop(secondary);
    let guard = crate::group::GroupGuard::recorded(&child, launch).await;
    let resizer = io.resize.take().map(|mut sizes| {
        let fd = primary.try_clone();
        tokio::spawn(async move {
            let Ok(fd) = fd else { return };
            while let Some(size) = sizes.next().await {
                let _ = tcsetwinsize(
                    &fd,
                    Winsize {
                        ws_row: size.height,
                        ws_col: size.width,
                        ws_xpixel: 0,
                        ws_ypixel: 0,
                    },
                );
            }
        })
    });
    let primary = std::fs::File::from(primary);
    let writer = primary.try_clone().map_err(unavailable)?;
    let feeding = io
        .stdin
        .take()
        .map(|input| tokio::spawn(copy_from_stream(input, tokio::fs::File::from_std(writer))));
    if let Some(out) = io.stdout.take() {
        // The read fails (EIO) once the secondary side is closed everywhere.
        copy_to_sink(tokio::fs::File::from_std(primary), out).await;
    }
    let status = child
        .wait()
        .await
        .map_err(|e| PodError::unavailable(None, format!("cannot wait for {program:?}: {e}")))?;
    for task in [feeding, resizer].into_iter().flatten() {
        task.abort();
    }
    drop(guard);
    Ok(crate::plan::exit_code(status))
}
