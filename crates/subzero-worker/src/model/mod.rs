//! Model protocols: each turns a protocol-neutral [`Request`] into its own streaming
//! request and its stream back into a [`ModelTurn`]. Every protocol sends through
//! [`http::OriginBound`], so the origin and stream bounds hold for each; none retries (the
//! one repeated request, Chat Completions' typed refusal of `max_tokens`, generated nothing:
//! see [`openai`]).

pub mod anthropic;
pub mod conversation;
pub mod http;
pub mod openai;
pub mod responses;
pub mod sse;

use std::time::Duration;

pub use conversation::{Call, Conversation, Item, Request, ToolChoice, ToolSpec};

use crate::control::{ModelApi, WorkerModel};

/// Protocols this worker advertises in `hello`.
pub const PROTOCOLS: &[&str] = &[
    "openai-completions",
    "openai-responses",
    "anthropic-messages",
];

/// A client for the protocol `model.api` names (never inferred from the URL).
#[derive(Debug, Clone)]
pub enum ModelClient {
    Chat(openai::ChatClient),
    Responses(responses::ResponsesClient),
    Messages(anthropic::MessagesClient),
}

impl ModelClient {
    /// The client for `model`: every `ModelApi` value has one (each is in [`PROTOCOLS`]).
    pub fn new(model: &WorkerModel, bounds: StreamBounds) -> Result<Self, ModelError> {
        match model.api {
            ModelApi::OpenaiCompletions => Ok(Self::Chat(openai::ChatClient::new(
                &model.url,
                &model.model,
                model.key.clone(),
                bounds,
                model.output_tokens_param,
            )?)),
            ModelApi::OpenaiResponses => Ok(Self::Responses(responses::ResponsesClient::new(
                &model.url,
                &model.model,
                model.key.clone(),
                bounds,
            )?)),
            ModelApi::AnthropicMessages => Ok(Self::Messages(anthropic::MessagesClient::new(
                &model.url,
                &model.model,
                model.key.clone(),
                bounds,
            )?)),
        }
    }

    /// Sends one streaming request; `on_text` sees each text delta as it arrives.
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_text: &mut (dyn FnMut(&str) + Send),
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
    #[error(
        "the model response passed {max} bytes (model_response_bytes in [limits]); it was cut there"
    )]
    TooLarge { max: u64 },
}
