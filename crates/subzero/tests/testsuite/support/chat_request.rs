//! A chat-completions request as the scripted model received it, read as a type: the part
//! of the OpenAI wire the tests assert on (messages, the token cap, the usage option).

use serde::Deserialize;
use serde_json::Value;
use subzero_testkit::RecordedRequest;

/// The body of one request to the scripted model.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// The conversation sent, oldest first.
    #[serde(default)]
    pub messages: Vec<ChatMessage>,
    /// The tools offered; none when the request offers no tools.
    pub tools: Option<Vec<Value>>,
    /// The output-token cap.
    pub max_tokens: Option<u64>,
    /// `stream_options`, when the request asks for them.
    pub stream_options: Option<StreamOptions>,
}

/// One message of a request.
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message's content: a string, parts, or null.
    #[serde(default)]
    pub content: Value,
    /// For a tool result, the call it answers.
    pub tool_call_id: Option<String>,
    /// For an assistant message, the tool calls it made (absent or null when none).
    pub tool_calls: Option<Vec<ChatToolCall>>,
}

/// One tool call of an assistant message, as far as the tests read it.
#[derive(Debug, Deserialize)]
pub struct ChatToolCall {
    /// The call's id, which its tool result names as `tool_call_id`.
    pub id: String,
}

impl ChatMessage {
    /// The content when it is a plain string ("" otherwise).
    pub fn text(&self) -> &str {
        self.content.as_str().unwrap_or_default()
    }
}

/// `stream_options` of a streamed request.
#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    /// Whether the stream's last chunk reports usage.
    pub include_usage: Option<bool>,
}

impl ChatRequest {
    /// Reads a recorded request's body, panicking with it when it is not a chat request.
    pub fn of(request: &RecordedRequest) -> ChatRequest {
        let body = request.json().expect("json body");
        serde_json::from_value(body.clone())
            .unwrap_or_else(|e| panic!("not a chat-completions request ({e}): {body:#}"))
    }

    /// The tool results sent, in order.
    pub fn tool_results(&self) -> Vec<&ChatMessage> {
        self.messages.iter().filter(|m| m.role == "tool").collect()
    }
}
