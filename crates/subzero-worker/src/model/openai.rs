//! Streaming Chat Completions (`openai-completions`), lenient about common deviations:
//! a missing tool-call `index`, missing `created`/`id`, unknown `finish_reason`, SSE
//! comment keep-alives, and a stream that ends without `[DONE]` after a `finish_reason`.
//! A `data:` payload that is not JSON, or a stream cut before any `finish_reason`, fails
//! the request.
//!
//! Reasoning is never text: a delta's `reasoning_content` (vLLM up to 0.10, DeepSeek,
//! llama.cpp's server), `reasoning` (vLLM from 0.11, OpenRouter, Ollama) and `thinking`
//! parts of a `content` list (Mistral's reasoning models) are read past, so they reach
//! neither `on_text`, the result nor the transcript. Only `content` is text.
//!
//! The output-token cap travels as `max_tokens` unless the caller chose
//! `max_completion_tokens` (`outputTokensParam`) or the endpoint refused `max_tokens` with
//! OpenAI's typed HTTP 400. That refusal is the one request this client repeats: the endpoint
//! generated nothing, so the repeat is the same request in the shape it asked for, not a
//! retry of a generation. Every other failure is returned as it is.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use subzero_protocol::{ApiKey, OutputTokensParam};

use super::http::{Body, OriginBound};
use super::sse::SseParser;
use super::{
    Conversation, Item, ModelError, ModelTurn, Request, StreamBounds, ToolCall, ToolChoice,
    ToolSpec,
};
use crate::redact::redact;

/// One Chat Completions endpoint. `Debug` shows the origin and model, never the key.
#[derive(Clone)]
pub struct ChatClient {
    http: OriginBound,
    endpoint: String,
    model: String,
    key: ApiKey,
    bounds: StreamBounds,
    cap: CapChoice,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatClient")
            .field("http", &self.http)
            .field("model", &self.model)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

/// The request field that carries the output-token cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CapField {
    MaxTokens,
    MaxCompletionTokens,
}

impl CapField {
    fn name(self) -> &'static str {
        match self {
            Self::MaxTokens => "max_tokens",
            Self::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// How the cap field is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CapChoice {
    /// The caller named it (`outputTokensParam`): sent as is, never switched.
    Explicit(CapField),
    /// Nobody named it: `max_tokens` until the endpoint refuses it (see [`refuses_max_tokens`]).
    Learned,
}

/// Endpoints (URL, model) that refused `max_tokens` with the typed 400: this worker sends
/// them `max_completion_tokens` for the rest of its life. Process-wide, because a client is
/// built per run and the worker serves every run of its child.
static REFUSE_MAX_TOKENS: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());

impl ChatClient {
    /// `output_tokens` is the caller's `outputTokensParam`; `None` learns it.
    pub fn new(
        url: &str,
        model: &str,
        key: ApiKey,
        bounds: StreamBounds,
        output_tokens: Option<OutputTokensParam>,
    ) -> Result<Self, ModelError> {
        let endpoint = endpoint(url);
        let cap = match output_tokens {
            None => CapChoice::Learned,
            Some(OutputTokensParam::MaxTokens) => CapChoice::Explicit(CapField::MaxTokens),
            Some(OutputTokensParam::MaxCompletionTokens) => {
                CapChoice::Explicit(CapField::MaxCompletionTokens)
            }
        };
        Ok(Self {
            http: OriginBound::new(&endpoint, bounds)?,
            endpoint,
            model: model.to_owned(),
            key,
            bounds,
            cap,
        })
    }

