//! The Messages stream back into a [`ModelTurn`].
//!
//! Events are told apart by the `type` inside each `data:` payload (Anthropic repeats the
//! SSE `event:` name there, and the shared [`SseParser`](super::super::sse::SseParser)
//! ignores `event:` lines). Text blocks are streamed to `on_text`; `tool_use` blocks are
//! assembled from their `input_json_delta` pieces; `thinking` and `redacted_thinking`
//! blocks, `ping`, and event or delta types this reader does not know are skipped and never
//! reach the result. An `error` event fails the request with its type and message.

use std::collections::HashMap;

use serde_json::Value;

use super::super::{ModelError, ModelTurn, StreamBounds, ToolCall};
use crate::redact::redact;

/// One content block of the message, by its `index`.
#[derive(Debug)]
enum Block {
    Text,
    /// A `tool_use` block: the slot of its call in [`Assembler::calls`].
    ToolUse(usize),
    /// Thinking, redacted thinking, or a block type this reader does not know.
    Skipped,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    /// `input` of `content_block_start` when it was not empty, used when no delta follows.
    initial: Option<String>,
    arguments: String,
    /// Bytes of `partial_json` received, kept counting after the cap.
    argument_bytes: u64,
}

/// What the stream said so far.
#[derive(Debug)]
pub struct Assembler {
    turn: ModelTurn,
    blocks: HashMap<u64, Block>,
    calls: Vec<PartialCall>,
    max_argument_bytes: u64,
    /// `message_delta` carried a `stop_reason`: the content is whole even without
    /// `message_stop`.
    stopped: bool,
    saw_anything: bool,
}

impl Default for Assembler {
    fn default() -> Self {
        Self::new(StreamBounds::DEFAULT.max_tool_argument_bytes)
    }
}

impl Assembler {
    /// An assembler that drops a tool call's input once it passes `max_argument_bytes`.
    pub fn new(max_argument_bytes: u64) -> Self {
        Self {
            turn: ModelTurn::default(),
            blocks: HashMap::new(),
            calls: Vec::new(),
            max_argument_bytes,
            stopped: false,
            saw_anything: false,
        }
    }

