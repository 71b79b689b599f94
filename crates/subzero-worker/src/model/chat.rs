//! Streaming Chat Completions (`openai-completions`), lenient about common deviations:
//! a missing tool-call `index`, missing `created`/`id`, unknown `finish_reason`, SSE
//! comment keep-alives, `"content": null` deltas, ids only on a call's first chunk, and a
//! stream that ends without `[DONE]` after a `finish_reason`. A `data:` payload that is not
//! JSON, or a stream cut before any `finish_reason`, fails the request.
//!
//! Reasoning is never text: a delta's `reasoning_content` (vLLM up to 0.10, DeepSeek,
//! llama.cpp's server), `reasoning` (vLLM from 0.11, OpenRouter, Ollama) and `thinking`
//! parts of a `content` list (Mistral's reasoning models) are read past, so they reach
//! neither `on_text`, the result nor the transcript. Only `content` is text.
//!
//! The output-token cap travels as `max_tokens` unless the caller chose
//! `max_completion_tokens` (`outputTokensParam`) or the endpoint refused `max_tokens` with
//! OpenAI's typed HTTP 400. That refusal is the one request this protocol repeats
//! ([`Protocol::adapts_to`]): the endpoint generated nothing, so the repeat is the same
//! request in the shape it asked for, not a retry of a generation. The worker remembers the
//! refusal in its [`Learned`] for the rest of its life (it serves every run of its child).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use subzero_protocol::OutputTokensParam;

use super::partial::{Calls, Draft};
use super::protocol::{Assembler, Flow, OnText, Protocol};
use super::wire::{self, ProviderError, lenient};
use super::{Conversation, Item, ModelError, ModelTurn, Request, ToolChoice, ToolSpec};

/// Chat Completions against one endpoint and model.
#[derive(Debug, Clone)]
pub struct Chat {
    /// The endpoint and model, as [`Learned`] keys them.
    endpoint: (String, String),
    cap: CapChoice,
    learned: Arc<Learned>,
}

/// The request field that carries the output-token cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CapField {
    MaxTokens,
    MaxCompletionTokens,
}

/// How the cap field is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CapChoice {
    /// The caller named it (`outputTokensParam`): sent as is, never switched.
    Explicit(CapField),
    /// Nobody named it: `max_tokens` until the endpoint refuses it (see [`refuses_max_tokens`]).
    Learned,
}

/// What endpoints taught this worker: the (endpoint, model) pairs that refused
/// `max_tokens` with the typed 400, sent `max_completion_tokens` from then on. One per
/// worker (a client is built per run), never process-global.
#[derive(Debug, Default)]
pub struct Learned {
    refuse_max_tokens: Mutex<BTreeSet<(String, String)>>,
}

impl Learned {
    fn refuses_max_tokens(&self, endpoint: &(String, String)) -> bool {
        self.refuse_max_tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(endpoint)
    }

    fn learn_max_completion_tokens(&self, endpoint: &(String, String)) {
        self.refuse_max_tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(endpoint.clone());
    }
}

impl Chat {
    /// `output_tokens` is the caller's `outputTokensParam`; `None` learns it in `learned`.
    pub fn new(
        url: &str,
        model: &str,
        output_tokens: Option<OutputTokensParam>,
        learned: Arc<Learned>,
    ) -> Self {
        let cap = match output_tokens {
            None => CapChoice::Learned,
            Some(OutputTokensParam::MaxTokens) => CapChoice::Explicit(CapField::MaxTokens),
            Some(OutputTokensParam::MaxCompletionTokens) => {
                CapChoice::Explicit(CapField::MaxCompletionTokens)
            }
        };
        Self {
            endpoint: (Self::endpoint(url), model.to_owned()),
            cap,
            learned,
        }
    }

    /// The cap field of the next request.
    fn cap_field(&self) -> CapField {
        match self.cap {
            CapChoice::Explicit(field) => field,
            CapChoice::Learned if self.learned.refuses_max_tokens(&self.endpoint) => {
                CapField::MaxCompletionTokens
            }
            CapChoice::Learned => CapField::MaxTokens,
        }
    }
}

impl Protocol for Chat {
    type Body<'a> = Body<'a>;
    type Assembler = ChatStream;
    const PATH: &'static str = "/chat/completions";

    fn body<'a>(&self, model: &'a str, request: &Request<'a>) -> Body<'a> {
        body(model, request, self.cap_field())
    }

    fn adapts_to(&self, error: &ModelError) -> bool {
        let ModelError::Http {
            status: 400,
            excerpt,
        } = error
        else {
            return false;
        };
        let adapts = self.cap == CapChoice::Learned
            && self.cap_field() == CapField::MaxTokens
            && refuses_max_tokens(excerpt);
        if adapts {
            self.learned.learn_max_completion_tokens(&self.endpoint);
            tracing::info!(
                model = %self.endpoint.1,
                "the endpoint refused max_tokens (HTTP 400 unsupported_parameter); sending max_completion_tokens from now on"
            );
        }
        adapts
    }
}

