//! The Responses stream back into a [`ModelTurn`]: events told apart by the `type` inside
//! each `data:` payload; text and calls keyed by `item_id`, else `output_index`.

use std::collections::{HashMap, HashSet};

use super::super::partial::Draft;
use super::super::protocol::{Assembler, Flow, OnText};
use super::super::wire::{self, ProviderError};
use super::super::{ModelError, ModelTurn};
use super::wire::{Event, OutputItem, Response};

/// Assembles one answer from Responses stream events.
#[derive(Debug)]
pub struct ResponsesStream {
    draft: Draft,
    by_item: HashMap<String, usize>,
    by_output: HashMap<u64, usize>,
    /// Message items whose text arrived as deltas (their `.done` adds nothing).
    texted: HashSet<String>,
    /// The message item the last text came from: text of the next one starts a paragraph.
    last_text_item: Option<String>,
    /// Text deltas came without an `item_id`: a message's `.done` cannot be told apart
    /// from them, so it adds nothing.
    anonymous_text: bool,
    events: u64,
}

impl ResponsesStream {
    /// Handles one parsed event.
    fn event(
        &mut self,
        event: Event,
        data: &str,
        on_text: &mut OnText<'_>,
    ) -> Result<Flow, ModelError> {
        match event.kind.as_str() {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(delta) = &event.delta {
                    self.text(event.item_id.as_deref(), delta, on_text);
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                let done = event.kind == "response.output_item.done";
                if let Some(item) = &event.item {
                    self.item(item, event.output_index, done, on_text);
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(delta) = &event.delta {
                    let slot = self.slot(event.item_id.as_deref(), event.output_index);
                    self.draft.calls.append(slot, delta);
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(arguments) = &event.arguments {
                    let slot = self.slot(event.item_id.as_deref(), event.output_index);
                    self.draft.calls.replace(slot, arguments);
                }
            }
            "response.completed" | "response.incomplete" => {
                self.ended(&event);
                return Ok(Flow::Done);
            }
            "response.failed" | "error" => return Err(failure(event, data)),
            "" if event.error.as_ref().is_some_and(ProviderError::is_object) => {
                return Err(failure(event, data));
            }
            // Lifecycle (`response.created`, `.in_progress`, `.queued`), reasoning, content
            // parts, annotations and anything newer: nothing to keep.
            _ => {}
        }
        Ok(Flow::More)
    }

    /// `response.completed` (`stop`, or `tool_calls` when it made calls) or
    /// `response.incomplete` (its reason; `max_output_tokens` is `length`).
    fn ended(&mut self, event: &Event) {
        let response = &event.response;
        self.usage(response);
        let reason = if event.kind == "response.completed" {
            self.unseen_calls(response);
            if self.draft.calls.any() {
                "tool_calls"
            } else {
                "stop"
            }
            .to_owned()
        } else {
            match response
                .incomplete_details
                .as_ref()
                .and_then(|d| d.reason.as_deref())
            {
                Some("max_output_tokens") => "length".to_owned(),
                Some(reason) => reason.to_owned(),
                None => "incomplete".to_owned(),
            }
        };
        self.draft.turn.finish_reason = Some(reason);
    }

    fn text(&mut self, item: Option<&str>, delta: &str, on_text: &mut OnText<'_>) {
        if delta.is_empty() {
            return;
        }
        if let Some(item) = item {
            let other = self
                .last_text_item
                .as_deref()
                .is_some_and(|last| last != item);
            if other && !self.draft.turn.text.is_empty() {
                self.draft.turn.text.push_str("\n\n");
                on_text("\n\n");
            }
            self.texted.insert(item.to_owned());
            self.last_text_item = Some(item.to_owned());
        } else {
            self.anonymous_text = true;
        }
        self.draft.turn.text.push_str(delta);
        on_text(delta);
    }

    /// `response.output_item.added` / `.done`: a call's id and name (and, at `.done`, its
    /// whole arguments); a message's text when no delta carried it.
    fn item(
        &mut self,
        item: &OutputItem,
        index: Option<u64>,
        done: bool,
        on_text: &mut OnText<'_>,
    ) {
        match item.kind.as_deref() {
            Some("function_call") => {
                let slot = self.slot(item.id.as_deref(), index);
                self.fill_call(slot, item);
                if let Some(arguments) = &item.arguments
                    && (done || !arguments.is_empty())
                {
                    self.draft.calls.replace(slot, arguments);
                }
            }
            Some("message") if done => {
                let id = item.id.as_deref();
                let streamed = match id {
                    Some(id) => self.texted.contains(id) || self.anonymous_text,
                    None => !self.draft.turn.text.is_empty(),
                };
                if !streamed {
                    self.text(id, &message_text(item), on_text);
                }
            }
            _ => {}
        }
    }

    /// The call an event belongs to: by item id, else by output index; a new one otherwise.
    fn slot(&mut self, item: Option<&str>, index: Option<u64>) -> usize {
        let known = item
            .and_then(|id| self.by_item.get(id))
            .or_else(|| index.and_then(|i| self.by_output.get(&i)))
            .copied();
        let slot = known.unwrap_or_else(|| self.draft.calls.open());
        if let Some(id) = item {
            self.by_item.entry(id.to_owned()).or_insert(slot);
            if let Some(call) = self.draft.calls.get_mut(slot)
                && call.key.is_none()
            {
                call.key = Some(id.to_owned());
            }
        }
        if let Some(index) = index {
            self.by_output.entry(index).or_insert(slot);
        }
        slot
    }

    fn fill_call(&mut self, slot: usize, item: &OutputItem) {
        if let Some(call) = self.draft.calls.get_mut(slot) {
            call.id_once(item.call_id.as_deref());
            call.name_once(item.name.as_deref());
        }
    }

    fn usage(&mut self, response: &Response) {
        if let Some(usage) = &response.usage {
            self.draft.usage(usage.input_tokens, usage.output_tokens);
        }
    }

    /// Calls that `response.completed` lists but no event announced (a server that streams
    /// only the final response).
    fn unseen_calls(&mut self, response: &Response) {
        for item in &response.output {
            if item.kind.as_deref() != Some("function_call") {
                continue;
            }
            let (id, call_id) = (item.id.as_deref(), item.call_id.as_deref());
            let seen = self.draft.calls.iter().any(|c| {
                (id.is_some() && c.key.as_deref() == id)
                    || (call_id.is_some() && c.id.as_deref() == call_id)
            });
            if seen {
                continue;
            }
            let slot = self.draft.calls.open();
            if let Some(call) = self.draft.calls.get_mut(slot) {
                call.key = id.map(str::to_owned);
            }
            self.fill_call(slot, item);
            if let Some(arguments) = &item.arguments {
                self.draft.calls.replace(slot, arguments);
            }
        }
    }
}

impl Assembler for ResponsesStream {
    fn new(max_argument_bytes: u64) -> Self {
        Self {
            draft: Draft::new(max_argument_bytes),
            by_item: HashMap::new(),
            by_output: HashMap::new(),
            texted: HashSet::new(),
            last_text_item: None,
            anonymous_text: false,
            events: 0,
        }
    }

    fn draft(&self) -> &Draft {
        &self.draft
    }

    /// `response.completed` and `response.incomplete` end the answer.
    fn feed(&mut self, data: &str, on_text: &mut OnText<'_>) -> Result<Flow, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            // Not part of the Responses API; some proxies end with it. It ends nothing here:
            // only `response.completed` does, so a `[DONE]` before it is a cut stream.
            return Ok(Flow::More);
        }
        let event: Event = wire::event(data)?;
        self.events += 1;
        self.event(event, data, on_text)
    }

    fn finish(self) -> ModelTurn {
        self.draft.finish("call")
    }

    /// Only `response.completed` / `response.incomplete` say the answer is whole.
    fn end(self) -> Result<ModelTurn, ModelError> {
        Err(self.cut())
    }
}

impl ResponsesStream {
    /// The error for a stream that ended before its terminal event.
    fn cut(&self) -> ModelError {
        if self.events == 0 {
            ModelError::Stream("the stream ended without a single Responses event".to_owned())
        } else {
            ModelError::Stream(
                "the stream ended before response.completed (the answer was cut)".to_owned(),
            )
        }
    }
}

/// The `output_text` (and `refusal`) parts of a message item, joined.
fn message_text(item: &OutputItem) -> String {
    item.content
        .iter()
        .filter_map(|p| p.text.as_deref().or(p.refusal.as_deref()))
        .collect()
}

/// The error of `response.failed`, of an `error` event (OpenAI puts `code`/`message` on
/// the event; some servers nest an `error`), or of a Chat-style `{"error": {…}}` payload
/// from a proxy.
fn failure(event: Event, data: &str) -> ModelError {
    match event.kind.as_str() {
        "response.failed" => provider_error(
            &event.response.error.unwrap_or_default(),
            "the model endpoint failed the response",
        ),
        "error" => {
            let error = match event.error.filter(ProviderError::is_object) {
                Some(nested) => nested,
                None => serde_json::from_str(data).unwrap_or_default(),
            };
            provider_error(&error, "the model endpoint sent an error event")
        }
        _ => provider_error(
            &event.error.unwrap_or_default(),
            "the model endpoint sent an error",
        ),
    }
}

/// `code: message` of a provider error object, redacted.
fn provider_error(error: &ProviderError, fallback: &str) -> ModelError {
    let text = match (error.code(), error.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (None, Some(message)) => message,
        (Some(code), None) => format!("{fallback} ({code})"),
        (None, None) => format!("{fallback} (no message given)"),
    };
    if error.is_context_overflow() {
        return wire::exhausted(&text);
    }
    wire::failed(&text)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::model::StreamBounds;
    fn feed(events: &[Value]) -> Result<(ModelTurn, String), ModelError> {
        feed_capped(events, StreamBounds::DEFAULT.max_tool_argument_bytes)
    }

    /// Runs `events` through a stream; the turn (if an event ended it) and the text
    /// `on_text` saw.
    fn feed_capped(events: &[Value], max: u64) -> Result<(ModelTurn, String), ModelError> {
        let mut stream = ResponsesStream::new(max);
        let mut seen = String::new();
        let mut sink = |t: &str| seen.push_str(t);
        for event in events {
            if stream.feed(&event.to_string(), &mut sink)? == Flow::Done {
                return Ok((stream.finish(), seen));
            }
        }
        Err(stream.cut())
    }

    fn completed(input: u64, output: u64) -> Value {
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
               "output": [], "usage": {"input_tokens": input, "output_tokens": output,
                                       "total_tokens": input + output}}})
    }

    fn call_added(index: u64, item: &str, call_id: &str, name: &str) -> Value {
        json!({"type": "response.output_item.added", "output_index": index,
               "item": {"type": "function_call", "id": item, "call_id": call_id, "name": name,
                        "arguments": "", "status": "in_progress"}})
    }

    fn args_delta(index: u64, item: &str, delta: &str) -> Value {
        json!({"type": "response.function_call_arguments.delta", "output_index": index,
               "item_id": item, "delta": delta})
    }

    fn text_delta(item: &str, delta: &str) -> Value {
        json!({"type": "response.output_text.delta", "item_id": item, "output_index": 0,
               "content_index": 0, "delta": delta})
    }

    #[test]
    fn text_deltas_stream_and_usage_is_read_at_completed() {
        let (turn, seen) = feed(&[
            json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
            json!({"type": "response.in_progress", "response": {"id": "resp_1"}}),
            text_delta("msg_1", "Hel"),
            text_delta("msg_1", "lo."),
            json!({"type": "response.output_text.done", "item_id": "msg_1", "text": "Hello."}),
            json!({"type": "response.output_item.done", "output_index": 0,
                   "item": {"type": "message", "id": "msg_1", "role": "assistant",
                            "content": [{"type": "output_text", "text": "Hello."}]}}),
            completed(12, 3),
        ])
        .expect("completed");
        assert_eq!(turn.text, "Hello.");
        assert_eq!(seen, "Hello.", "the done item repeats no text");
        assert_eq!((turn.input_tokens, turn.output_tokens), (12, 3));
        assert_eq!(turn.finish_reason.as_deref(), Some("stop"));
        assert!(turn.tool_calls.is_empty());
    }

    #[test]
    fn parallel_calls_with_interleaved_argument_deltas_are_reassembled() {
        let (turn, _) = feed(&[
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1",
                   "output_index": 0, "delta": "thinking about secrets"}),
            call_added(1, "fc_a", "call_a", "read"),
            call_added(2, "fc_b", "call_b", "ls"),
            args_delta(1, "fc_a", "{\"pa"),
            args_delta(2, "fc_b", "{"),
            args_delta(1, "fc_a", "th\":\"README.md\"}"),
            args_delta(2, "fc_b", "}"),
            json!({"type": "response.function_call_arguments.done", "output_index": 2,
                   "item_id": "fc_b", "arguments": "{}"}),
            completed(5, 7),
        ])
        .expect("completed");
        assert_eq!(turn.text, "", "reasoning is kept out of the result");
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[0].id, "call_a");
        assert_eq!(turn.tool_calls[0].name, "read");
        assert_eq!(turn.tool_calls[0].arguments, r#"{"path":"README.md"}"#);
        assert_eq!(turn.tool_calls[1].id, "call_b");
        assert_eq!(turn.tool_calls[1].arguments, "{}");
        assert_eq!(turn.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn deltas_keyed_by_output_index_alone_still_find_their_call() {
        let (turn, _) = feed(&[
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "function_call", "call_id": "call_x", "name": "ls"}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"}),
            completed(1, 1),
        ])
        .expect("completed");
        assert_eq!(turn.tool_calls.len(), 1);
        assert_eq!(turn.tool_calls[0].id, "call_x");
        assert_eq!(turn.tool_calls[0].arguments, "{}");
    }

    #[test]
    fn a_call_only_in_the_done_item_or_the_final_response_is_kept() {
        let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                          "name": "read", "arguments": "{\"path\":\"a\"}"});
        let (turn, _) = feed(&[
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            completed(1, 1),
        ])
        .expect("completed");
        assert_eq!(turn.tool_calls.len(), 1);
        assert_eq!(turn.tool_calls[0].arguments, "{\"path\":\"a\"}");

        let (turn, _) = feed(&[json!({"type": "response.completed",
                                      "response": {"output": [item], "usage": null}})])
        .expect("completed");
        assert_eq!(turn.tool_calls.len(), 1, "{turn:?}");
        assert_eq!(turn.tool_calls[0].id, "call_1");
    }

    #[test]
    fn a_message_without_deltas_gives_its_text_at_done_and_items_are_paragraphs() {
        let (turn, seen) = feed(&[
            text_delta("msg_1", "First."),
            json!({"type": "response.output_item.done", "output_index": 1,
                   "item": {"type": "message", "id": "msg_2",
                            "content": [{"type": "output_text", "text": "Second."}]}}),
            completed(1, 1),
        ])
        .expect("completed");
        assert_eq!(turn.text, "First.\n\nSecond.");
        assert_eq!(seen, turn.text);
    }

    #[test]
    fn incomplete_for_max_output_tokens_is_length() {
        let (turn, _) = feed(&[
            text_delta("msg_1", "partial"),
            json!({"type": "response.incomplete", "response": {"status": "incomplete",
                   "incomplete_details": {"reason": "max_output_tokens"},
                   "usage": {"input_tokens": 4, "output_tokens": 16}}}),
        ])
        .expect("ended");
        assert_eq!(turn.finish_reason.as_deref(), Some("length"));
        assert_eq!(turn.output_tokens, 16);
        assert_eq!(turn.text, "partial");
    }

    #[test]
    fn failed_and_error_events_fail_with_the_provider_message_redacted() {
        crate::redact::add_secrets(["sk-unit-responses-secret"]);
        let failed = feed(&[json!({"type": "response.failed", "response": {"status": "failed",
                    "error": {"code": "server_error", "message": "boom with sk-unit-responses-secret"}}})])
        .expect_err("failed");
        let shown = failed.to_string();
        assert!(shown.contains("server_error: boom with"), "{shown}");
        assert!(!shown.contains("sk-unit-responses-secret"), "{shown}");

        let error = feed(&[
            text_delta("msg_1", "so far"),
            json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": null}),
        ])
        .expect_err("error");
        assert!(
            error.to_string().contains("rate_limit_exceeded: slow down"),
            "{error}"
        );

        let nested = feed(&[json!({"error": {"message": "proxy says no"}})]).expect_err("error");
        assert!(nested.to_string().contains("proxy says no"), "{nested}");
    }

    #[test]
    fn a_stream_without_its_terminal_event_or_with_garbage_fails() {
        let cut = feed(&[text_delta("msg_1", "half")]).expect_err("cut");
        assert!(
            cut.to_string().contains("before response.completed"),
            "{cut}"
        );
        let mut stream = ResponsesStream::new(64);
        let mut sink = |_: &str| {};
        assert_eq!(stream.feed("[DONE]", &mut sink).ok(), Some(Flow::More));
        assert!(stream.cut().to_string().contains("without a single"));
        let delta = text_delta("msg_1", "half").to_string();
        assert_eq!(stream.feed(&delta, &mut sink).ok(), Some(Flow::More));
        assert_eq!(
            stream.feed("[DONE]", &mut sink).ok(),
            Some(Flow::More),
            "[DONE] before response.completed ends nothing"
        );
        assert!(
            stream
                .cut()
                .to_string()
                .contains("before response.completed")
        );
        let garbage = stream.feed("{not json", &mut sink).expect_err("garbage");
        assert!(garbage.to_string().contains("not JSON"), "{garbage}");
    }

    #[test]
    fn arguments_over_the_cap_are_dropped_and_counted() {
        let (turn, _) = feed_capped(
            &[
                call_added(0, "fc_1", "call_1", "read"),
                args_delta(0, "fc_1", "{\"path\""),
                args_delta(0, "fc_1", ":\"aaaaaaaa\"}"),
                completed(1, 1),
            ],
            8,
        )
        .expect("completed");
        assert_eq!(turn.tool_calls[0].arguments, "");
        assert_eq!(turn.tool_calls[0].oversized, Some(19));
        let (turn, _) = feed_capped(
            &[
                call_added(0, "fc_1", "call_1", "read"),
                json!({"type": "response.function_call_arguments.done", "output_index": 0,
                       "item_id": "fc_1", "arguments": "{\"path\":\"aaaaaaaa\"}"}),
                completed(1, 1),
            ],
            8,
        )
        .expect("completed");
        assert_eq!(
            turn.tool_calls[0].oversized,
            Some(19),
            "a whole .done is capped too"
        );
    }
}
