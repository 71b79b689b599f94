//! An Anthropic Messages request body (`POST …/messages`).

use serde::Deserialize;
use serde_json::Value;

use super::ContentText;
use crate::RecordedRequest;
use crate::model_messages::check_request;

/// The request body.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    pub model: String,
    pub max_tokens: u64,
    pub stream: Option<bool>,
    pub system: Option<System>,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Free-form (`{"type": "none"}`, …); absent when not sent.
    pub tool_choice: Option<Value>,
}

impl Request {
    /// The body of `request`, after checking that the Messages API would accept it
    /// ([`check_request`]); panics with the body otherwise.
    pub fn of(request: &RecordedRequest) -> Self {
        super::checked(request, "Messages", check_request)
    }

    /// The blocks of the last message.
    pub fn last_blocks(&self) -> &[Block] {
        self.messages.last().map_or(&[], |m| m.content.as_slice())
    }

    /// The roles of the messages, in order.
    pub fn roles(&self) -> Vec<&str> {
        self.messages.iter().map(|m| m.role.as_str()).collect()
    }

    /// The names of the declared tools, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// Every `tool_result` block, in order.
    pub fn tool_results(&self) -> Vec<ToolResult<'_>> {
        self.messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(Block::as_tool_result)
            .collect()
    }
}

/// The system prompt: a string, or text blocks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum System {
    Text(String),
    Blocks(Vec<Block>),
}

/// One message: its role and content blocks (unknown fields refused).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: String,
    pub content: Vec<Block>,
}

/// One content block; unknown fields are refused, so comparing blocks is exact.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Block {
    Text {
        text: String,
        /// A prompt-caching breakpoint, when the client sets one.
        cache_control: Option<Value>,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
        cache_control: Option<Value>,
    },
    ToolResult {
        tool_use_id: String,
        content: ContentText,
        is_error: Option<bool>,
        cache_control: Option<Value>,
    },
}

impl Block {
    /// A text block of `text`.
    pub fn text(text: &str) -> Self {
        Block::Text {
            text: text.to_owned(),
            cache_control: None,
        }
    }

    /// A `tool_use` block.
    pub fn tool_use(id: &str, name: &str, input: Value) -> Self {
        Block::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
            cache_control: None,
        }
    }

    /// The block as a tool result, when it is one.
    pub fn as_tool_result(&self) -> Option<ToolResult<'_>> {
        match self {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => Some(ToolResult {
                tool_use_id,
                content,
                is_error: *is_error,
            }),
            _ => None,
        }
    }

    /// The block as a tool result; panics with the block otherwise.
    pub fn tool_result(&self) -> ToolResult<'_> {
        self.as_tool_result()
            .unwrap_or_else(|| panic!("not a tool_result block: {self:?}"))
    }
}

/// A `tool_result` block's fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolResult<'a> {
    pub tool_use_id: &'a str,
    pub content: &'a str,
    pub is_error: Option<bool>,
}

/// One declared tool.
#[derive(Debug, Clone, Deserialize)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
}
