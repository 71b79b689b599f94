//! The tool calls of one model turn, one after the other, each answered in the transcript.
//!
//! Each call runs within `toolTimeoutMs` and the run's deadline. A call past its timeout is
//! a tool error naming the timeout (`bash` has its process tree killed, an MCP request is
//! cancelled) and the run goes on; the deadline reached mid-call ends the loop instead: that
//! call and the rest are answered `not run` and the run hands off. In a response cut at
//! `maxOutputTokens`, a call whose arguments are not a whole JSON object was cut mid-way and
//! is not run: the model is asked for a smaller call.

use std::time::Duration;

use crate::control::{ErrorBody, RunId, StartRun, ToolName, ToolState, WorkerEvent};
use crate::emit;
use crate::handoff::Reached;
use crate::model::ToolCall;
use crate::redact::redact;
use crate::run::{RunContext, transcript_error};
use crate::tools::{self, ToolOutput};
use crate::transcript::{Entry, EntryType, Transcript};

/// Slack past `toolTimeoutMs` before the worker stops waiting for a tool that did not end
/// itself at its timeout (every tool does; this is the backstop).
const TIMEOUT_BACKSTOP: Duration = Duration::from_secs(3);

/// What the turn's calls need besides the run.
pub struct Turn<'a> {
    pub granted: &'a [String],
    /// `Some(cap)` when the response was cut at `maxOutputTokens`.
    pub cut_at: Option<u64>,
    /// The budget reached when the deadline comes, for the handoff.
    pub past_deadline: &'a (dyn Fn() -> Reached + Sync),
}

/// Runs `calls` in order and records each result. `Some(reached)` when the run's deadline
/// came mid-call: the calls from there on were answered `not run` and the run hands off.
pub async fn run_all(
    ctx: &RunContext,
    transcript: &mut Transcript,
    calls: &[ToolCall],
    turn: &Turn<'_>,
) -> Result<Option<Reached>, ErrorBody> {
    let start = &ctx.start;
    for (index, call) in calls.iter().enumerate() {
        let shown_name = tool_name_for_event(&call.name);
        tool_event(&start.run_id, &shown_name, ToolState::Started);
        let output = match answer(ctx, call, &shown_name, turn).await {
            Answer::Output(output) => output,
            Answer::Deadline => {
                let reached = (turn.past_deadline)();
                tool_event(&start.run_id, &shown_name, ToolState::Failed);
                answer_unrun(transcript, start, &calls[index..], &reached)?;
                return Ok(Some(reached));
            }
        };
        let mut entry = Entry::new(EntryType::ToolResult, "tool");
        entry.tool_call_id = Some(call.id.clone());
        entry.name = Some(call.name.clone());
        entry.content = Some(output.text);
        entry.is_error = Some(output.is_error);
        entry.run_id = Some(start.run_id.to_string());
        transcript.append(entry).map_err(transcript_error)?;
        let state = if output.is_error {
            ToolState::Failed
        } else {
            ToolState::Finished
        };
        tool_event(&start.run_id, &shown_name, state);
    }
    Ok(None)
}

enum Answer {
    Output(ToolOutput),
    /// The run's deadline came before the call ended.
    Deadline,
}

