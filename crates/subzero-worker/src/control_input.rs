//! The control channel's input: stdin read on a plain thread, line by line with a bound,
//! each line parsed into an inbound message; a line that cannot be read is logged by
//! position and, for a `start_run`, answered with a failed settlement.

use std::io::{BufRead, Read};

use tokio::sync::mpsc;

use crate::control::{self, Inbound, LineError, Outbound, RunStatus, RunUsage};
use crate::{emit, model, tools};

pub(crate) enum Input {
    Message(Inbound),
    Eof,
}

/// Reads stdin on a plain thread (a blocked read must not hold up the runtime's shutdown).
pub(crate) fn spawn_stdin_reader(tx: mpsc::UnboundedSender<Input>) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in control_lines(stdin.lock()) {
            let Some(line) = line else {
                tracing::warn!(
                    cap = MAX_CONTROL_LINE,
                    "ignoring a control line over the cap (or not UTF-8)"
                );
                continue;
            };
            if line.trim().is_empty() {
                continue;
            }
            match control::parse_line(&line) {
                Ok(message) => {
                    if tx.send(Input::Message(message)).is_err() {
                        return;
                    }
                }
                Err(err) => reject_line(&line, &err),
            }
        }
        let _ = tx.send(Input::Eof);
    });
}

/// The longest control line the worker reads (a `start_run` carries the grant snapshot, at
/// most 64 skills of 64 KiB and the instructions, well under this); a longer one is skipped
/// to its end without being held.
const MAX_CONTROL_LINE: u64 = 16 * 1024 * 1024;

/// The lines of `input`, each `None` when it passes [`MAX_CONTROL_LINE`] or is not UTF-8;
/// ends at end of file or a read error.
fn control_lines<R: BufRead>(mut input: R) -> impl Iterator<Item = Option<String>> {
    std::iter::from_fn(move || {
        let mut line = Vec::new();
        let read = (&mut input)
            .take(MAX_CONTROL_LINE + 1)
            .read_until(b'\n', &mut line)
            .ok()?;
        if read == 0 {
            return None;
        }
        if line.last() != Some(&b'\n') && read as u64 > MAX_CONTROL_LINE {
            // Skip the rest of the line without keeping it.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                match (&mut input).take(64 * 1024).read_until(b'\n', &mut rest) {
                    Ok(0) | Err(_) => return Some(None),
                    Ok(_) if rest.last() == Some(&b'\n') => return Some(None),
                    Ok(_) => {}
                }
            }
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        Some(String::from_utf8(line).ok())
    })
}

/// An unreadable line is logged by position only (it may hold a key); a `start_run` with a
/// readable `runId` is answered with a failed settlement so the broker is not left waiting.
fn reject_line(line: &str, err: &LineError) {
    let reason = match err {
        LineError::Malformed(e) => {
            tracing::warn!(
                line = e.line(),
                column = e.column(),
                category = ?e.classify(),
                "ignoring an unreadable control line"
            );
            format!("at column {}", e.column())
        }
        LineError::Invalid(e) => {
            tracing::warn!(
                field = e.field(),
                "ignoring a control line that breaks the contract"
            );
            e.to_string()
        }
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    if value.get("type").and_then(|t| t.as_str()) == Some("start_run")
        && let Some(run_id) = control::run_id_of(&value)
    {
        let error = match err {
            LineError::Invalid(e) => e.to_error_body(),
            LineError::Malformed(_) => {
                control::start_run_rejection(&value, model::PROTOCOLS, tools::BUILTIN, &reason)
            }
        };
        emit::emit(&Outbound::RunSettled {
            run_id,
            status: RunStatus::Failed,
            result: None,
            budget: None,
            cut: None,
            error: Some(error),
            usage: RunUsage::default().into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_CONTROL_LINE, control_lines};

    #[test]
    fn control_lines_are_split_bounded_and_an_oversized_one_is_skipped_whole() {
        let mut input = b"one\r\ntwo\n".to_vec();
        input.extend(std::iter::repeat_n(
            b'x',
            usize::try_from(MAX_CONTROL_LINE).expect("the cap fits in memory") + 10,
        ));
        input.extend(b"\nthree");
        let lines: Vec<Option<String>> = control_lines(&input[..]).collect();
        assert_eq!(
            lines,
            vec![
                Some("one".to_owned()),
                Some("two".to_owned()),
                None,
                Some("three".to_owned())
            ]
        );
        let not_utf8: Vec<Option<String>> = control_lines(&b"\xff\n"[..]).collect();
        assert_eq!(not_utf8, vec![None]);
    }
}