    /// Handles one SSE payload; returns true at `message_stop`.
    pub fn event(
        &mut self,
        data: &str,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, ModelError> {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            return Err(ModelError::Stream(format!(
                "a stream event of {} bytes was not JSON",
                data.len()
            )));
        };
        self.saw_anything = true;
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "message_start" => {
                if let Some(usage) = event.pointer("/message/usage") {
                    self.usage(usage);
                }
            }
            "content_block_start" => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                self.start_block(index, block, on_text);
            }
            "content_block_delta" => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                self.delta(index, delta, on_text);
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stopped = true;
                    // `max_tokens` is the output-token cap run.rs reports as such.
                    let reason = if reason == "max_tokens" {
                        "length"
                    } else {
                        reason
                    };
                    self.turn.finish_reason = Some(reason.to_owned());
                }
                if let Some(usage) = event.get("usage") {
                    self.usage(usage);
                }
            }
            "message_stop" => return Ok(true),
            "error" => return Err(stream_error(&event)),
            // `ping`, `content_block_stop`, and types added after this reader.
            _ => {}
        }
        Ok(false)
    }

    /// Input tokens are `input_tokens` plus the cache reads and writes (Anthropic counts
    /// them apart); `message_delta` carries cumulative counts, so a later value replaces an
    /// earlier one.
    fn usage(&mut self, usage: &Value) {
        let field = |name: &str| usage.get(name).and_then(Value::as_u64);
        if usage.is_object() {
            self.turn.usage_reported = true;
        }
        if let Some(input) = field("input_tokens") {
            self.turn.input_tokens = input
                .saturating_add(field("cache_creation_input_tokens").unwrap_or(0))
                .saturating_add(field("cache_read_input_tokens").unwrap_or(0));
        }
        if let Some(output) = field("output_tokens") {
            self.turn.output_tokens = output;
        }
    }

    fn start_block(&mut self, index: u64, block: &Value, on_text: &mut (dyn FnMut(&str) + Send)) {
        let block = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    self.text(text, on_text);
                }
                Block::Text
            }
            Some("tool_use") => {
                let text = |name: &str| {
                    block
                        .get(name)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let initial = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string);
                self.calls.push(PartialCall {
                    id: text("id"),
                    name: text("name"),
                    initial,
                    ..PartialCall::default()
                });
                Block::ToolUse(self.calls.len() - 1)
            }
            _ => Block::Skipped,
        };
        self.blocks.insert(index, block);
    }

    fn delta(&mut self, index: u64, delta: &Value, on_text: &mut (dyn FnMut(&str) + Send)) {
        let block = self.blocks.get(&index);
        match delta.get("type").and_then(Value::as_str) {
            // A text delta for a block that never started is still text.
            Some("text_delta") if matches!(block, Some(Block::Text) | None) => {
                if let Some(text) = delta.get("text").and_then(Value::as_str) {
                    self.text(text, on_text);
                }
            }
            Some("input_json_delta") => {
                if let (Some(&Block::ToolUse(slot)), Some(piece)) =
                    (block, delta.get("partial_json").and_then(Value::as_str))
                {
                    self.input_piece(slot, piece);
                }
            }
            // thinking_delta, signature_delta, citations_delta, unknown ones.
            _ => {}
        }
    }

    fn text(&mut self, text: &str, on_text: &mut (dyn FnMut(&str) + Send)) {
        if !text.is_empty() {
            self.turn.text.push_str(text);
            on_text(text);
        }
    }

    fn input_piece(&mut self, slot: usize, piece: &str) {
        let max = self.max_argument_bytes;
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        let bytes = u64::try_from(piece.len()).unwrap_or(u64::MAX);
        call.argument_bytes = call.argument_bytes.saturating_add(bytes);
        if call.argument_bytes <= max {
            call.arguments.push_str(piece);
        } else {
            // Over the cap: keep counting, keep nothing (memory stays flat).
            call.arguments = String::new();
        }
    }

    /// Whether the stream said the message is whole: `message_delta` with a `stop_reason`.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    pub fn saw_anything(&self) -> bool {
        self.saw_anything
    }

    /// Bytes of text so far.
    pub fn text_len(&self) -> usize {
        self.turn.text.len()
    }

    pub fn finish(mut self) -> ModelTurn {
        let max = self.max_argument_bytes;
        // A message cut at `max_tokens` may end in a tool_use whose input never began: its
        // arguments stay empty (incomplete), not `{}`, so the call is not run as if whole.
        let cut = self.turn.finish_reason.as_deref() == Some("length");
        let last = self.calls.len().checked_sub(1);
        self.turn.tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(n, c)| {
                let oversized = (c.argument_bytes > max).then_some(c.argument_bytes);
                // Anthropic starts a tool_use with `input: {}` and streams the input;
                // a block that carries its input whole at the start keeps that.
                let arguments = if oversized.is_some() {
                    String::new()
                } else if !c.arguments.trim().is_empty() {
                    c.arguments
                } else if cut && Some(n) == last && c.initial.is_none() {
                    String::new()
                } else {
                    c.initial.unwrap_or_else(|| "{}".to_owned())
                };
                ToolCall {
                    id: if c.id.is_empty() {
                        format!("toolu_{n}")
                    } else {
                        c.id
                    },
                    name: c.name,
                    arguments,
                    oversized,
                }
            })
            .collect();
        self.turn
    }
}

/// An `error` event (`{"type":"error","error":{"type","message"}}`) as a failed request.
fn stream_error(event: &Value) -> ModelError {
    ModelError::Stream(redact(
        &error_text(event).unwrap_or_else(|| event.to_string()),
    ))
}

