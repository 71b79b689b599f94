//! Streaming OpenAI Responses (`openai-responses`): `POST <url>/responses` with
//! `store: false`, so nothing is kept at the provider and every request carries the whole
//! transcript as input items.
//!
//! What is sent: `instructions` (the system text), `input` items — user turns as `message`
//! items with `input_text`, assistant text as `message` items with `output_text`, tool calls as
//! `function_call` and results as `function_call_output` (never an item `id`: with
//! `store: false` there is nothing to refer to, and an `fc_…` id without its reasoning item is
//! refused by OpenAI) — `tools` as `function` declarations with `strict: false` (left out,
//! OpenAI turns a schema it can into strict mode, where every optional argument becomes
//! required), `tool_choice: "none"` when no tool may be called, `max_output_tokens`,
//! `stream: true`.
//!
//! What is read: the event's `type` in each `data:` payload (the SSE `event:` line only
//! repeats it). Text from `response.output_text.delta` (and `response.refusal.delta`); calls
//! from `response.output_item.added` / `.done` (`call_id`, `name`) and
//! `response.function_call_arguments.delta` / `.done`, keyed by `item_id`, else
//! `output_index`; usage and the end from `response.completed`; `response.incomplete` ends the
//! answer with its reason (`max_output_tokens` becomes `finish_reason: "length"`).
//! `response.failed` and `error` fail the request with the provider's message, redacted.
//! Reasoning items, lifecycle events and unknown event types are skipped. A `data:` payload
//! that is not JSON, or a stream that ends before `response.completed` /
//! `response.incomplete`, fails the request: a cut answer is never taken as a whole one.

use std::collections::{HashMap, HashSet};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use subzero_protocol::ApiKey;

use super::http::OriginBound;
use super::sse::SseParser;
use super::{
    Conversation, Item, ModelError, ModelTurn, Request, StreamBounds, ToolCall, ToolChoice,
    ToolSpec,
};
use crate::redact::redact;

/// The output of a call the transcript holds no result for (OpenAI refuses a
/// `function_call` without its `function_call_output`).
const NO_RESULT: &str = "no result was recorded for this call (the run ended before it finished)";

/// One Responses endpoint. `Debug` shows the origin and model, never the key.
#[derive(Clone)]
pub struct ResponsesClient {
    http: OriginBound,
    model: String,
    key: ApiKey,
    bounds: StreamBounds,
}

impl std::fmt::Debug for ResponsesClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesClient")
            .field("http", &self.http)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ResponsesClient {
    pub fn new(
        url: &str,
        model: &str,
        key: ApiKey,
        bounds: StreamBounds,
    ) -> Result<Self, ModelError> {
        Ok(Self {
            http: OriginBound::new(&endpoint(url), bounds)?,
            model: model.to_owned(),
            key,
            bounds,
        })
    }

    /// Sends one streaming request; `on_text` sees each text delta as it arrives.
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ModelTurn, ModelError> {
        let body = serde_json::to_vec(&body(&self.model, &request))
            .map_err(|e| ModelError::Transport(format!("cannot encode the request: {e}")))?;
        let sent = body.len();
        let mut headers = HeaderMap::new();
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", self.key.expose()))
            .map_err(|_| ModelError::Transport("the key is not a valid header value".into()))?;
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        let mut response = self.http.post(headers, body).await?;
        // The body is already cut at `max_response_bytes`; this keeps the parser bounded on
        // its own terms.
        let mut parser = SseParser::with_max_line(
            usize::try_from(self.bounds.max_response_bytes).unwrap_or(usize::MAX),
        );
        let mut stream = EventStream::new(self.bounds.max_tool_argument_bytes);
        while let Some(chunk) = response.chunk().await? {
            for data in parser.feed(&chunk)? {
                if stream.event(&data, on_text)? == Flow::Ended {
                    return Ok(stream.finish().sent_and_received(sent, response.received()));
                }
                if request.text_cap_reached(stream.turn.text.len()) {
                    let turn = stream.finish().sent_and_received(sent, response.received());
                    return Ok(turn.capped());
                }
            }
        }
        for data in parser.finish()? {
            if stream.event(&data, on_text)? == Flow::Ended {
                return Ok(stream.finish().sent_and_received(sent, response.received()));
            }
        }
        Err(stream.cut())
    }
}

