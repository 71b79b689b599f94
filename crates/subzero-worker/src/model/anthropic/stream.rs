//! The Messages stream back into a [`ModelTurn`].
//!
//! Events are told apart by the `type` inside each `data:` payload (Anthropic repeats the
//! SSE `event:` name there, and the shared [`SseParser`](super::super::sse::SseParser)
//! ignores `event:` lines). Text blocks are streamed to `on_text`; `tool_use` blocks are
//! assembled from their `input_json_delta` pieces; `thinking` and `redacted_thinking`
//! blocks, `ping`, and event or delta types this reader does not know are skipped and never
//! reach the result. An `error` event fails the request with its type and message.

use std::collections::HashMap;

use serde::Deserialize;

use super::super::partial::Draft;
use super::super::protocol::{Assembler, Flow, OnText};
use super::super::wire::{self, ProviderError, lenient};
use super::super::{ModelError, ModelTurn, StreamBounds};

/// One stream event as read: the union of the fields the events this reader uses carry.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event {
    /// The content block an event is about.
    #[serde(deserialize_with = "lenient")]
    index: u64,
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Kind,
    #[serde(deserialize_with = "lenient")]
    message: StartedMessage,
    #[serde(deserialize_with = "lenient")]
    content_block: Option<ContentBlock>,
    #[serde(deserialize_with = "lenient")]
    delta: Delta,
    #[serde(deserialize_with = "lenient")]
    usage: Option<Usage>,
}

/// The event types this reader uses; any other is [`Kind::Other`] and skipped.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    MessageDelta,
    MessageStop,
    Error,
    /// `ping`, `content_block_stop`, and types added after this reader.
    #[default]
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StartedMessage {
    #[serde(deserialize_with = "lenient")]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ContentBlock {
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient")]
    id: String,
    #[serde(deserialize_with = "lenient")]
    name: String,
    /// A tool's input: any JSON, kept as its text when it is a non-empty object.
    input: Option<serde_json::Value>,
}

/// A `content_block_delta`'s or `message_delta`'s `delta`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient")]
    partial_json: Option<String>,
    #[serde(deserialize_with = "lenient")]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Usage {
    #[serde(deserialize_with = "lenient")]
    input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    cache_creation_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    cache_read_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    output_tokens: Option<u64>,
}

/// An Anthropic error object: `{"type":"error","error":{"type","message"}}`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorEnvelope {
    error: Option<ProviderError>,
}

/// One content block of the message, by its `index`.
#[derive(Debug)]
enum Block {
    Text,
    /// A `tool_use` block: the slot of its call.
    ToolUse(usize),
    /// Thinking, redacted thinking, or a block type this reader does not know.
    Skipped,
}

/// What the stream said so far.
#[derive(Debug)]
pub struct MessagesStream {
    draft: Draft,
    blocks: HashMap<u64, Block>,
    /// Per call slot: `input` of `content_block_start` when it was a non-empty object,
    /// used when no delta follows.
    initial: HashMap<usize, String>,
    /// `message_delta` carried a `stop_reason`: the content is whole even without
    /// `message_stop`.
    stopped: bool,
    saw_anything: bool,
}

impl Default for MessagesStream {
    fn default() -> Self {
        Self::new(StreamBounds::DEFAULT.max_tool_argument_bytes)
    }
}

impl MessagesStream {
    /// Input tokens are `input_tokens` plus the cache reads and writes (Anthropic counts
    /// them apart); `message_delta` carries cumulative counts, so a later value replaces an
    /// earlier one.
    fn usage(&mut self, usage: &Usage) {
        self.draft.turn.usage_reported = true;
        if let Some(input) = usage.input_tokens {
            self.draft.turn.input_tokens = input
                .saturating_add(usage.cache_creation_input_tokens.unwrap_or(0))
                .saturating_add(usage.cache_read_input_tokens.unwrap_or(0));
        }
        if let Some(output) = usage.output_tokens {
            self.draft.turn.output_tokens = output;
        }
    }

    fn start_block(&mut self, index: u64, block: ContentBlock, on_text: &mut OnText<'_>) {
        let block = match block.kind.as_deref() {
            Some("text") => {
                if let Some(text) = &block.text {
                    self.draft.text(text, on_text);
                }
                Block::Text
            }
            Some("tool_use") => {
                let slot = self.draft.calls.open();
                if let Some(call) = self.draft.calls.get_mut(slot) {
                    call.id_once(Some(&block.id));
                    call.name = block.name;
                }
                if let Some(input) = block
                    .input
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                {
                    self.initial.insert(slot, input.to_string());
                }
                Block::ToolUse(slot)
            }
            _ => Block::Skipped,
        };
        self.blocks.insert(index, block);
    }

    fn delta(&mut self, index: u64, delta: &Delta, on_text: &mut OnText<'_>) {
        let block = self.blocks.get(&index);
        match delta.kind.as_deref() {
            // A text delta for a block that never started is still text.
            Some("text_delta") if matches!(block, Some(Block::Text) | None) => {
                if let Some(text) = &delta.text {
                    self.draft.text(text, on_text);
                }
            }
            Some("input_json_delta") => {
                if let (Some(&Block::ToolUse(slot)), Some(piece)) = (block, &delta.partial_json) {
                    self.draft.calls.append(slot, piece);
                }
            }
            // thinking_delta, signature_delta, citations_delta, unknown ones.
            _ => {}
        }
    }
}