/// The request body (`POST …/chat/completions`).
#[derive(Debug, Serialize)]
pub struct Body<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Declaration<'a>>>,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` for an answer that only called tools.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<CallOut<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Debug, Serialize)]
struct CallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionOut<'a>,
}

#[derive(Debug, Serialize)]
struct FunctionOut<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// A tool as a Chat Completions function declaration.
#[derive(Debug, Serialize)]
struct Declaration<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDeclaration<'a>,
}

#[derive(Debug, Serialize)]
struct FunctionDeclaration<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// The request body, with the output-token cap in `field`.
fn body<'a>(model: &'a str, request: &Request<'a>, field: CapField) -> Body<'a> {
    let cap = Some(request.max_output_tokens);
    // Without tools the request carries none: local servers differ on `tool_choice`,
    // and earlier tool turns need no declarations in Chat Completions.
    let tools = (request.tool_choice == ToolChoice::Auto && !request.tools.is_empty())
        .then(|| request.tools.iter().map(declaration).collect());
    Body {
        model,
        messages: messages(request.conversation),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens: cap.filter(|_| field == CapField::MaxTokens),
        max_completion_tokens: cap.filter(|_| field == CapField::MaxCompletionTokens),
        tools,
    }
}

fn declaration(tool: &ToolSpec) -> Declaration<'_> {
    Declaration {
        kind: "function",
        function: FunctionDeclaration {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
        },
    }
}

/// The conversation as Chat Completions messages: system first, then each turn.
fn messages(conversation: &Conversation) -> Vec<Message<'_>> {
    let system = (!conversation.system.is_empty()).then_some(Message::System {
        content: &conversation.system,
    });
    let turns = conversation.items.iter().map(|item| match item {
        Item::User(text) => Message::User { content: text },
        Item::Assistant { text, calls } => Message::Assistant {
            content: text.as_deref(),
            tool_calls: calls
                .iter()
                .map(|call| CallOut {
                    id: &call.id,
                    kind: "function",
                    function: FunctionOut {
                        name: &call.name,
                        arguments: &call.arguments,
                    },
                })
                .collect(),
        },
        Item::ToolResult {
            call_id, content, ..
        } => Message::Tool {
            tool_call_id: call_id,
            content,
        },
    });
    system.into_iter().chain(turns).collect()
}

/// Whether an HTTP 400 body is OpenAI's typed refusal of `max_tokens`,
/// `{"error": {"param": "max_tokens", "code": "unsupported_parameter", …}}` (the message
/// says "Use 'max_completion_tokens' instead"). Nothing else switches the field: not the
/// message text, not the URL, not the model name.
fn refuses_max_tokens(body: &str) -> bool {
    #[derive(Deserialize)]
    struct Refusal {
        error: RefusalError,
    }
    #[derive(Deserialize)]
    struct RefusalError {
        #[serde(default, deserialize_with = "lenient")]
        param: Option<String>,
        #[serde(default, deserialize_with = "lenient")]
        code: Option<String>,
    }
    serde_json::from_str::<Refusal>(body).is_ok_and(|r| {
        r.error.param.as_deref() == Some("max_tokens")
            && r.error.code.as_deref() == Some("unsupported_parameter")
    })
}

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
        Self::new(super::StreamBounds::DEFAULT.max_tool_argument_bytes)
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
        serde_json::to_value(body("m", &request, field)).expect("body")
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
    fn an_explicit_choice_is_never_learned_over_and_learning_stays_in_its_worker() {
        let learned = Arc::new(Learned::default());
        let url = "http://127.0.0.1:9/v1";
        let explicit = Chat::new(
            url,
            "m",
            Some(OutputTokensParam::MaxTokens),
            learned.clone(),
        );
        learned.learn_max_completion_tokens(&explicit.endpoint);
        assert_eq!(explicit.cap_field(), CapField::MaxTokens);
        let learning = Chat::new("http://127.0.0.1:9/v1/", "m", None, learned);
        assert_eq!(learning.cap_field(), CapField::MaxCompletionTokens);
        let other_worker = Chat::new(url, "m", None, Arc::new(Learned::default()));
        assert_eq!(other_worker.cap_field(), CapField::MaxTokens);
    }

    #[test]
    fn only_a_learning_choice_adapts_to_the_typed_refusal_and_only_once() {
        let refusal = ModelError::Http {
            status: 400,
            excerpt: r#"{"error":{"param":"max_tokens","code":"unsupported_parameter"}}"#.into(),
        };
        let learned = Arc::new(Learned::default());
        let chat = Chat::new("http://h/v1", "m", None, learned.clone());
        assert!(chat.adapts_to(&refusal));
        assert!(!chat.adapts_to(&refusal), "the field is already switched");
        let explicit = Chat::new(
            "http://h2/v1",
            "m",
            Some(OutputTokensParam::MaxTokens),
            learned,
        );
        assert!(!explicit.adapts_to(&refusal));
    }
}
