//! The template's setup command (`npm ci`, `uv sync`, …): run once in an isolated child's
//! checkout before its first run, as a `bash` call runs — in the run's sandbox, with the
//! tool bounds and `toolTimeoutMs` — and reported as `tool` events named `setup`.
//!
//! A setup that fails does not fail the run: the model is told, with the end of what the
//! command printed, and can finish the job itself or work around it.

use std::time::Duration;

use crate::control::{StartRun, ToolName, ToolState, WorkerEvent};
use crate::emit;
use crate::redact::redact;
use crate::tools::{ToolContext, bash};

/// The name of the setup's `tool` events.
pub const EVENT_NAME: &str = "setup";

/// The most of the command's output the model is told (its end: where errors are).
const NOTE_OUTPUT_BYTES: usize = 4 * 1024;

/// Runs the start's setup command, if it has one; the note for the model when it failed.
pub async fn run(start: &StartRun, tools: &ToolContext) -> Option<String> {
    let command = start.setup.as_deref()?;
    let name = ToolName::try_from(EVENT_NAME).expect("`setup` is a valid tool name");
    emit::event(
        &start.run_id,
        WorkerEvent::Tool {
            name: name.clone(),
            state: ToolState::Started,
        },
    );
    let timeout = Duration::from_millis(start.snapshot.limits.tool_timeout_ms.get());
    let output = bash::command(tools, command, timeout).await;
    let state = if output.is_error {
        ToolState::Failed
    } else {
        ToolState::Finished
    };
    emit::event(&start.run_id, WorkerEvent::Tool { name, state });
    tracing::info!(failed = output.is_error, "the setup command ended");
    output.is_error.then(|| note(command, &output.text))
}

/// What the model is told of a failed setup: the command and the end of its report.
fn note(command: &str, report: &str) -> String {
    format!(
        "Before this task, the template's setup command ran in your checkout and failed, so \
         the checkout may not be ready to build or test. The command was:\n{}\nThe end of \
         what it reported:\n{}",
        redact(command),
        redact(tail(report, NOTE_OUTPUT_BYTES))
    )
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_keeps_the_end_of_a_long_report() {
        let report = format!("exit code: 1\n{}npm ERR! missing script", "é".repeat(5000));
        let note = note("npm ci", &report);
        assert!(note.ends_with("npm ERR! missing script"), "{note}");
        assert!(!note.contains("exit code: 1"));
        assert!(note.len() < NOTE_OUTPUT_BYTES + 400);
        assert!(note.contains("npm ci"));
    }
}