impl Assembler for MessagesStream {
    /// An assembler that drops a tool call's input once it passes `max_argument_bytes`.
    fn new(max_argument_bytes: u64) -> Self {
        Self {
            draft: Draft::new(max_argument_bytes),
            blocks: HashMap::new(),
            initial: HashMap::new(),
            stopped: false,
            saw_anything: false,
        }
    }

    fn draft(&self) -> &Draft {
        &self.draft
    }

    /// `message_stop` ends the answer.
    fn feed(&mut self, data: &str, on_text: &mut OnText<'_>) -> Result<Flow, ModelError> {
        let event: Event = wire::event(data)?;
        self.saw_anything = true;
        match event.kind {
            Kind::MessageStart => {
                if let Some(usage) = &event.message.usage {
                    self.usage(usage);
                }
            }
            Kind::ContentBlockStart => {
                let block = event.content_block.unwrap_or_default();
                self.start_block(event.index, block, on_text);
            }
            Kind::ContentBlockDelta => self.delta(event.index, &event.delta, on_text),
            Kind::MessageDelta => {
                if let Some(reason) = &event.delta.stop_reason {
                    self.stopped = true;
                    // `max_tokens` is the output-token cap run.rs reports as such.
                    let reason = if reason == "max_tokens" {
                        "length"
                    } else {
                        reason
                    };
                    self.draft.turn.finish_reason = Some(reason.to_owned());
                }
                if let Some(usage) = &event.usage {
                    self.usage(usage);
                }
            }
            Kind::MessageStop => return Ok(Flow::Done),
            Kind::Error => {
                let text = error_text(data).unwrap_or_else(|| data.to_owned());
                if wire::overflows(data) {
                    return Err(wire::exhausted(&text));
                }
                return Err(wire::failed(&text));
            }
            Kind::Other => {}
        }
        Ok(Flow::More)
    }

    fn finish(mut self) -> ModelTurn {
        let max = self.draft.calls.max_argument_bytes();
        // A message cut at `max_tokens` may end in a tool_use whose input never began: its
        // arguments stay empty (incomplete), not `{}`, so the call is not run as if whole.
        let cut = self.draft.turn.finish_reason.as_deref() == Some("length");
        let last = self.draft.calls.last();
        for slot in 0..last.map_or(0, |last| last + 1) {
            let empty = self
                .draft
                .calls
                .get(slot)
                .is_some_and(|c| c.has_no_arguments(max));
            if !empty {
                continue;
            }
            // Anthropic starts a tool_use with `input: {}` and streams the input; a block
            // that carries its input whole at the start keeps that.
            match self.initial.remove(&slot) {
                Some(initial) => self.draft.calls.replace(slot, &initial),
                None if cut && Some(slot) == last => {}
                None => self.draft.calls.replace(slot, "{}"),
            }
        }
        self.draft.finish("toolu")
    }

    /// Without `message_stop` only a `stop_reason` says the answer is whole.
    fn end(self) -> Result<ModelTurn, ModelError> {
        if !self.saw_anything {
            return Err(ModelError::Stream(
                "the stream ended without a single event".to_owned(),
            ));
        }
        if !self.stopped {
            return Err(ModelError::Stream(
                "the stream ended before the model finished (no message_stop and no stop_reason)"
                    .to_owned(),
            ));
        }
        Ok(self.finish())
    }
}

/// `type: message` of an Anthropic error object, from an `error` event or an HTTP error
/// body; `None` when `body` is not one.
pub fn error_text(body: &str) -> Option<String> {
    let error = serde_json::from_str::<ErrorEnvelope>(body).ok()?.error?;
    if !error.is_object() {
        return None;
    }
    match (error.kind(), error.message()) {
        (Some(kind), Some(message)) => Some(format!("{kind}: {message}")),
        (None, Some(message)) => Some(message),
        (Some(kind), None) => Some(kind),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn feed(events: &[Value]) -> (ModelTurn, String, bool) {
        let mut a = MessagesStream::default();
        let mut streamed = String::new();
        let mut done = false;
        for e in events {
            done = a
                .feed(&e.to_string(), &mut |t: &str| streamed.push_str(t))
                .expect("event")
                == Flow::Done;
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
        let mut a = MessagesStream::default();
        let mut sink = |_: &str| {};
        let event =
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        let err = a.feed(&event.to_string(), &mut sink).expect_err("fails");
        assert_eq!(
            err.to_string(),
            "model stream was unusable: overloaded_error: Overloaded"
        );
    }

    #[test]
    fn non_json_data_fails() {
        let mut a = MessagesStream::default();
        let mut sink = |_: &str| {};
        assert!(a.feed("not json", &mut sink).is_err());
    }

    #[test]
    fn input_over_the_cap_is_dropped_and_counted() {
        let mut a = MessagesStream::new(8);
        let mut sink = |_: &str| {};
        let start = json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"read","input":{}}});
        a.feed(&start.to_string(), &mut sink).expect("start");
        for piece in ["{\"path\"", ":\"aaaa", "aaaa\"}"] {
            let e = json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":piece}});
            a.feed(&e.to_string(), &mut sink).expect("delta");
        }
        let turn = a.finish();
        assert_eq!(turn.tool_calls[0].arguments, "");
        assert_eq!(turn.tool_calls[0].oversized, Some(19));
    }
}