/// `url` is a base URL (`…/v1`) or already the full `…/responses` endpoint.
fn endpoint(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    if trimmed.ends_with("/responses") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/responses")
    }
}

/// The request body for `model`.
fn body(model: &str, request: &Request<'_>) -> Value {
    let mut body = json!({
        "model": model,
        "input": input(request.conversation),
        "stream": true,
        "store": false,
        "max_output_tokens": request.max_output_tokens,
    });
    if !request.conversation.system.is_empty() {
        body["instructions"] = json!(request.conversation.system);
    }
    // Without tools the request names none (and no `tool_choice`: some servers refuse one
    // without tools). When no call is allowed the declarations stay, so the earlier
    // `function_call` items still name declared tools, and `tool_choice: "none"` forbids calls.
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(declaration).collect();
        if request.tool_choice == ToolChoice::None {
            body["tool_choice"] = json!("none");
        }
    }
    body
}

/// A tool as a Responses function declaration (flat, unlike Chat Completions).
fn declaration(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": false,
    })
}

/// The conversation as input items, oldest first. Calls and results go by the ids
/// [`CallIds`] gives them, so every `function_call` is answered by one
/// `function_call_output` with its `call_id` and no output is sent without its call: OpenAI
/// answers HTTP 400 to either.
fn input(conversation: &Conversation) -> Vec<Value> {
    let ids = CallIds::assign(&conversation.items);
    let mut out = Vec::new();
    for (n, item) in conversation.items.iter().enumerate() {
        match item {
            Item::User(text) => out.push(json!({
                "type": "message",
                "role": "user",
                "content": [{ "type": "input_text", "text": text }],
            })),
            Item::Assistant { text, calls } => {
                if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
                    out.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{ "type": "output_text", "text": text }],
                    }));
                }
                let sent = ids.calls(n);
                for (call, id) in calls.iter().zip(sent) {
                    out.push(json!({
                        "type": "function_call",
                        "call_id": id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }));
                }
                for id in sent.iter().filter(|id| !ids.answered.contains(*id)) {
                    out.push(output(id, NO_RESULT));
                }
            }
            Item::ToolResult { content, .. } => {
                if let Some(id) = ids.result(n) {
                    out.push(output(id, content));
                }
            }
        }
    }
    out
}

/// The `call_id` each call and result is sent with. A recorded id is kept as it is, except
/// an empty one and one that an earlier call already used (a Chat Completions server that
/// numbers its calls per turn, `call_0` every time): those get `_2`, `_3`, … so each call
/// is one pair. A result answers the latest call with its recorded id, once; a result that
/// answers no call (or a call already answered) is left out.
#[derive(Debug, Default)]
struct CallIds {
    /// Per item: the ids of an answer's calls, or the one id of a result (empty: left out).
    sent: Vec<Vec<String>>,
    answered: HashSet<String>,
}

impl CallIds {
    fn assign(items: &[Item]) -> Self {
        let mut uses: HashMap<&str, usize> = HashMap::new();
        let mut latest: HashMap<&str, String> = HashMap::new();
        let mut ids = CallIds::default();
        for item in items {
            let sent = match item {
                Item::Assistant { calls, .. } => calls
                    .iter()
                    .map(|call| {
                        let used = uses.entry(call.id.as_str()).or_insert(0);
                        *used += 1;
                        let id = match (call.id.as_str(), *used) {
                            ("", n) => format!("call_{n}"),
                            (id, 1) => id.to_owned(),
                            (id, n) => format!("{id}_{n}"),
                        };
                        latest.insert(call.id.as_str(), id.clone());
                        id
                    })
                    .collect(),
                Item::ToolResult { call_id, .. } => latest
                    .get(call_id.as_str())
                    .filter(|id| !ids.answered.contains(*id))
                    .cloned()
                    .inspect(|id| {
                        ids.answered.insert(id.clone());
                    })
                    .into_iter()
                    .collect(),
                Item::User(_) => Vec::new(),
            };
            ids.sent.push(sent);
        }
        ids
    }

    fn calls(&self, item: usize) -> &[String] {
        self.sent.get(item).map(Vec::as_slice).unwrap_or_default()
    }