    /// Sends one streaming request; `on_text` sees each text delta as it arrives.
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ModelTurn, ModelError> {
        let field = self.cap_field();
        let (response, sent) = match self.send(&request, field).await {
            Err(ModelError::Http {
                status: 400,
                excerpt,
            }) if self.cap == CapChoice::Learned
                && field == CapField::MaxTokens
                && refuses_max_tokens(&excerpt) =>
            {
                self.learn_max_completion_tokens();
                tracing::info!(
                    model = %self.model,
                    "the endpoint refused max_tokens (HTTP 400 unsupported_parameter); sending max_completion_tokens from now on"
                );
                self.send(&request, CapField::MaxCompletionTokens).await?
            }
            other => other?,
        };
        self.read(&request, response, sent, on_text).await
    }

    /// The cap field of the next request.
    fn cap_field(&self) -> CapField {
        match self.cap {
            CapChoice::Explicit(field) => field,
            CapChoice::Learned => {
                let refused = REFUSE_MAX_TOKENS
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&(self.endpoint.clone(), self.model.clone()));
                if refused {
                    CapField::MaxCompletionTokens
                } else {
                    CapField::MaxTokens
                }
            }
        }
    }

    fn learn_max_completion_tokens(&self) {
        REFUSE_MAX_TOKENS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((self.endpoint.clone(), self.model.clone()));
    }

    /// POSTs the request with the cap in `field`; the body reader and the bytes sent. A
    /// non-2xx answer is `ModelError::Http`.
    async fn send(
        &self,
        request: &Request<'_>,
        field: CapField,
    ) -> Result<(Body, usize), ModelError> {
        let body = serde_json::to_vec(&body(&self.model, request, field))
            .map_err(|e| ModelError::Transport(format!("cannot encode the request: {e}")))?;
        let mut headers = HeaderMap::new();
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", self.key.expose()))
            .map_err(|_| ModelError::Transport("the key is not a valid header value".into()))?;
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        let sent = body.len();
        Ok((self.http.post(headers, body).await?, sent))
    }

    /// Reads the event stream of a successful response into one turn (stopping early at
    /// the request's text cap); `sent` is the request body's size.
    async fn read(
        &self,
        request: &Request<'_>,
        mut response: Body,
        sent: usize,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ModelTurn, ModelError> {
        // The body is already cut at `max_response_bytes`, so no line can pass this cap
        // here; it keeps the parser bounded on its own terms.
        let mut parser = SseParser::with_max_line(
            usize::try_from(self.bounds.max_response_bytes).unwrap_or(usize::MAX),
        );
        let mut assembler = Assembler::new(self.bounds.max_tool_argument_bytes);
        while let Some(chunk) = response.chunk().await? {
            for data in parser.feed(&chunk)? {
                if assembler.event(&data, on_text)? {
                    return Ok(assembler
                        .finish()
                        .sent_and_received(sent, response.received()));
                }
                if request.text_cap_reached(assembler.turn.text.len()) {
                    let turn = assembler
                        .finish()
                        .sent_and_received(sent, response.received());
                    return Ok(turn.capped());
                }
            }
        }
        for data in parser.finish()? {
            assembler.event(&data, on_text)?;
        }
        if !assembler.saw_anything {
            return Err(ModelError::Stream(
                "the stream ended without a single completion chunk".to_owned(),
            ));
        }
        // Without `[DONE]` a finish_reason is the only sign the answer is whole; a stream
        // cut before either is a failed request, never a completed (truncated) one.
        if assembler.turn.finish_reason.is_none() {
            return Err(ModelError::Stream(
                "the stream ended before the model finished (no finish_reason and no [DONE])"
                    .to_owned(),
            ));
        }
        Ok(assembler
            .finish()
            .sent_and_received(sent, response.received()))
    }
}