/// One call's answer: refused before it runs (oversized or cut arguments, an ungranted
/// name), or the tool's output within its timeout.
async fn answer(ctx: &RunContext, call: &ToolCall, shown_name: &str, turn: &Turn<'_>) -> Answer {
    let start = &ctx.start;
    let builtin = turn.granted.iter().any(|t| t == &call.name);
    if let Some(bytes) = call.oversized {
        return Answer::Output(oversized_arguments(
            shown_name,
            bytes,
            start.stream_bounds.max_tool_argument_bytes,
        ));
    }
    if let Some(cap) = turn.cut_at
        && !whole_arguments(&call.arguments)
    {
        return Answer::Output(cut_arguments(cap));
    }
    if !builtin && !ctx.mcp.allows(&call.name) {
        tracing::warn!(tool = %shown_name, "model called a tool that is not granted");
        let names: Vec<&str> = turn
            .granted
            .iter()
            .map(String::as_str)
            .chain(ctx.mcp.names())
            .collect();
        return Answer::Output(ToolOutput::error(format!(
            "tool {} is not granted to this child; granted tools: {}",
            call.name,
            names.join(", ")
        )));
    }
    let timeout = Duration::from_millis(start.snapshot.limits.tool_timeout_ms.get());
    let execution = async {
        if builtin {
            tools::execute(&ctx.tools, &call.name, &call.arguments, timeout).await
        } else {
            ctx.mcp.call(&call.name, &call.arguments, timeout).await
        }
    };
    let remaining = ctx
        .deadline
        .saturating_duration_since(tokio::time::Instant::now());
    let backstop = timeout.saturating_add(TIMEOUT_BACKSTOP);
    match tokio::time::timeout(backstop.min(remaining), execution).await {
        Ok(output) => Answer::Output(output),
        // Dropping the call killed a `bash` tree (its guard) or cancelled an MCP request.
        Err(_) if remaining <= backstop => Answer::Deadline,
        Err(_) => Answer::Output(tools::timed_out(
            shown_name,
            timeout,
            "it did not end at its timeout and was abandoned",
        )),
    }
}

/// Whether a call's arguments are a whole JSON object (what a call cut mid-way is not).
fn whole_arguments(arguments: &str) -> bool {
    matches!(
        serde_json::from_str::<serde_json::Value>(arguments),
        Ok(serde_json::Value::Object(_))
    )
}

/// The tool error for a call cut at the output-token cap before its arguments were whole.
fn cut_arguments(cap: u64) -> ToolOutput {
    ToolOutput::error(format!(
        "the call was cut at the output-token cap of {cap} tokens before its arguments were complete; make a smaller call"
    ))
}

/// The short tool error for a call whose arguments passed the cap (never echoing them).
fn oversized_arguments(name: &str, bytes: u64, max: u64) -> ToolOutput {
    ToolOutput::error(format!(
        "the arguments of this {name} call were {bytes} bytes, over the {max}-byte cap (tool_argument_bytes), and were dropped; send smaller arguments (e.g. write a large file in several edits)"
    ))
}

/// Records a result for each of `calls` that a budget left unrun, so the conversation
/// stays well formed for every protocol (each call answered).
pub fn answer_unrun(
    transcript: &mut Transcript,
    start: &StartRun,
    calls: &[ToolCall],
    reached: &Reached,
) -> Result<(), ErrorBody> {
    for call in calls {
        let mut entry = Entry::new(EntryType::ToolResult, "tool");
        entry.tool_call_id = Some(call.id.clone());
        entry.name = Some(call.name.clone());
        entry.content = Some(reached.unrun_call());
        entry.is_error = Some(true);
        entry.run_id = Some(start.run_id.to_string());
        transcript.append(entry).map_err(transcript_error)?;
    }
    Ok(())
}

/// Emits a `tool` event; `shown` is already a valid `ToolName` (see [`tool_name_for_event`]).
fn tool_event(run_id: &RunId, shown: &str, state: ToolState) {
    match ToolName::try_from(shown) {
        Ok(name) => emit::event(run_id, WorkerEvent::Tool { name, state }),
        Err(err) => tracing::error!(%err, "a sanitized tool name broke the contract"),
    }
}

/// The tool name as events may carry it: redacted, `[A-Za-z0-9_.:-]{1,256}`.
fn tool_name_for_event(name: &str) -> String {
    let shown: String = redact(name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.:-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(256)
        .collect();
    if shown.is_empty() {
        "_".to_owned()
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_tool_names_fit_the_schema() {
        assert_eq!(tool_name_for_event("read"), "read");
        assert_eq!(tool_name_for_event("rm -rf /"), "rm_-rf__");
        assert_eq!(tool_name_for_event(""), "_");
        assert_eq!(tool_name_for_event(&"x".repeat(300)).len(), 256);
    }

    #[test]
    fn only_a_whole_json_object_counts_as_whole_arguments() {
        assert!(whole_arguments(r#"{"path":"a"}"#));
        for cut in ["", "{", r#"{"command":"touch x"#, "[]", "null"] {
            assert!(!whole_arguments(cut), "{cut:?}");
        }
        let text = cut_arguments(64).text;
        assert!(text.contains("output-token cap of 64 tokens") && text.contains("smaller call"));
    }
}
