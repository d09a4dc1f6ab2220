//! Test helpers for binaries run as child processes (a vendor's template
//! `main`): stop one with SIGTERM and collect how it ended.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Send SIGTERM to `child` and wait up to `limit` for it to exit: its exit
/// status and what it wrote to a piped standard error. Panics (killing the
/// child) if it does not stop in time: a test helper.
pub async fn terminate(child: &mut Child, limit: Duration) -> (ExitStatus, String) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("cannot run kill: {e}"));
    assert!(sent.success(), "kill -TERM {} failed", child.id());
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(None) => {
                let _ = child.kill();
                panic!("the process did not stop within {limit:?} of SIGTERM");
            }
            Err(e) => panic!("waiting for the process: {e}"),
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    (status, stderr)
}
