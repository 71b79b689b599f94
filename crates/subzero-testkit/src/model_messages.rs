//! Scripted Anthropic Messages replies for [`ScriptedServer`](crate::ScriptedServer), for a
//! child on `model.api = "anthropic-messages"` (the parent stand-in for Claude Code is
//! [`crate::messages`]).
//!
//! Every event is sent as Anthropic sends it, `event: <type>\ndata: <json>\n\n`, with the
//! same `type` inside the data. [`check_request`] refuses a request body the way the
//! Messages API does (roles, empty blocks, tool id pattern, `tool_use`/`tool_result`
//! pairing), so a test can assert that what the worker sent would have been accepted.
//!
//! ```no_run
//! use subzero_testkit::{ScriptedServer, model_messages as mm};
//! let server = ScriptedServer::start(vec![
//!     mm::tool_use("toolu_1", "read", r#"{"path":"README.md"}"#),
//!     mm::text("All done."),
//! ]).expect("server");
//! let url = server.base_url(); // …/v1: the worker appends /messages
//! ```

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::{Reply, Step, split};

/// One SSE event named as the `type` of `data`.
pub fn event(data: &Value) -> Step {
    Step::event(data)
}

/// `message_start` with `input_tokens` (and the initial `output_tokens: 1`).
pub fn message_start(input_tokens: u64) -> Step {
    event(&json!({"type": "message_start", "message": {
        "id": "msg_testkit", "type": "message", "role": "assistant", "model": "testkit",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}))
}

/// `content_block_start` of an empty text block.
pub fn text_start(index: u64) -> Step {
    event(&json!({"type": "content_block_start", "index": index,
                  "content_block": {"type": "text", "text": ""}}))
}

pub fn text_delta(index: u64, text: &str) -> Step {
    event(&json!({"type": "content_block_delta", "index": index,
                  "delta": {"type": "text_delta", "text": text}}))
}

/// `content_block_start` of a `tool_use` block (its input streams in [`input_delta`]s).
pub fn tool_use_start(index: u64, id: &str, name: &str) -> Step {
    event(&json!({"type": "content_block_start", "index": index,
                  "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))
}

pub fn input_delta(index: u64, partial_json: &str) -> Step {
    event(&json!({"type": "content_block_delta", "index": index,
                  "delta": {"type": "input_json_delta", "partial_json": partial_json}}))
}

/// A thinking block with one delta and its signature (to be kept out of the result).
pub fn thinking(index: u64, thought: &str) -> Vec<Step> {
    vec![
        event(&json!({"type": "content_block_start", "index": index,
                      "content_block": {"type": "thinking", "thinking": "", "signature": ""}})),
        event(&json!({"type": "content_block_delta", "index": index,
                      "delta": {"type": "thinking_delta", "thinking": thought}})),
        event(&json!({"type": "content_block_delta", "index": index,
                      "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJl"}})),
        block_stop(index),
    ]
}

pub fn block_stop(index: u64) -> Step {
    event(&json!({"type": "content_block_stop", "index": index}))
}

/// `message_delta` with `stop_reason` and the cumulative `output_tokens`.
pub fn message_delta(stop_reason: &str, output_tokens: u64) -> Step {
    event(&json!({"type": "message_delta",
                  "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                  "usage": {"output_tokens": output_tokens}}))
}

pub fn message_stop() -> Step {
    event(&json!({"type": "message_stop"}))
}

pub fn ping() -> Step {
    event(&json!({"type": "ping"}))
}

/// An `error` event, as sent mid-stream (`overloaded_error`, `api_error`, …).
pub fn error_event(kind: &str, message: &str) -> Step {
    event(&error_body(kind, message))
}

/// `{"type":"error","error":{"type","message"}}`, the body of an HTTP error and of an
/// `error` event.
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message},
           "request_id": "req_testkit"})
}

/// An HTTP error answer with an Anthropic error body (401 `authentication_error`, 429
/// `rate_limit_error`, 529 `overloaded_error`, …).
pub fn status(status: u16, kind: &str, message: &str) -> Reply {
    Reply::status(status, &error_body(kind, message).to_string())
}

/// A text answer in a few deltas: `end_turn`, 10 input and 5 output tokens.
pub fn text(text: &str) -> Reply {
    let mut steps = vec![message_start(10), text_start(0), ping()];
    steps.extend(split(text, 3).iter().map(|piece| text_delta(0, piece)));
    steps.extend([block_stop(0), message_delta("end_turn", 5), message_stop()]);
    Reply::Sse(steps)
}

/// One `tool_use` block whose input is split across three `input_json_delta`s.
pub fn tool_use(id: &str, name: &str, arguments: &str) -> Reply {
    tool_uses(&[(id, name, arguments)])
}

/// Several `tool_use` blocks in one message, each input split across deltas.
pub fn tool_uses(calls: &[(&str, &str, &str)]) -> Reply {
    let mut steps = vec![message_start(10)];
    steps.extend(tool_use_steps(0, calls));
    steps.extend([message_delta("tool_use", 5), message_stop()]);
    Reply::Sse(steps)
}

/// The content blocks of `calls`, from block `first` on.
pub fn tool_use_steps(first: u64, calls: &[(&str, &str, &str)]) -> Vec<Step> {
    let mut steps = Vec::new();
    for (n, (id, name, arguments)) in (first..).zip(calls) {
        steps.push(tool_use_start(n, id, name));
        steps.extend(
            split(arguments, 3)
                .iter()
                .map(|piece| input_delta(n, piece)),
        );
        steps.push(block_stop(n));
    }
    steps
}

/// Whether the Messages API would accept `body` as a request: `model`, `max_tokens`,
/// non-empty `messages` starting with `user` and alternating; content blocks with
/// non-blank text; tool ids matching `^[a-zA-Z0-9_-]+$`, unique; every `tool_use` answered
/// by a `tool_result` in the next (user) message, `tool_result`s first in it and answering
/// only those calls; tool definitions present when tool blocks are. `Err` says what broke.
pub fn check_request(body: &Value) -> Result<(), String> {
    check_parameters(body)?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;
    let mut pairing = ToolPairing::default();
    for (n, message) in messages.iter().enumerate() {
        pairing.check_message(n, message)?;
    }
    let declared = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    if pairing.tool_blocks && !declared {
        return Err("requests with tool_use or tool_result blocks must define tools".into());
    }
    if messages.last().and_then(|m| m.get("role")) != Some(&json!("user")) {
        return Err("the last message must be a user message".into());
    }
    Ok(())
}

/// `model` and `max_tokens` present, `system` not empty when present.
fn check_parameters(body: &Value) -> Result<(), String> {
    if !body.get("model").is_some_and(Value::is_string) {
        return Err("model is required".into());
    }
    if !body.get("max_tokens").is_some_and(Value::is_u64) {
        return Err("max_tokens is required".into());
    }
    if body.get("system").is_some_and(|s| s.as_str() == Some("")) {
        return Err("system must not be empty when present".into());
    }
    Ok(())
}

/// The tool calls of the conversation so far, carried from one message to the next.
#[derive(Default)]
struct ToolPairing {
    /// Every `tool_use` id seen, to refuse a repeat.
    ids: HashSet<String>,
    /// The calls of the last assistant message, which the next user message must answer.
    open: Vec<String>,
    /// Whether any `tool_use` or `tool_result` block was seen (tools must then be declared).
    tool_blocks: bool,
}

/// What one message has shown so far: the calls it answered, and whether a block other than
/// a `tool_result` came (after which no `tool_result` may).
#[derive(Default)]
struct Turn {
    answered: Vec<String>,
    seen_other: bool,
}

impl ToolPairing {
    /// Message `n`: its role in alternation, a non-empty block list, each block, and for a
    /// user message every open call answered.
    fn check_message(&mut self, n: usize, message: &Value) -> Result<(), String> {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let expected = if n.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        if role != expected {
            return Err(format!(
                "messages.{n}: roles must alternate starting with user"
            ));
        }
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
            .ok_or(format!("messages.{n}: content must be a non-empty list"))?;
        let mut turn = Turn::default();
        for (b, block) in blocks.iter().enumerate() {
            let at = format!("messages.{n}.content.{b}");
            self.check_block(role, &at, block, &mut turn)?;
        }
        if role == "user" {
            self.close(n, &turn.answered)?;
        }
        Ok(())
    }

    fn check_block(
        &mut self,
        role: &str,
        at: &str,
        block: &Value,
        turn: &mut Turn,
    ) -> Result<(), String> {
        match (role, block.get("type").and_then(Value::as_str)) {
            (_, Some("text")) => {
                turn.seen_other = true;
                check_text(at, block)
            }
            ("assistant", Some("tool_use")) => self.open_call(at, block),
            ("user", Some("tool_result")) => {
                let id = self.answer_call(at, block, turn.seen_other)?;
                turn.answered.push(id);
                Ok(())
            }
            (_, kind) => Err(format!(
                "{at}: unexpected block {kind:?} in a {role} message"
            )),
        }
    }

    /// A `tool_use` with a well-formed, unique id and an object input.
    fn open_call(&mut self, at: &str, block: &Value) -> Result<(), String> {
        self.tool_blocks = true;
        let id = block.get("id").and_then(Value::as_str).unwrap_or("");
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("{at}.id: {id:?} must match ^[a-zA-Z0-9_-]+$"));
        }
        if !self.ids.insert(id.to_owned()) {
            return Err(format!("{at}.id: tool_use ids must be unique ({id})"));
        }
        if !block.get("input").is_some_and(Value::is_object) {
            return Err(format!("{at}.input: must be an object"));
        }
        self.open.push(id.to_owned());
        Ok(())
    }

    /// A `tool_result` before any other block, answering an open call; gives the call's id.
    fn answer_call(&mut self, at: &str, block: &Value, seen_other: bool) -> Result<String, String> {
        self.tool_blocks = true;
        if seen_other {
            return Err(format!("{at}: tool_result blocks must come first"));
        }
        let id = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !self.open.iter().any(|o| o == id) {
            return Err(format!(
                "{at}: unexpected tool_use_id {id:?}; each tool_result must answer a tool_use of the previous message"
            ));
        }
        Ok(id.to_owned())
    }

    /// After user message `n`, no call of the previous message left unanswered.
    fn close(&mut self, n: usize, answered: &[String]) -> Result<(), String> {
        if let Some(missing) = self.open.iter().find(|o| !answered.contains(o)) {
            return Err(format!(
                "messages.{n}: tool_use ids were found without tool_result blocks immediately after: {missing}"
            ));
        }
        self.open.clear();
        Ok(())
    }
}

