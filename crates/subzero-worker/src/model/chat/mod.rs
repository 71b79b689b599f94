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

mod stream;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use subzero_protocol::OutputTokensParam;

use super::protocol::Protocol;
use super::wire::lenient;
use super::{Conversation, Item, ModelError, Request, ToolChoice, ToolSpec};

pub use stream::ChatStream;

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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

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
