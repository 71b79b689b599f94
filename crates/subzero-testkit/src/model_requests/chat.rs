//! A Chat Completions request body (`POST …/chat/completions`).

use serde::Deserialize;
use serde_json::Value;

use super::ContentText;
use crate::RecordedRequest;

/// The request body.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    pub model: String,
    pub messages: Vec<Message>,
    /// The declared tools; `None` when the body has no `tools`.
    pub tools: Option<Vec<Tool>>,
    /// Free-form (`"none"`, `"auto"` or an object); absent when not sent.
    pub tool_choice: Option<Value>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<u64>,
    pub max_completion_tokens: Option<u64>,
}

impl Request {
    /// The body of `request`; panics with it when it is not a Chat Completions request.
    pub fn of(request: &RecordedRequest) -> Self {
        super::view(request)
    }

    /// The output-token cap and the field that carried it; panics unless exactly one did.
    pub fn cap(&self) -> (&'static str, u64) {
        match (self.max_tokens, self.max_completion_tokens) {
            (Some(v), None) => ("max_tokens", v),
            (None, Some(v)) => ("max_completion_tokens", v),
            other => panic!("the cap must travel in exactly one field: {other:?} in {self:#?}"),
        }
    }

    /// The contents of the `role: tool` messages, in order.
    pub fn tool_results(&self) -> Vec<&str> {
        self.with_role("tool")
            .filter_map(|m| m.content.as_deref())
            .collect()
    }

    /// The `(tool_call_id, content)` of the `role: tool` messages, in order.
    pub fn tool_answers(&self) -> Vec<(&str, &str)> {
        self.with_role("tool")
            .map(|m| {
                (
                    m.tool_call_id.as_deref().unwrap_or_default(),
                    m.content.as_deref().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The `tool_call_id`s the `role: tool` messages answer, in order.
    pub fn answered_ids(&self) -> Vec<&str> {
        self.with_role("tool")
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect()
    }

    /// The ids of every assistant tool call, in order.
    pub fn call_ids(&self) -> Vec<&str> {
        self.messages
            .iter()
            .flat_map(|m| &m.tool_calls)
            .map(|c| c.id.as_str())
            .collect()
    }

    /// The first assistant message, if any.
    pub fn assistant(&self) -> Option<&Message> {
        self.with_role("assistant").next()
    }

    /// The names of the declared tools, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .flatten()
            .map(|t| t.function.name.as_str())
            .collect()
    }

    fn with_role<'a>(&'a self, role: &'a str) -> impl Iterator<Item = &'a Message> {
        self.messages.iter().filter(move |m| m.role == role)
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

/// One message of the conversation.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub role: String,
    /// Text content (null on an assistant turn that only calls tools).
    pub content: Option<ContentText>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

/// The function a [`ToolCall`] names, with its arguments as sent (a JSON text).
#[derive(Debug, Clone, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

/// One declared tool.
#[derive(Debug, Clone, Deserialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: Function,
}

/// A declared function.
#[derive(Debug, Clone, Deserialize)]
pub struct Function {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Value,
}
