//! Model protocols behind one client. A [`Protocol`] says where a request goes, its
//! headers, its typed body and how its stream reads back into a [`ModelTurn`];
//! [`client::Client`] does the rest once for all of them — the POST through
//! [`http::OriginBound`] (the origin policy, the idle timeout, the response byte cap), the
//! SSE framing, the text cap — and [`partial`] holds the partial-call and argument-cap code
//! every assembler uses. None retries (the one repeated request, Chat Completions' typed
//! refusal of `max_tokens`, generated nothing: see [`chat`]).

pub mod anthropic;
pub mod chat;
pub mod client;
pub mod conversation;
pub mod http;
pub mod partial;
pub mod protocol;
pub mod responses;
pub mod sse;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

pub use chat::Learned;
pub use conversation::{Call, Conversation, Item, Request, ToolChoice, ToolSpec};
pub use protocol::{Assembler, Flow, OnText};

use crate::control::{ModelApi, WorkerModel};
use client::Client;

/// Protocols this worker advertises in `hello`.
pub const PROTOCOLS: &[&str] = &[
    "openai-completions",
    "openai-responses",
    "anthropic-messages",
];

/// A client for the protocol `model.api` names (never inferred from the URL).
#[derive(Debug, Clone)]
pub enum ModelClient {
    Chat(Client<chat::Chat>),
    Responses(Client<responses::Responses>),
    Messages(Client<anthropic::Messages>),
}

impl ModelClient {
    /// The client for `model`: every `ModelApi` value has one (each is in [`PROTOCOLS`]).
    /// `learned` is what this worker's endpoints taught it in earlier runs.
    pub fn new(
        model: &WorkerModel,
        bounds: StreamBounds,
        learned: &Arc<Learned>,
    ) -> Result<Self, ModelError> {
        let (url, name, key) = (&model.url, &model.model, model.key.clone());
        Ok(match model.api {
            ModelApi::OpenaiCompletions => {
                let chat = chat::Chat::new(url, name, model.output_tokens_param, learned.clone());
                Self::Chat(Client::new(url, name, key, bounds, chat)?)
            }
            ModelApi::OpenaiResponses => {
                Self::Responses(Client::new(url, name, key, bounds, responses::Responses)?)
            }
            ModelApi::AnthropicMessages => {
                Self::Messages(Client::new(url, name, key, bounds, anthropic::Messages)?)
            }
        })
    }

    /// Bytes of the body `request` is sent as (what the context meter projects from).
    pub fn body_bytes(&self, request: &Request<'_>) -> u64 {
        match self {
            Self::Chat(client) => client.body_bytes(request),
            Self::Responses(client) => client.body_bytes(request),
            Self::Messages(client) => client.body_bytes(request),
        }
    }

    /// Sends one streaming request; `on_text` sees each text delta as it arrives.
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_text: &mut OnText<'_>,
    ) -> Result<ModelTurn, ModelError> {
        match self {
            Self::Chat(client) => client.complete(request, on_text).await,
            Self::Responses(client) => client.complete(request, on_text).await,
            Self::Messages(client) => client.complete(request, on_text).await,
        }
    }
}

/// What one model response may cost the worker. The broker sends them in `start_run`
/// (`streamLimits`, from `[limits]` of its config); [`StreamBounds::DEFAULT`] otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamBounds {
    /// Bytes of one response body as received (`model_response_bytes`).
    pub max_response_bytes: u64,
    /// Bytes of one tool call's arguments (`tool_argument_bytes`).
    pub max_tool_argument_bytes: u64,
    /// Longest silence: before the headers, and between two body chunks
    /// (`model_idle_timeout_ms`).
    pub idle: Duration,
}

impl StreamBounds {
    /// The defaults documented in `docs/operations.md`.
    pub const DEFAULT: StreamBounds = StreamBounds {
        max_response_bytes: 8 * 1024 * 1024,
        max_tool_argument_bytes: 1024 * 1024,
        idle: Duration::from_secs(180),
    };
}

impl Default for StreamBounds {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A tool call assembled from stream deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as sent; empty when they were over the cap (see `oversized`).
    pub arguments: String,
    /// Bytes of arguments the model sent when they passed `max_tool_argument_bytes`: the
    /// arguments were dropped and the call is answered with a short tool error.
    pub oversized: Option<u64>,
}

/// One completed model response.
#[derive(Debug, Clone, Default)]
pub struct ModelTurn {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    /// Tokens as the stream reported them (0 when it reported none: see `usage_reported`).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The stream carried a usage object. Without one the worker estimates the turn's
    /// tokens from `request_bytes` and `response_bytes` (`crate::usage`).
    pub usage_reported: bool,
    /// Bytes of the request body that produced this answer.
    pub request_bytes: u64,
    /// Bytes of the response body received (SSE framing included), up to where the
    /// worker stopped reading.
    pub response_bytes: u64,
    /// The worker stopped reading at [`Request::max_text_bytes`]: the text is the answer
    /// up to (at least) that cap, and the rest of the stream was never read.
    pub text_capped: bool,
}

impl ModelTurn {
    /// Records what it took to get this answer: the request sent and the body received.
    fn sent_and_received(mut self, request_bytes: usize, response_bytes: u64) -> Self {
        self.request_bytes = u64::try_from(request_bytes).unwrap_or(u64::MAX);
        self.response_bytes = response_bytes;
        self
    }

    /// An answer whose stream the worker stopped at the text cap.
    fn capped(mut self) -> Self {
        self.text_capped = true;
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model endpoint answered HTTP {status}: {excerpt}")]
    Http { status: u16, excerpt: String },
    #[error("model request failed: {0}")]
    Transport(String),
    #[error("model stream was unusable: {0}")]
    Stream(String),
    #[error(
        "the model endpoint redirected to another origin, {target}; the key and the prompt are only sent to {allowed}, so nothing was sent there: set model.url to the endpoint that answers"
    )]
    Redirect { target: String, allowed: String },
    #[error(
        "the model endpoint sent nothing for {ms} ms {what} (model_idle_timeout_ms in [limits])"
    )]
    Idle { what: String, ms: u64 },
    /// The endpoint refused the request as longer than the model's context window (HTTP
    /// `status`, or `None` for an error event in the stream); nothing was generated.
    #[error("the model endpoint refused the prompt as longer than its context window: {excerpt}")]
    ContextExhausted {
        status: Option<u16>,
        excerpt: String,
    },
    #[error(
        "the model response passed {max} bytes (model_response_bytes in [limits]); it was cut there"
    )]
    TooLarge { max: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::WorkerModel;

    #[test]
    fn formatting_a_client_of_any_protocol_never_shows_the_key() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let learned = Arc::new(Learned::default());
        for api in [
            "openai-completions",
            "openai-responses",
            "anthropic-messages",
        ] {
            let model: WorkerModel = serde_json::from_value(serde_json::json!({
                "url": "http://127.0.0.1:9/v1", "model": "m", "api": api,
                "key": "sk-live-do-not-print"
            }))
            .expect("model");
            let client = ModelClient::new(&model, StreamBounds::DEFAULT, &learned).expect("client");
            let shown = format!("{client:?} {client:#?}");
            assert!(!shown.contains("sk-live-do-not-print"), "{shown}");
            assert!(shown.contains("http://127.0.0.1:9"), "{shown}");
        }
    }
}