/// The request body, with the output-token cap in `field`.
fn body(model: &str, request: &Request<'_>, field: CapField) -> Value {
    let mut body = json!({
        "model": model,
        "messages": messages(request.conversation),
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    body[field.name()] = json!(request.max_output_tokens);
    // Without tools the request carries none: local servers differ on `tool_choice`,
    // and earlier tool turns need no declarations in Chat Completions.
    if request.tool_choice == ToolChoice::Auto && !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(declaration).collect();
    }
    body
}

/// Whether an HTTP 400 body is OpenAI's typed refusal of `max_tokens`,
/// `{"error": {"param": "max_tokens", "code": "unsupported_parameter", …}}` (the message
/// says "Use 'max_completion_tokens' instead"). Nothing else switches the field: not the
/// message text, not the URL, not the model name.
fn refuses_max_tokens(body: &str) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        return false;
    };
    let error = &value["error"];
    error["param"] == "max_tokens" && error["code"] == "unsupported_parameter"
}

/// The conversation as Chat Completions messages: system first, then each turn.
fn messages(conversation: &Conversation) -> Vec<Value> {
    let mut out = Vec::new();
    if !conversation.system.is_empty() {
        out.push(json!({ "role": "system", "content": conversation.system }));
    }
    for item in &conversation.items {
        match item {
            Item::User(text) => out.push(json!({ "role": "user", "content": text })),
            Item::Assistant { text, calls } => {
                let mut message = json!({ "role": "assistant", "content": text });
                if !calls.is_empty() {
                    message["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({ "id": c.id, "type": "function",
                                    "function": { "name": c.name, "arguments": c.arguments } })
                        })
                        .collect();
                }
                out.push(message);
            }
            Item::ToolResult {
                call_id, content, ..
            } => out.push(json!({ "role": "tool", "tool_call_id": call_id, "content": content })),
        }
    }
    out
}

/// A tool as a Chat Completions function declaration.
fn declaration(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
    })
}

/// `url` is a base URL (`…/v1`) or already the full `…/chat/completions` endpoint.
fn endpoint(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    if trimmed.ends_with("/chat/completions") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/chat/completions")
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
    /// Bytes of arguments received, kept counting after the cap.
    argument_bytes: u64,
}

/// Assembles text and tool calls from chunks.
#[derive(Debug)]
pub struct Assembler {
    turn: ModelTurn,
    calls: Vec<PartialCall>,
    by_index: HashMap<u64, usize>,
    saw_anything: bool,
    max_argument_bytes: u64,
}

impl Default for Assembler {
    fn default() -> Self {
        Self::new(StreamBounds::DEFAULT.max_tool_argument_bytes)
    }
}

impl Assembler {
    /// An assembler that drops a tool call's arguments once they pass `max_argument_bytes`.
    pub fn new(max_argument_bytes: u64) -> Self {
        Self {
            turn: ModelTurn::default(),
            calls: Vec::new(),
            by_index: HashMap::new(),
            saw_anything: false,
            max_argument_bytes,
        }
    }