/// `type: message` of an Anthropic error object, from an `error` event or an HTTP error
/// body; `None` when `value` is not one.
pub fn error_text(value: &Value) -> Option<String> {
    let error = value.get("error")?;
    let kind = error.get("type").and_then(Value::as_str);
    let message = error.get("message").and_then(Value::as_str);
    match (kind, message) {
        (Some(kind), Some(message)) => Some(format!("{kind}: {message}")),
        (None, Some(message)) => Some(message.to_owned()),
        (Some(kind), None) => Some(kind.to_owned()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn feed(events: &[Value]) -> (ModelTurn, String, bool) {
        let mut a = Assembler::default();
        let mut streamed = String::new();
        let mut done = false;
        for e in events {
            done = a
                .event(&e.to_string(), &mut |t: &str| streamed.push_str(t))
                .expect("event");
        }
        (a.finish(), streamed, done)
    }

    fn start(input_tokens: u64) -> Value {
        json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",
               "content":[],"model":"m","stop_reason":null,"stop_sequence":null,
               "usage":{"input_tokens":input_tokens,"output_tokens":1}}})
    }

    fn stop(reason: &str, output_tokens: u64) -> Value {
        json!({"type":"message_delta","delta":{"stop_reason":reason,"stop_sequence":null},
               "usage":{"output_tokens":output_tokens}})
    }

    #[test]
    fn text_streams_and_usage_is_read() {
        let (turn, streamed, done) = feed(&[
            start(25),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"ping"}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}),
            json!({"type":"content_block_stop","index":0}),
            stop("end_turn", 15),
            json!({"type":"message_stop"}),
        ]);
        assert!(done);
        assert_eq!(turn.text, "Hello");
        assert_eq!(streamed, "Hello");
        assert_eq!((turn.input_tokens, turn.output_tokens), (25, 15));
        assert_eq!(turn.finish_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn two_tool_uses_are_assembled_from_their_json_pieces() {
        let (turn, _, _) = feed(&[
            start(5),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Looking."}}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"read","input":{}}}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_b","name":"ls","input":{}}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"th\":\"a\"}"}}),
            stop("tool_use", 9),
        ]);
        assert_eq!(turn.text, "Looking.");
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[0].id, "toolu_a");
        assert_eq!(turn.tool_calls[0].arguments, "{\"path\":\"a\"}");
        assert_eq!(turn.tool_calls[1].name, "ls");
        assert_eq!(turn.tool_calls[1].arguments, "{}");
    }

    #[test]
    fn a_tool_use_without_deltas_keeps_its_start_input_or_is_empty() {
        let (turn, _, _) = feed(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"ls","input":{"path":"src"}}}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"","name":"ls","input":{}}}),
            stop("tool_use", 1),
        ]);
        assert_eq!(turn.tool_calls[0].arguments, r#"{"path":"src"}"#);
        assert_eq!(turn.tool_calls[1].arguments, "{}");
        assert_eq!(turn.tool_calls[1].id, "toolu_1");
    }

    #[test]
    fn thinking_is_kept_out_of_the_result() {
        let (turn, streamed, _) = feed(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"secret plan"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xx"}}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"answer"}}),
            stop("end_turn", 3),
        ]);
        assert_eq!(turn.text, "answer");
        assert_eq!(streamed, "answer");
        assert!(turn.tool_calls.is_empty());
    }

    #[test]
    fn max_tokens_is_reported_as_length() {
        let (turn, _, _) = feed(&[start(1), stop("max_tokens", 8192)]);
        assert_eq!(turn.finish_reason.as_deref(), Some("length"));
        assert_eq!(turn.output_tokens, 8192);
    }

    #[test]
    fn cache_tokens_count_as_input_and_later_usage_replaces_earlier() {
        let (turn, _, _) = feed(&[
            json!({"type":"message_start","message":{"usage":{"input_tokens":3,"cache_read_input_tokens":100,"cache_creation_input_tokens":7,"output_tokens":1}}}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}),
        ]);
        assert_eq!((turn.input_tokens, turn.output_tokens), (110, 12));
    }

    #[test]
    fn an_error_event_fails_with_its_type_and_message() {
        let mut a = Assembler::default();
        let mut sink = |_: &str| {};
        let event =
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        let err = a.event(&event.to_string(), &mut sink).expect_err("fails");
        assert_eq!(
            err.to_string(),
            "model stream was unusable: overloaded_error: Overloaded"
        );
    }

    #[test]
    fn non_json_data_fails() {
        let mut a = Assembler::default();
        let mut sink = |_: &str| {};
        assert!(a.event("not json", &mut sink).is_err());
    }

    #[test]
    fn input_over_the_cap_is_dropped_and_counted() {
        let mut a = Assembler::new(8);
        let mut sink = |_: &str| {};
        let start = json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"read","input":{}}});
        a.event(&start.to_string(), &mut sink).expect("start");
        for piece in ["{\"path\"", ":\"aaaa", "aaaa\"}"] {
            let e = json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":piece}});
            a.event(&e.to_string(), &mut sink).expect("delta");
        }
        let turn = a.finish();
        assert_eq!(turn.tool_calls[0].arguments, "");
        assert_eq!(turn.tool_calls[0].oversized, Some(19));
    }
}
