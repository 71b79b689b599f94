//! The worker's stdout: control lines only, one JSON object per line, always redacted.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use crate::control::{Outbound, RunId, WorkerEvent};
use crate::redact::redact;

static STDOUT: Mutex<()> = Mutex::new(());

/// Writes one control line. A closed stdout (broker gone) is not an error here: the stdin EOF
/// that follows drives the teardown.
pub fn emit(message: &Outbound) {
    let line = match serde_json::to_string(message) {
        Ok(line) => redact(&line),
        Err(err) => {
            tracing::error!(%err, "could not serialize a control line");
            return;
        }
    };
    let _guard = STDOUT.lock().unwrap_or_else(PoisonError::into_inner);
    let mut out = std::io::stdout().lock();
    let written = out
        .write_all(line.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(err) = written {
        tracing::debug!(%err, "stdout closed; control line dropped");
    }
}

/// Emits an `event` line for `run_id`.
pub fn event(run_id: &RunId, event: WorkerEvent) {
    emit(&Outbound::Event {
        run_id: run_id.clone(),
        event,
    });
}

/// A tracing writer that redacts every formatted log line before it reaches stderr.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedactingStderr;

impl Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        // A log line that cannot be written is dropped, never an error: the broker may be
        // gone (its end of the pipe closed) exactly while the worker tears its tree down,
        // and tracing reacts to a writer error by printing to stderr, which then panics.
        let _ = std::io::stderr().write_all(redact(&text).as_bytes());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingStderr;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingStderr
    }
}
