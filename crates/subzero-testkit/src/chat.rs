//! An OpenAI Chat Completions stand-in (`POST …/chat/completions`, streamed) serving a
//! scripted parent model to hosts that call a custom OpenAI-compatible provider (OpenCode
//! through `@ai-sdk/openai-compatible`, Pi through its `openai-completions` api).
//!
//! A turn is streamed as OpenAI does: `chat.completion.chunk`s carrying text deltas, or one
//! tool call whose arguments arrive in pieces, then the chunk with `finish_reason`
//! (`stop` / `tool_calls`) and a usage chunk. Any other path or method (a model list, …)
//! gets 404 at once. Unlike [`crate::ScriptedServer`], which replays a fixed list, the
//! [`Brain`] answers from the conversation, so it can wait on a child id it has just read.
//!
//! ```no_run
//! use std::sync::Arc;
//! use subzero_testkit::parent::Act;
//! let server = subzero_testkit::chat::start(Arc::new(|_seen: &_| Act::say("Done."))).expect("server");
//! let base_url = format!("{}/v1", server.origin()); // the provider's baseURL
//! ```

use serde_json::{Value, json};

use crate::parent::{Act, Brain, Dialect, Exchange, ParentServer, pieces};
use crate::transcript::{Transcript, content_text, encoded_json, list, names, str_at};

/// Starts the stand-in on `127.0.0.1` at a free port.
pub fn start(brain: Brain) -> std::io::Result<ParentServer> {
    ParentServer::start(Box::new(Chat), brain)
}

struct Chat;

impl Dialect for Chat {
    fn exchange(&self, body: &Value) -> Exchange {
        let mut seen = Transcript::default();
        for message in list(body, "messages") {
            let content = || content_text(message.get("content").unwrap_or(&Value::Null));
            match message.get("role").and_then(Value::as_str) {
                Some("user") => seen.user(content()),
                Some("assistant") => {
                    for call in list(message, "tool_calls") {
                        let arguments = encoded_json(call.pointer("/function/arguments"));
                        seen.call(
                            str_at(call, "/id"),
                            str_at(call, "/function/name"),
                            arguments,
                        );
                    }
                }
                Some("tool") => seen.result(&str_at(message, "/tool_call_id"), content()),
                _ => {}
            }
        }
        seen.exchange(names(list(body, "tools"), "/function/name"))
    }

    fn events(&self, _body: &Value, act: &Act, n: u64) -> Vec<(&'static str, Value)> {
        let chunk = |delta: Value, finish: Option<&str>| {
            (
                "chunk",
                json!({
                    "id": format!("chatcmpl-testkit-{n}"),
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "testkit-parent",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                }),
            )
        };
        let mut events = Vec::new();
        let finish = match act {
            Act::Say(text) => {
                events.push(chunk(json!({"role": "assistant", "content": ""}), None));
                for piece in pieces(text) {
                    events.push(chunk(json!({"content": piece}), None));
                }
                "stop"
            }
            Act::Call { tool, arguments } => {
                let arguments = arguments.to_string();
                let mut parts = pieces(&arguments).into_iter();
                let first = parts.next().unwrap_or_default();
                events.push(chunk(
                    json!({"role": "assistant", "tool_calls": [{
                        "index": 0, "id": format!("call_testkit_{n}"), "type": "function",
                        "function": {"name": tool, "arguments": first}
                    }]}),
                    None,
                ));
                for part in parts {
                    events.push(chunk(
                        json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                        None,
                    ));
                }
                "tool_calls"
            }
        };
        events.push(chunk(json!({}), Some(finish)));
        events.push((
            "chunk",
            json!({
                "id": format!("chatcmpl-testkit-{n}"), "object": "chat.completion.chunk",
                "created": 0, "model": "testkit-parent", "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            }),
        ));
        events
    }

    fn aside(&self, method: &str, path: &str) -> Option<(u16, Value)> {
        let turn = method == "POST" && path.ends_with("/chat/completions");
        (!turn).then(|| {
            (
                404,
                json!({"error": {"message": format!("no {method} {path} here")}}),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_is_paired_with_the_call_it_answers() {
        let body = json!({
            "tools": [{"type": "function", "function": {"name": "subzero_subzero_spawn"}}],
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "delegate"}]},
                {"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "subzero_subzero_spawn", "arguments": "{\"prompt\":\"x\"}"}
                }]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"childId\":\"ch_01AB\"}"}
            ]
        });
        let seen = Chat.exchange(&body);
        assert_eq!(seen.tools, ["subzero_subzero_spawn"]);
        assert_eq!(seen.prompt, "delegate");
        assert_eq!(seen.results.len(), 1);
        assert_eq!(seen.results[0].arguments, json!({"prompt": "x"}));
        assert_eq!(seen.results[0].id("ch_").as_deref(), Some("ch_01AB"));
    }

    #[test]
    fn a_call_streams_its_arguments_in_pieces_that_rejoin() {
        let act = Act::call("t", json!({"childId": "ch_1", "waitMs": 20000}));
        let events = Chat.events(&json!({}), &act, 7);
        let args: String = events
            .iter()
            .filter_map(|(_, e)| e.pointer("/choices/0/delta/tool_calls/0/function/arguments"))
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&args).expect("json"),
            json!({"childId": "ch_1", "waitMs": 20000})
        );
        let finish = events.iter().find_map(|(_, e)| {
            e.pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
        });
        assert_eq!(finish, Some("tool_calls"));
    }
}