fn check_text(at: &str, block: &Value) -> Result<(), String> {
    let text = block.get("text").and_then(Value::as_str).unwrap_or("");
    if text.trim().is_empty() {
        return Err(format!("{at}: text content blocks must be non-empty"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_carry_their_type_as_the_event_name() {
        let Step::Raw(raw) = message_stop() else {
            panic!("a raw step");
        };
        assert_eq!(
            raw,
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
    }

    #[test]
    fn the_checker_refuses_what_the_api_refuses() {
        let tools = json!([{"name": "ls", "input_schema": {"type": "object"}}]);
        let good = json!({"model": "m", "max_tokens": 5, "tools": tools, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"},
                                         {"type": "text", "text": "steer"}]}]});
        assert_eq!(check_request(&good), Ok(()));
        let mut bad = good.clone();
        bad["messages"][2]["content"] = json!([{"type": "text", "text": "steer"},
                                               {"type": "tool_result", "tool_use_id": "t1"}]);
        assert!(check_request(&bad).is_err(), "results first");
        let mut bad = good.clone();
        bad["messages"][1]["content"][0]["id"] = json!("call:1");
        assert!(check_request(&bad).is_err(), "id pattern");
        let mut bad = good.clone();
        bad["messages"][2]["content"] = json!([{"type": "text", "text": "no result"}]);
        assert!(check_request(&bad).is_err(), "unanswered call");
        let mut bad = good;
        if let Some(fields) = bad.as_object_mut() {
            fields.remove("tools");
        }
        assert!(check_request(&bad).is_err(), "tools required");
    }
}