    /// Handles one SSE payload; returns true at `[DONE]`.
    pub fn event(
        &mut self,
        data: &str,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        // Keep-alives are SSE comment lines, which the parser already drops; a `data:`
        // payload that is not JSON is a broken stream, not something to skip over.
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return Err(ModelError::Stream(format!(
                "a stream event of {} bytes was not JSON",
                data.len()
            )));
        };
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(ModelError::Stream(redact(&message)));
        }
        self.saw_anything = true;
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.turn.usage_reported = true;
            self.turn.input_tokens = field("prompt_tokens");
            self.turn.output_tokens = field("completion_tokens");
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(false);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.turn.finish_reason = Some(reason.to_owned());
        }
        let delta = choice.get("delta").or_else(|| choice.get("message"));
        let Some(delta) = delta else {
            return Ok(false);
        };
        // Only `content` is text; `reasoning_content`, `reasoning` and the like are not read.
        match delta.get("content") {
            Some(Value::String(text)) => self.text(text, on_text),
            Some(Value::Array(parts)) => {
                for part in parts {
                    if part.get("type").and_then(Value::as_str) == Some("text")
                        && let Some(text) = part.get("text").and_then(Value::as_str)
                    {
                        self.text(text, on_text);
                    }
                }
            }
            _ => {}
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tool_delta(call);
            }
        }
        Ok(false)
    }

    fn text(&mut self, text: &str, on_text: &mut (dyn FnMut(&str) + Send)) {
        if !text.is_empty() {
            self.turn.text.push_str(text);
            on_text(text);
        }
    }

    fn tool_delta(&mut self, call: &Value) {
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = call.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
        let arguments = function.and_then(|f| f.get("arguments")).and_then(|a| {
            a.as_str()
                .map(str::to_owned)
                .or_else(|| (!a.is_null()).then(|| a.to_string()))
        });
        let slot = self.slot(call.get("index").and_then(Value::as_u64), id);
        let max_argument_bytes = self.max_argument_bytes;
        let Some(partial) = self.calls.get_mut(slot) else {
            return;
        };
        if partial.id.is_none() {
            partial.id = id.map(str::to_owned);
        }
        if let Some(name) = name
            && partial.name.is_empty()
        {
            partial.name = name.to_owned();
        }
        if let Some(arguments) = arguments {
            let bytes = u64::try_from(arguments.len()).unwrap_or(u64::MAX);
            partial.argument_bytes = partial.argument_bytes.saturating_add(bytes);
            if partial.argument_bytes <= max_argument_bytes {
                partial.arguments.push_str(&arguments);
            } else {
                // Over the cap: keep counting, keep nothing (memory stays flat).
                partial.arguments = String::new();
            }
        }
    }

    /// Which call a delta belongs to: by `index` when present (a new `id` on a used index
    /// starts a new call), else a new `id` starts a new call and no `id` continues the last.
    fn slot(&mut self, index: Option<u64>, id: Option<&str>) -> usize {
        let differs = |slot: usize, calls: &[PartialCall]| match (&calls[slot].id, id) {
            (Some(have), Some(new)) => have != new,
            _ => false,
        };
        match index {
            Some(index) => match self.by_index.get(&index) {
                Some(&slot) if !differs(slot, &self.calls) => slot,
                _ => {
                    self.calls.push(PartialCall::default());
                    let slot = self.calls.len() - 1;
                    self.by_index.insert(index, slot);
                    slot
                }
            },
            None => {
                let last = self.calls.len().checked_sub(1);
                match last {
                    Some(slot) if id.is_none() || !differs(slot, &self.calls) => slot,
                    _ => {
                        self.calls.push(PartialCall::default());
                        self.calls.len() - 1
                    }
                }
            }
        }
    }

    pub fn finish(mut self) -> ModelTurn {
        let max = self.max_argument_bytes;
        self.turn.tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.name.is_empty() || c.argument_bytes > 0)
            .map(|(n, c)| {
                let oversized = (c.argument_bytes > max).then_some(c.argument_bytes);
                ToolCall {
                    id: c.id.unwrap_or_else(|| format!("call_{n}")),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[Value]) -> ModelTurn {
        let mut a = Assembler::default();
        let mut sink = |_: &str| {};
        for e in events {
            a.event(&e.to_string(), &mut sink).expect("event");
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
    fn formatting_a_client_never_shows_the_key() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = ApiKey::new("sk-live-do-not-print").expect("key");
        let client = ChatClient::new(
            "http://127.0.0.1:9/v1",
            "m",
            key,
            StreamBounds::DEFAULT,
            None,
        )
        .expect("client");
        let shown = format!("{client:?} {client:#?}");
        assert!(!shown.contains("sk-live-do-not-print"), "{shown}");
        assert!(shown.contains("http://127.0.0.1:9"), "{shown}");
    }

    #[test]
    fn arguments_over_the_cap_are_dropped_and_counted() {
        let mut a = Assembler::new(8);
        let mut sink = |_: &str| {};
        for piece in ["{\"path\"", ":\"aaaa", "aaaa\"}"] {
            let event = json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read","arguments":piece}}]}}]});
            a.event(&event.to_string(), &mut sink).expect("event");
        }
        let turn = a.finish();
        assert_eq!(turn.tool_calls.len(), 1);
        assert_eq!(turn.tool_calls[0].arguments, "");
        assert_eq!(turn.tool_calls[0].oversized, Some(19));
        let mut a = Assembler::new(64);
        let event = json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"ls","arguments":"{}"}}]}}]});
        a.event(&event.to_string(), &mut sink).expect("event");
        let turn = a.finish();
        assert_eq!(turn.tool_calls[0].oversized, None);
        assert_eq!(turn.tool_calls[0].arguments, "{}");
    }

    /// Feeds `events` and returns the turn and everything `on_text` saw.
    fn feed_seen(events: &[Value]) -> (ModelTurn, String) {
        let mut a = Assembler::default();
        let mut seen = String::new();
        let mut sink = |t: &str| seen.push_str(t);
        for e in events {
            a.event(&e.to_string(), &mut sink).expect("event");
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

    fn request_body(field: CapField) -> Value {
        let conversation = Conversation {
            system: String::new(),
            items: vec![Item::User("hi".into())],
        };
        let request = Request {
            conversation: &conversation,
            tools: &[],
            tool_choice: ToolChoice::Auto,
            max_output_tokens: 512,
            max_text_bytes: None,
        };
        body("m", &request, field)
    }

    #[test]
    fn the_cap_travels_in_exactly_one_field() {
        let plain = request_body(CapField::MaxTokens);
        assert_eq!(plain["max_tokens"], 512);
        assert!(plain.get("max_completion_tokens").is_none(), "{plain}");
        let reasoning = request_body(CapField::MaxCompletionTokens);
        assert_eq!(reasoning["max_completion_tokens"], 512);
        assert!(reasoning.get("max_tokens").is_none(), "{reasoning}");
        assert_eq!(plain["messages"], reasoning["messages"]);
    }

    #[test]
    fn only_the_typed_refusal_switches_the_field() {
        let openai = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        assert!(refuses_max_tokens(openai));
        // A proxy's untyped copy of the message, another parameter, another code, a cut
        // or non-JSON body: none of them.
        for other in [
            r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","code":"invalid_request_body"}}"#,
            r#"{"error":{"message":"Unsupported parameter: 'temperature'","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}"#,
            r#"{"error":{"message":"max_tokens is too large","type":"invalid_request_error","param":"max_tokens","code":"integer_above_max_value"}}"#,
            r#"{"error":{"code":400,"message":"Failed to parse grammar","type":"invalid_request_error"}}"#,
            r#"{"error":{"message":"Unsupported parameter: 'max_tokens'","param":"max_tok"#,
            "Unsupported parameter: 'max_tokens' is not supported with this model.",
        ] {
            assert!(!refuses_max_tokens(other), "{other}");
        }
    }

    #[test]
    fn an_explicit_choice_is_never_learned_over() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = ApiKey::new("k").expect("key");
        let explicit = ChatClient::new(
            "http://127.0.0.1:9/v1",
            "explicit-model",
            key.clone(),
            StreamBounds::DEFAULT,
            Some(OutputTokensParam::MaxTokens),
        )
        .expect("client");
        explicit.learn_max_completion_tokens();
        assert_eq!(explicit.cap_field(), CapField::MaxTokens);
        let learning = ChatClient::new(
            "http://127.0.0.1:9/v1/",
            "explicit-model",
            key,
            StreamBounds::DEFAULT,
            None,
        )
        .expect("client");
        assert_eq!(learning.cap_field(), CapField::MaxCompletionTokens);
    }

    #[test]
    fn endpoint_from_base() {
        assert_eq!(endpoint("http://h/v1/"), "http://h/v1/chat/completions");
        assert_eq!(
            endpoint("http://h/v1/chat/completions"),
            "http://h/v1/chat/completions"
        );
    }
}
