//! Model protocols. Only `openai-completions` (streaming Chat Completions) is implemented.

pub mod openai;
pub mod sse;

/// Protocols this worker advertises in `hello`.
pub const PROTOCOLS: &[&str] = &["openai-completions"];

/// A tool call assembled from stream deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One completed model response.
#[derive(Debug, Clone, Default)]
pub struct ModelTurn {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model endpoint answered HTTP {status}: {excerpt}")]
    Http { status: u16, excerpt: String },
    #[error("model request failed: {0}")]
    Transport(String),
    #[error("model stream was unusable: {0}")]
    Stream(String),
}