    fn result(&self, item: usize) -> Option<&String> {
        self.sent.get(item).and_then(|ids| ids.first())
    }
}

fn output(call_id: &str, content: &str) -> Value {
    json!({ "type": "function_call_output", "call_id": call_id, "output": content })
}

/// Whether the stream goes on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    More,
    /// `response.completed` or `response.incomplete`: the answer is whole (or cut by the
    /// provider, which says why).
    Ended,
}

#[derive(Debug, Default)]
struct PartialCall {
    call_id: Option<String>,
    item_id: Option<String>,
    name: String,
    arguments: String,
    /// Bytes of arguments received, kept counting after the cap.
    argument_bytes: u64,
}

/// Assembles one answer from Responses stream events.
#[derive(Debug)]
struct EventStream {
    turn: ModelTurn,
    calls: Vec<PartialCall>,
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
    max_argument_bytes: u64,
}

impl EventStream {
    fn new(max_argument_bytes: u64) -> Self {
        Self {
            turn: ModelTurn::default(),
            calls: Vec::new(),
            by_item: HashMap::new(),
            by_output: HashMap::new(),
            texted: HashSet::new(),
            last_text_item: None,
            anonymous_text: false,
            events: 0,
            max_argument_bytes,
        }
    }

    /// Handles one SSE payload.
    fn event(
        &mut self,
        data: &str,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Flow, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            // Not part of the Responses API; some proxies end with it. It ends nothing here:
            // only `response.completed` does, so a `[DONE]` before it is a cut stream.
            return Ok(Flow::More);
        }
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            return Err(ModelError::Stream(format!(
                "a stream event of {} bytes was not JSON",
                data.len()
            )));
        };
        self.events += 1;
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(delta) = str_field(&event, "delta") {
                    self.text(item_id(&event), delta, on_text);
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                self.item(&event, kind == "response.output_item.done", on_text);
            }
            "response.function_call_arguments.delta" => {
                if let Some(delta) = str_field(&event, "delta") {
                    let slot = self.slot(item_id(&event), output_index(&event));
                    self.append_arguments(slot, delta);
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(arguments) = str_field(&event, "arguments") {
                    let slot = self.slot(item_id(&event), output_index(&event));
                    self.set_arguments(slot, arguments);
                }
            }
            "response.completed" => {
                let response = event.get("response").unwrap_or(&Value::Null);
                self.usage(response);
                self.unseen_calls(response);
                let reason = if self.has_calls() {
                    "tool_calls"
                } else {
                    "stop"
                };
                self.turn.finish_reason = Some(reason.to_owned());
                return Ok(Flow::Ended);
            }
            "response.incomplete" => {
                let response = event.get("response").unwrap_or(&Value::Null);
                self.usage(response);
                let reason = response
                    .pointer("/incomplete_details/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("incomplete");
                let reason = if reason == "max_output_tokens" {
                    "length"
                } else {
                    reason
                };
                self.turn.finish_reason = Some(reason.to_owned());
                return Ok(Flow::Ended);
            }
            "response.failed" => {
                let error = event.pointer("/response/error").unwrap_or(&Value::Null);
                return Err(provider_error(
                    error,
                    "the model endpoint failed the response",
                ));
            }
            "error" => {
                // OpenAI puts `code`/`message` on the event; some servers nest an `error`.
                let error = event
                    .get("error")
                    .filter(|e| e.is_object())
                    .unwrap_or(&event);
                return Err(provider_error(
                    error,
                    "the model endpoint sent an error event",
                ));
            }
            "" if event.get("error").is_some_and(Value::is_object) => {
                // A Chat-style `{"error": {…}}` payload from a proxy.
                let error = &event["error"];
                return Err(provider_error(error, "the model endpoint sent an error"));
            }
            // Lifecycle (`response.created`, `.in_progress`, `.queued`), reasoning, content
            // parts, annotations and anything newer: nothing to keep.
            _ => {}
        }
        Ok(Flow::More)
    }

    fn text(&mut self, item: Option<&str>, delta: &str, on_text: &mut (dyn FnMut(&str) + Send)) {
        if delta.is_empty() {
            return;
        }
        if let Some(item) = item {
            let other = self
                .last_text_item
                .as_deref()
                .is_some_and(|last| last != item);
            if other && !self.turn.text.is_empty() {
                self.turn.text.push_str("\n\n");
                on_text("\n\n");
            }
            self.texted.insert(item.to_owned());
            self.last_text_item = Some(item.to_owned());
        } else {
            self.anonymous_text = true;
        }
        self.turn.text.push_str(delta);
        on_text(delta);
    }

    /// `response.output_item.added` / `.done`: a call's id and name (and, at `.done`, its
    /// whole arguments); a message's text when no delta carried it.
    fn item(&mut self, event: &Value, done: bool, on_text: &mut (dyn FnMut(&str) + Send)) {
        let Some(item) = event.get("item") else {
            return;
        };
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let slot = self.slot(str_field(item, "id"), output_index(event));
                self.fill_call(slot, item);
                if let Some(arguments) = str_field(item, "arguments")
                    && (done || !arguments.is_empty())
                {
                    self.set_arguments(slot, arguments);
                }
            }
            Some("message") if done => {
                let id = str_field(item, "id");
                let streamed = match id {
                    Some(id) => self.texted.contains(id) || self.anonymous_text,
                    None => !self.turn.text.is_empty(),
                };
                if streamed {
                    return;
                }
                let text = message_text(item);
                self.text(id, &text, on_text);
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
        let slot = known.unwrap_or_else(|| {
            self.calls.push(PartialCall::default());
            self.calls.len() - 1
        });
        if let Some(id) = item {
            self.by_item.entry(id.to_owned()).or_insert(slot);
            if self.calls[slot].item_id.is_none() {
                self.calls[slot].item_id = Some(id.to_owned());
            }
        }
        if let Some(index) = index {
            self.by_output.entry(index).or_insert(slot);
        }
        slot
    }

    fn fill_call(&mut self, slot: usize, item: &Value) {
        let call = &mut self.calls[slot];
        if call.call_id.is_none() {
            call.call_id = str_field(item, "call_id")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
        }
        if call.name.is_empty()
            && let Some(name) = str_field(item, "name")
        {
            call.name = name.to_owned();
        }
    }

    fn append_arguments(&mut self, slot: usize, delta: &str) {
        let max = self.max_argument_bytes;
        let call = &mut self.calls[slot];
        let bytes = u64::try_from(delta.len()).unwrap_or(u64::MAX);
        call.argument_bytes = call.argument_bytes.saturating_add(bytes);
        if call.argument_bytes <= max {
            call.arguments.push_str(delta);
        } else {
            // Over the cap: keep counting, keep nothing (memory stays flat).
            call.arguments = String::new();
        }
    }

    /// The whole arguments (`.done` events): they replace what the deltas assembled.
    fn set_arguments(&mut self, slot: usize, arguments: &str) {
        let max = self.max_argument_bytes;
        let call = &mut self.calls[slot];
        call.argument_bytes = u64::try_from(arguments.len()).unwrap_or(u64::MAX);
        call.arguments = if call.argument_bytes <= max {
            arguments.to_owned()
        } else {
            String::new()
        };
    }

    fn usage(&mut self, response: &Value) {
        if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
            let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.turn.usage_reported = true;
            self.turn.input_tokens = field("input_tokens");
            self.turn.output_tokens = field("output_tokens");
        }
    }

    /// Calls that `response.completed` lists but no event announced (a server that streams
    /// only the final response).
    fn unseen_calls(&mut self, response: &Value) {
        let Some(output) = response.get("output").and_then(Value::as_array) else {
            return;
        };
        for item in output {
            if item.get("type").and_then(Value::as_str) != Some("function_call") {
                continue;
            }
            let id = str_field(item, "id");
            let call_id = str_field(item, "call_id");
            let seen = self.calls.iter().any(|c| {
                (id.is_some() && c.item_id.as_deref() == id)
                    || (call_id.is_some() && c.call_id.as_deref() == call_id)
            });
            if seen {
                continue;
            }
            self.calls.push(PartialCall::default());
            let slot = self.calls.len() - 1;
            self.calls[slot].item_id = id.map(str::to_owned);
            self.fill_call(slot, item);
            if let Some(arguments) = str_field(item, "arguments") {
                self.set_arguments(slot, arguments);
            }
        }
    }

    fn has_calls(&self) -> bool {
        self.calls.iter().any(PartialCall::is_call)
    }

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

    fn finish(mut self) -> ModelTurn {
        let max = self.max_argument_bytes;
        self.turn.tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| c.is_call())
            .map(|(n, c)| {
                let oversized = (c.argument_bytes > max).then_some(c.argument_bytes);
                ToolCall {
                    id: c
                        .call_id
                        .or(c.item_id)
                        .unwrap_or_else(|| format!("call_{n}")),
                    name: c.name,
                    arguments: if oversized.is_some() {
                        String::new()
                    } else {
                        c.arguments
                    },
                    oversized,
                }
            })
            .collect();
        self.turn
    }
}

