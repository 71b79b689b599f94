//! Streaming Chat Completions (`openai-completions`), lenient about common deviations:
//! a missing tool-call `index`, missing `created`/`id`, unknown `finish_reason`, SSE
//! comment keep-alives, and a stream that ends without `[DONE]` after a `finish_reason`.
//! A `data:` payload that is not JSON, or a stream cut before any `finish_reason`, fails
//! the request.

use std::collections::HashMap;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use subzero_protocol::ApiKey;

use super::http::OriginBound;
use super::sse::SseParser;
use super::{ModelError, ModelTurn, StreamBounds, ToolCall};
use crate::redact::redact;

/// One Chat Completions endpoint. `Debug` shows the origin and model, never the key.
#[derive(Clone)]
pub struct ChatClient {
    http: OriginBound,
    model: String,
    key: ApiKey,
    bounds: StreamBounds,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatClient")
            .field("http", &self.http)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ChatClient {
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
        messages: Vec<Value>,
        tools: Vec<Value>,
        max_output_tokens: u32,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ModelTurn, ModelError> {
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
            "max_tokens": max_output_tokens,
        });
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        let body = serde_json::to_vec(&body)
            .map_err(|e| ModelError::Transport(format!("cannot encode the request: {e}")))?;
        let mut headers = HeaderMap::new();
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", self.key.expose()))
            .map_err(|_| ModelError::Transport("the key is not a valid header value".into()))?;
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        let mut response = self.http.post(headers, body).await?;
        // The body is already cut at `max_response_bytes`, so no line can pass this cap
        // here; it keeps the parser bounded on its own terms.
        let mut parser = SseParser::with_max_line(
            usize::try_from(self.bounds.max_response_bytes).unwrap_or(usize::MAX),
        );
        let mut assembler = Assembler::new(self.bounds.max_tool_argument_bytes);
        while let Some(chunk) = response.chunk().await? {
            for data in parser.feed(&chunk)? {
                if assembler.event(&data, on_text)? {
                    return Ok(assembler.finish());
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
        Ok(assembler.finish())
    }
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
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.turn.text.push_str(text);
            on_text(text);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tool_delta(call);
            }
        }
        Ok(false)
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
        let client = ChatClient::new("http://127.0.0.1:9/v1", "m", key, StreamBounds::DEFAULT)
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

    #[test]
    fn endpoint_from_base() {
        assert_eq!(endpoint("http://h/v1/"), "http://h/v1/chat/completions");
        assert_eq!(
            endpoint("http://h/v1/chat/completions"),
            "http://h/v1/chat/completions"
        );
    }
}
