//! An Anthropic Messages API stand-in (`POST /v1/messages`, streamed) serving a scripted
//! parent model to Claude Code (`ANTHROPIC_BASE_URL=<origin>`).
//!
//! A turn is streamed as Claude Code reads it: `message_start`, one content block
//! (`text` with `text_delta`s, or `tool_use` with `input_json_delta`s), `message_delta` with
//! the stop reason (`end_turn` / `tool_use`) and `message_stop`. `…/count_tokens` is
//! answered with a fixed count; any other path or method gets 404 at once.
//!
//! ```no_run
//! use std::sync::Arc;
//! use subzero_testkit::parent::Act;
//! let server = subzero_testkit::messages::start(Arc::new(|_seen: &_| Act::say("Done."))).expect("server");
//! let base_url = server.origin(); // ANTHROPIC_BASE_URL
//! ```

use serde_json::{Value, json};

use crate::parent::{Act, Brain, Dialect, Exchange, ParentServer, pieces};
use crate::transcript::{Transcript, content_text, list, names, str_of};

/// Starts the stand-in on `127.0.0.1` at a free port.
pub fn start(brain: Brain) -> std::io::Result<ParentServer> {
    ParentServer::start(Box::new(Messages), brain)
}

struct Messages;

impl Dialect for Messages {
    fn exchange(&self, body: &Value) -> Exchange {
        let mut seen = Transcript::default();
        for message in list(body, "messages") {
            let role = message.get("role").and_then(Value::as_str);
            let blocks = match message.get("content") {
                Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
                Some(Value::Array(blocks)) => blocks.clone(),
                _ => Vec::new(),
            };
            for block in blocks {
                match (role, block.get("type").and_then(Value::as_str)) {
                    (Some("user"), Some("text")) => seen.user(str_of(&block, "text")),
                    (Some("assistant"), Some("tool_use")) => seen.call(
                        str_of(&block, "id"),
                        str_of(&block, "name"),
                        block.get("input").cloned().unwrap_or(Value::Null),
                    ),
                    (Some("user"), Some("tool_result")) => seen.result(
                        &str_of(&block, "tool_use_id"),
                        content_text(block.get("content").unwrap_or(&Value::Null)),
                    ),
                    _ => {}
                }
            }
        }
        seen.exchange(names(list(body, "tools"), "/name"))
    }

    fn events(&self, _body: &Value, act: &Act, n: u64) -> Vec<(&'static str, Value)> {
        let usage = json!({"input_tokens": 10, "output_tokens": 1});
        let mut events = vec![(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_testkit_{n}"), "type": "message", "role": "assistant",
                "model": "testkit", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage}}),
        )];
        let (block, deltas, stop) = match act {
            Act::Say(text) => (
                json!({"type": "text", "text": ""}),
                pieces(text)
                    .into_iter()
                    .map(|t| json!({"type": "text_delta", "text": t}))
                    .collect::<Vec<_>>(),
                "end_turn",
            ),
            Act::Call { tool, arguments } => (
                json!({"type": "tool_use", "id": format!("toolu_testkit_{n}"), "name": tool,
                       "input": {}}),
                pieces(&arguments.to_string())
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
                "tool_use",
            ),
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ));
        for delta in deltas {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            ));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        events.push((
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": 5}}),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        events
    }

    fn aside(&self, method: &str, path: &str) -> Option<(u16, Value)> {
        if method == "POST" && path.ends_with("/messages/count_tokens") {
            return Some((200, json!({"input_tokens": 10})));
        }
        if method == "POST" && path.ends_with("/messages") {
            return None;
        }
        Some((
            404,
            json!({"type": "error", "error": {"type": "not_found_error",
                   "message": "not served by the subzero testkit"}}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_is_paired_with_the_call_it_answers() {
        let body = json!({
            "tools": [{"name": "mcp__subzero__subzero_spawn"}],
            "messages": [
                {"role": "user", "content": "Delegate it."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
                    "name": "mcp__subzero__subzero_spawn", "input": {"prompt": "x"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "{\"childId\":\"ch_01A\"}"}]}]}
            ]
        });
        let seen = Messages.exchange(&body);
        assert_eq!(seen.prompt, "Delegate it.");
        assert!(seen.declares("mcp__subzero__subzero_spawn"));
        let spawn = seen.last_of("subzero_spawn").expect("a result");
        assert_eq!(spawn.id("ch_").as_deref(), Some("ch_01A"));
        assert_eq!(spawn.arguments, json!({"prompt": "x"}));
    }

    #[test]
    fn a_tool_call_streams_its_input_as_json_deltas() {
        let args = json!({"childId": "ch_1", "waitMs": 30000});
        let events = Messages.events(
            &json!({}),
            &Act::call("mcp__subzero__subzero_get", args.clone()),
            3,
        );
        let names: Vec<_> = events.iter().map(|(e, _)| *e).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(names.last(), Some(&"message_stop"));
        let joined: String = events
            .iter()
            .filter_map(|(_, d)| d.pointer("/delta/partial_json").and_then(Value::as_str))
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&joined).ok(), Some(args));
        assert!(
            events
                .iter()
                .any(|(_, d)| d.pointer("/delta/stop_reason") == Some(&json!("tool_use")))
        );
    }
}
