//! Exec and attach over a WebSocket channel protocol: the provider gets
//! the requested streams, its outcome is reported on the error channel,
//! and the call is dropped (cancelled) when the client goes away or the
//! stream is idle too long.

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::json;
use stratus_pod::{AttachIo, ExitCode, PodError, PodErrorKind};

use super::channel::{ChannelProtocol, channels};
use super::params::StreamOptions;
use super::session::{Inputs, Session, Socket};

/// What exec (`Some(code)`) or attach (`None`) returned.
pub(crate) type Outcome = Result<Option<ExitCode>, PodError>;

/// Serve one exec or attach session on `socket`.
pub(crate) async fn serve(
    socket: Socket,
    protocol: ChannelProtocol,
    options: StreamOptions,
    idle_timeout: Duration,
    call: impl FnOnce(AttachIo) -> BoxFuture<'static, Outcome>,
) {
    let mut inputs = Inputs::default();
    let stdin = options.stdin.then(|| inputs.input(channels::STDIN));
    let resize = options.tty.then(|| inputs.resizes());
    let session = Session::start(socket, protocol, inputs);
    let io = AttachIo {
        stdin,
        stdout: options.stdout.then(|| session.sink(channels::STDOUT)),
        stderr: options.stderr.then(|| session.sink(channels::STDERR)),
        tty: options.tty,
        resize,
    };
    let outcome = tokio::select! {
        outcome = call(io) => Some(outcome),
        _ = session.client_gone() => None,
        _ = session.idle(idle_timeout) => Some(Err(PodError::unavailable(
            None,
            format!("the stream was idle for {}s", idle_timeout.as_secs()),
        ))),
    };
    if let Some(outcome) = outcome
        && let Some(report) = report(session.protocol(), &outcome)
    {
        session.send(channels::ERROR, &report).await;
    }
    session.finish().await;
}

/// The error-channel message for `outcome`: a JSON `Status` under v4 and
/// v5 (success, `NonZeroExitCode` with the code as an `ExitCode` cause, or
/// the provider's failure), the error text under older protocols (nothing
/// on success).
pub(crate) fn report(protocol: ChannelProtocol, outcome: &Outcome) -> Option<Vec<u8>> {
    let failure = match outcome {
        Ok(None) | Ok(Some(ExitCode(0))) => None,
        Ok(Some(ExitCode(code))) => Some((
            format!("command terminated with non-zero exit code: exit status {code}"),
            "NonZeroExitCode",
            500,
            Some(*code),
        )),
        Err(e) => {
            let (reason, code) = match e.kind() {
                PodErrorKind::NotFound => ("NotFound", 404),
                PodErrorKind::InvalidInput => ("BadRequest", 400),
                PodErrorKind::NotImplemented => ("NotImplemented", 501),
                PodErrorKind::AlreadyExists => ("AlreadyExists", 409),
                PodErrorKind::Unavailable { .. } => ("ServiceUnavailable", 503),
                _ => ("InternalError", 500),
            };
            Some((e.to_string(), reason, code, None))
        }
    };
    if !protocol.status_errors() {
        return failure.map(|(message, ..)| message.into_bytes());
    }
    let status = match failure {
        None => json!({"metadata": {}, "status": "Success"}),
        Some((message, reason, code, exit)) => {
            let mut status = json!({
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": code,
            });
            if let Some(exit) = exit {
                status["details"] =
                    json!({"causes": [{"reason": "ExitCode", "message": exit.to_string()}]});
            }
            status
        }
    };
    Some(status.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn parsed(bytes: Option<Vec<u8>>) -> Value {
        serde_json::from_slice(&bytes.unwrap()).unwrap()
    }

    #[test]
    fn statuses_under_v4_and_v5() {
        let ok = parsed(report(ChannelProtocol::V5, &Ok(Some(ExitCode(0)))));
        assert_eq!(ok["status"], "Success");
        let attach = parsed(report(ChannelProtocol::V4, &Ok(None)));
        assert_eq!(attach["status"], "Success");
        let exit = parsed(report(ChannelProtocol::V5, &Ok(Some(ExitCode(3)))));
        assert_eq!(exit["status"], "Failure");
        assert_eq!(exit["reason"], "NonZeroExitCode");
        assert_eq!(exit["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(exit["details"]["causes"][0]["message"], "3");
        let missing = parsed(report(
            ChannelProtocol::V4Base64,
            &Err(PodError::not_found("no container app")),
        ));
        assert_eq!(missing["reason"], "NotFound");
        assert_eq!(missing["code"], 404);
        assert_eq!(missing["message"], "no container app");
    }

    #[test]
    fn text_errors_under_older_protocols() {
        assert_eq!(report(ChannelProtocol::V1, &Ok(Some(ExitCode(0)))), None);
        assert_eq!(
            report(ChannelProtocol::V1Base64, &Ok(Some(ExitCode(2)))).unwrap(),
            b"command terminated with non-zero exit code: exit status 2"
        );
    }
}