impl PartialCall {
    /// A slot is a call once it has a name or arguments (a stray `.done` for an item that
    /// is not a call leaves neither).
    fn is_call(&self) -> bool {
        !self.name.is_empty() || self.argument_bytes > 0
    }
}

fn str_field<'a>(value: &'a Value, name: &str) -> Option<&'a str> {
    value.get(name).and_then(Value::as_str)
}

fn item_id(event: &Value) -> Option<&str> {
    str_field(event, "item_id")
}

fn output_index(event: &Value) -> Option<u64> {
    event.get("output_index").and_then(Value::as_u64)
}

/// The `output_text` (and `refusal`) parts of a message item, joined.
fn message_text(item: &Value) -> String {
    item.get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| str_field(p, "text").or_else(|| str_field(p, "refusal")))
                .collect::<String>()
        })
        .unwrap_or_default()
}

/// `code: message` of a provider error object, redacted.
fn provider_error(error: &Value, fallback: &str) -> ModelError {
    let message = str_field(error, "message").filter(|m| !m.is_empty());
    let code = str_field(error, "code").filter(|c| !c.is_empty());
    let text = match (code, message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (None, Some(message)) => message.to_owned(),
        (Some(code), None) => format!("{fallback} ({code})"),
        (None, None) => format!("{fallback} (no message given)"),
    };
    ModelError::Stream(redact(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Call;

    fn feed(events: &[Value]) -> Result<(ModelTurn, String), ModelError> {
        feed_capped(events, StreamBounds::DEFAULT.max_tool_argument_bytes)
    }

    /// Runs `events` through a stream; the turn (if an event ended it) and the text
    /// `on_text` saw.
    fn feed_capped(events: &[Value], max: u64) -> Result<(ModelTurn, String), ModelError> {
        let mut stream = EventStream::new(max);
        let mut seen = String::new();
        let mut sink = |t: &str| seen.push_str(t);
        for event in events {
            if stream.event(&event.to_string(), &mut sink)? == Flow::Ended {
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

    fn conversation(items: Vec<Item>) -> Conversation {
        Conversation {
            system: "Be brief.".to_owned(),
            items,
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> Call {
        Call {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    fn result(call_id: &str, content: &str) -> Item {
        Item::ToolResult {
            call_id: call_id.to_owned(),
            name: "read".to_owned(),
            content: content.to_owned(),
            is_error: false,
        }
    }

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "read".to_owned(),
            description: "Read a file".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }
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
        let mut stream = EventStream::new(64);
        let mut sink = |_: &str| {};
        assert_eq!(stream.event("[DONE]", &mut sink).ok(), Some(Flow::More));
        assert!(stream.cut().to_string().contains("without a single"));
        let delta = text_delta("msg_1", "half").to_string();
        assert_eq!(stream.event(&delta, &mut sink).ok(), Some(Flow::More));
        assert_eq!(
            stream.event("[DONE]", &mut sink).ok(),
            Some(Flow::More),
            "[DONE] before response.completed ends nothing"
        );
        assert!(
            stream
                .cut()
                .to_string()
                .contains("before response.completed")
        );
        let garbage = stream.event("{not json", &mut sink).expect_err("garbage");
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

    #[test]
    fn the_body_carries_instructions_items_tools_and_no_server_state() {
        let conversation = conversation(vec![
            Item::User("Summarise README.md".to_owned()),
            Item::Assistant {
                text: Some("Reading it.".to_owned()),
                calls: vec![call("call_1", "read", r#"{"path":"README.md"}"#)],
            },
            result("call_1", "# Demo"),
            Item::User("focus on the title".to_owned()),
        ]);
        let tools = [tool()];
        let request = Request {
            conversation: &conversation,
            tools: &tools,
            tool_choice: ToolChoice::Auto,
            max_output_tokens: 512,
            max_text_bytes: None,
        };
        let body = body("gpt-test", &request);
        assert_eq!(body["model"], "gpt-test");
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["stream"], true);
        assert_eq!(body["store"], false);
        assert_eq!(body["max_output_tokens"], 512);
        assert!(body.get("tool_choice").is_none());
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "read", "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                    "strict": false}])
        );
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "Summarise README.md"}]},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Reading it."}]},
                {"type": "function_call", "call_id": "call_1", "name": "read",
                 "arguments": "{\"path\":\"README.md\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "# Demo"},
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "focus on the title"}]},
            ])
        );
    }

    #[test]
    fn no_calls_allowed_keeps_the_declarations_and_says_none() {
        let conversation = conversation(vec![Item::User("hand off".to_owned())]);
        let tools = [tool()];
        let request = Request {
            conversation: &conversation,
            tools: &tools,
            tool_choice: ToolChoice::None,
            max_output_tokens: 256,
            max_text_bytes: None,
        };
        let body = body("m", &request);
        assert_eq!(body["tool_choice"], "none");
        assert_eq!(body["tools"][0]["name"], "read");
        let request = Request {
            tools: &[],
            ..request
        };
        let body = super::body("m", &request);
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        let empty = Conversation::default();
        let request = Request {
            conversation: &empty,
            ..request
        };
        assert!(super::body("m", &request).get("instructions").is_none());
    }

    #[test]
    fn every_call_has_an_output_and_no_output_is_orphaned() {
        let items = input(&conversation(vec![
            Item::User("go".to_owned()),
            Item::Assistant {
                text: None,
                calls: vec![call("call_1", "ls", "{}"), call("call_2", "ls", "{}")],
            },
            result("call_2", "b"),
            result("call_9", "from nowhere"),
        ]));
        let kinds: Vec<(String, String)> = items
            .iter()
            .map(|i| {
                (
                    i["type"].as_str().unwrap_or_default().to_owned(),
                    i["call_id"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("message", ""),
                ("function_call", "call_1"),
                ("function_call", "call_2"),
                ("function_call_output", "call_1"),
                ("function_call_output", "call_2"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        assert_eq!(items[3]["output"], NO_RESULT);
    }

    #[test]
    fn ids_repeated_across_turns_or_empty_become_distinct_pairs() {
        let items = input(&conversation(vec![
            Item::Assistant {
                text: None,
                calls: vec![call("call_0", "ls", "{}")],
            },
            result("call_0", "first"),
            Item::Assistant {
                text: None,
                calls: vec![call("call_0", "ls", "{}"), call("", "ls", "{}")],
            },
            result("call_0", "second"),
            result("call_0", "a second answer to the same call"),
            result("", "third"),
        ]));
        let pairs: Vec<(&str, &str)> = items
            .iter()
            .map(|i| {
                (
                    i["call_id"].as_str().unwrap_or_default(),
                    i["output"].as_str().unwrap_or("call"),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("call_0", "call"),
                ("call_0", "first"),
                ("call_0_2", "call"),
                ("call_1", "call"),
                ("call_0_2", "second"),
                ("call_1", "third"),
            ]
        );
    }

    #[test]
    fn endpoint_from_base_or_full_url() {
        assert_eq!(endpoint("http://h/v1/"), "http://h/v1/responses");
        assert_eq!(endpoint("http://h/v1/responses"), "http://h/v1/responses");
    }

    #[test]
    fn formatting_a_client_never_shows_the_key() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = ApiKey::new("sk-live-do-not-print").expect("key");
        let client = ResponsesClient::new("http://127.0.0.1:9/v1", "m", key, StreamBounds::DEFAULT)
            .expect("client");
        let shown = format!("{client:?} {client:#?}");
        assert!(!shown.contains("sk-live-do-not-print"), "{shown}");
        assert!(shown.contains("http://127.0.0.1:9"), "{shown}");
    }
}
