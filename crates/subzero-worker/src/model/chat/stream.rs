//! The Chat Completions stream back into a [`ModelTurn`]: text from `content` only, tool
//! calls from their deltas by `index` (else by `id`), usage from the last chunk.

use std::collections::HashMap;

use serde::Deserialize;

use super::super::partial::{Calls, Draft};
use super::super::protocol::{Assembler, Flow, OnText};
use super::super::wire::{self, ProviderError, lenient};
use super::super::{ModelError, ModelTurn};

/// One `chat.completion.chunk` as read.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Chunk {
    #[serde(deserialize_with = "lenient")]
    choices: Vec<Choice>,
    #[serde(deserialize_with = "lenient")]
    usage: Option<Usage>,
    error: Option<ProviderError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    #[serde(deserialize_with = "lenient")]
    finish_reason: Option<String>,
    #[serde(deserialize_with = "lenient")]
    delta: Option<Delta>,
    /// What some servers send instead of `delta`.
    #[serde(deserialize_with = "lenient")]
    message: Option<Delta>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    #[serde(deserialize_with = "lenient")]
    content: Option<Content>,
    #[serde(deserialize_with = "lenient")]
    tool_calls: Vec<CallDelta>,
}

/// `content`: a string, or a list of parts of which only `text` ones are text.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Part {
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CallDelta {
    #[serde(deserialize_with = "lenient")]
    index: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    function: FunctionDelta,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FunctionDelta {
    #[serde(deserialize_with = "lenient")]
    name: Option<String>,
    /// A string piece; a server that sends an object sends its JSON.
    arguments: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Usage {
    #[serde(deserialize_with = "lenient")]
    prompt_tokens: u64,
    #[serde(deserialize_with = "lenient")]
    completion_tokens: u64,
}

/// Assembles text and tool calls from chunks.
#[derive(Debug)]
pub struct ChatStream {
    draft: Draft,
    by_index: HashMap<u64, usize>,
    saw_anything: bool,
}

impl Default for ChatStream {
    fn default() -> Self {
        Self::new(super::super::StreamBounds::DEFAULT.max_tool_argument_bytes)
    }
}

impl ChatStream {
    fn tool_delta(&mut self, call: CallDelta) {
        let id = call.id.as_deref().filter(|s| !s.is_empty());
        let slot = self.slot(call.index, id);
        if let Some(partial) = self.draft.calls.get_mut(slot) {
            partial.id_once(id);
            partial.name_once(call.function.name.as_deref());
        }
        match call.function.arguments {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::String(piece)) => self.draft.calls.append(slot, &piece),
            Some(other) => self.draft.calls.append(slot, &other.to_string()),
        }
    }

    /// Which call a delta belongs to: by `index` when present (a new `id` on a used index
    /// starts a new call), else a new `id` starts a new call and no `id` continues the last.
    fn slot(&mut self, index: Option<u64>, id: Option<&str>) -> usize {
        let differs = |slot: usize, calls: &Calls| match (
            calls.get(slot).and_then(|c| c.id.as_deref()),
            id,
        ) {
            (Some(have), Some(new)) => have != new,
            _ => false,
        };
        match index {
            Some(index) => match self.by_index.get(&index) {
                Some(&slot) if !differs(slot, &self.draft.calls) => slot,
                _ => {
                    let slot = self.draft.calls.open();
                    self.by_index.insert(index, slot);
                    slot
                }
            },
            None => match self.draft.calls.last() {
                Some(slot) if id.is_none() || !differs(slot, &self.draft.calls) => slot,
                _ => self.draft.calls.open(),
            },
        }
    }
}

impl Assembler for ChatStream {
    fn new(max_argument_bytes: u64) -> Self {
        Self {
            draft: Draft::new(max_argument_bytes),
            by_index: HashMap::new(),
            saw_anything: false,
        }
    }

    /// `[DONE]` ends the answer.
    fn feed(&mut self, data: &str, on_text: &mut OnText<'_>) -> Result<Flow, ModelError> {
        let data = match data.trim() {
            "[DONE]" => return Ok(Flow::Done),
            data => data,
        };
        // Keep-alives are SSE comment lines, which the parser already drops; a `data:`
        // payload that is not JSON is a broken stream, not something to skip over.
        let chunk: Chunk = wire::event(data)?;
        if let Some(error) = chunk.error.filter(ProviderError::is_object) {
            if error.is_context_overflow() {
                return Err(wire::exhausted(
                    &error.message().unwrap_or_else(|| error.raw()),
                ));
            }
            return Err(wire::failed(
                &error.message().unwrap_or_else(|| error.raw()),
            ));
        }
        self.saw_anything = true;
        if let Some(usage) = chunk.usage {
            self.draft
                .usage(usage.prompt_tokens, usage.completion_tokens);
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(Flow::More);
        };
        if let Some(reason) = choice.finish_reason {
            self.draft.turn.finish_reason = Some(reason);
        }
        let Some(delta) = choice.delta.or(choice.message) else {
            return Ok(Flow::More);
        };
        // Only `content` is text; `reasoning_content`, `reasoning` and the like are not read.
        match delta.content {
            Some(Content::Text(text)) => self.draft.text(&text, on_text),
            Some(Content::Parts(parts)) => {
                for part in parts {
                    if part.kind.as_deref() == Some("text")
                        && let Some(text) = part.text
                    {
                        self.draft.text(&text, on_text);
                    }
                }
            }
            None => {}
        }
        for call in delta.tool_calls {
            self.tool_delta(call);
        }
        Ok(Flow::More)
    }

    fn draft(&self) -> &Draft {
        &self.draft
    }

    fn finish(self) -> ModelTurn {
        self.draft.finish("call")
    }

    /// Without `[DONE]` a `finish_reason` is the only sign the answer is whole.
    fn end(self) -> Result<ModelTurn, ModelError> {
        if !self.saw_anything {
            return Err(ModelError::Stream(
                "the stream ended without a single completion chunk".to_owned(),
            ));
        }
        if self.draft.turn.finish_reason.is_none() {
            return Err(ModelError::Stream(
                "the stream ended before the model finished (no finish_reason and no [DONE])"
                    .to_owned(),
            ));
        }
        Ok(self.finish())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn feed(events: &[Value]) -> ModelTurn {
        let mut a = ChatStream::default();
        let mut sink = |_: &str| {};
        for e in events {
            a.feed(&e.to_string(), &mut sink).expect("event");
        }
        a.finish()
    }

    #[test]
    fn tool_call_split_across_chunks_without_index() {
        let turn = feed(&[
            json!({"choices":[{"delta":{"tool_calls":[{"id":"c1","function":{"name":"read","arguments":"{\"pa"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"th\":\"a\"}"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"id":"c2","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"weird"}]}),
        ]);
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[0].arguments, "{\"path\":\"a\"}");
        assert_eq!(turn.tool_calls[1].name, "ls");
        assert_eq!(turn.finish_reason.as_deref(), Some("weird"));
    }

    #[test]
    fn indexed_parallel_calls() {
        let turn = feed(&[
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"read","arguments":""}},{"index":1,"id":"b","function":{"name":"ls","arguments":"{"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"}"}},{"index":0,"function":{"arguments":"{}"}}]}}]}),
        ]);
        assert_eq!(turn.tool_calls[0].arguments, "{}");
        assert_eq!(turn.tool_calls[1].arguments, "{}");
    }

    #[test]
    fn arguments_over_the_cap_are_dropped_and_counted() {
        let mut a = ChatStream::new(8);
        let mut sink = |_: &str| {};
        for piece in ["{\"path\"", ":\"aaaa", "aaaa\"}"] {
            let event = json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read","arguments":piece}}]}}]});
            a.feed(&event.to_string(), &mut sink).expect("event");
        }
        let turn = a.finish();
        assert_eq!(turn.tool_calls.len(), 1);
        assert_eq!(turn.tool_calls[0].arguments, "");
        assert_eq!(turn.tool_calls[0].oversized, Some(19));
        let mut a = ChatStream::new(64);
        let event = json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"ls","arguments":"{}"}}]}}]});
        a.feed(&event.to_string(), &mut sink).expect("event");
        let turn = a.finish();
        assert_eq!(turn.tool_calls[0].oversized, None);
        assert_eq!(turn.tool_calls[0].arguments, "{}");
    }

    /// Feeds `events` and returns the turn and everything `on_text` saw.
    fn feed_seen(events: &[Value]) -> (ModelTurn, String) {
        let mut a = ChatStream::default();
        let mut seen = String::new();
        let mut sink = |t: &str| seen.push_str(t);
        for e in events {
            a.feed(&e.to_string(), &mut sink).expect("event");
        }
        (a.finish(), seen)
    }

    #[test]
    fn reasoning_deltas_are_never_text() {
        let (turn, seen) = feed_seen(&[
            json!({"choices":[{"delta":{"role":"assistant","content":null}}]}),
            json!({"choices":[{"delta":{"reasoning_content":"vllm thinks "}}]}),
            json!({"choices":[{"delta":{"content":"","reasoning":"ollama thinks "}}]}),
            json!({"choices":[{"delta":{"reasoning":"openrouter thinks","reasoning_details":[{"type":"reasoning.text","text":"x"}]}}]}),
            json!({"choices":[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"mistral thinks"}]}]}}]}),
            json!({"choices":[{"delta":{"content":"The answer"}}]}),
            json!({"choices":[{"delta":{"content":[{"type":"text","text":" is 4."}]}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"stop"}]}),
        ]);
        assert_eq!(turn.text, "The answer is 4.");
        assert_eq!(seen, "The answer is 4.");
        assert_eq!(turn.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn a_turn_of_only_reasoning_has_no_text() {
        let (turn, seen) = feed_seen(&[
            json!({"choices":[{"delta":{"reasoning_content":"hmm"}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"stop"}]}),
        ]);
        assert_eq!((turn.text.as_str(), seen.as_str()), ("", ""));
    }

    #[test]
    fn usage_null_in_the_chunks_before_the_last_is_no_usage() {
        let (turn, _) = feed_seen(&[
            json!({"choices":[{"delta":{"content":"hi"}}],"usage":null}),
            json!({"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}),
            json!({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}),
        ]);
        assert_eq!((turn.input_tokens, turn.output_tokens), (9, 4));
    }
}
