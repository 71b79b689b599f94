//! The protocol-neutral request: what the transcript says, before any protocol encodes it.
//!
//! The transcript stores turns in this shape too, so a child may resume on another
//! protocol: each protocol module turns a [`Request`] into its own body and its stream back
//! into a [`ModelTurn`](super::ModelTurn).

use serde_json::Value;

/// One conversation, oldest first, as the model is to see it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// Instructions and skills; empty when the template has none.
    pub system: String,
    pub items: Vec<Item>,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Text from the user side: a prompt, a steer, a recovery or budget notice.
    User(String),
    /// A model answer: its text (if any) and the tool calls it made.
    Assistant {
        text: Option<String>,
        calls: Vec<Call>,
    },
    /// The result of one tool call, answering [`Call::id`].
    ToolResult {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

/// A tool call as recorded: arguments are the JSON text the model sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool the model may call: name, description and a JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// Whether the model may call tools in this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChoice {
    /// The declared tools are offered.
    Auto,
    /// No tool may be called (the handoff request after a budget was reached). Protocols
    /// that need the declarations to read earlier tool turns keep them and forbid calls.
    None,
}

/// One model request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub conversation: &'a Conversation,
    pub tools: &'a [ToolSpec],
    pub tool_choice: ToolChoice,
    pub max_output_tokens: u32,
    /// Stop reading the stream once the answer's text reaches this many bytes (the
    /// handoff summary's byte cap); the turn then says [`ModelTurn::text_capped`]. `None`:
    /// the stream is read to its end (within the response byte cap).
    ///
    /// [`ModelTurn::text_capped`]: super::ModelTurn::text_capped
    pub max_text_bytes: Option<usize>,
}

impl Request<'_> {
    /// Whether an answer with `text_bytes` of text has reached [`Self::max_text_bytes`].
    pub fn text_cap_reached(&self, text_bytes: usize) -> bool {
        self.max_text_bytes.is_some_and(|cap| text_bytes >= cap)
    }
}

impl Call {
    /// The arguments as a JSON value, for protocols that send objects (an argument text
    /// that is not a JSON object is sent as `{}`; the tool already answered it as invalid).
    pub fn arguments_object(&self) -> Value {
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(value @ Value::Object(_)) => value,
            _ => Value::Object(serde_json::Map::new()),
        }
    }
}

#[cfg(test)]
impl Call {
    /// A recorded call, for tests.
    pub fn of(id: &str, name: &str, arguments: &str) -> Self {
        Self {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }
}

#[cfg(test)]
impl Item {
    /// An answer that only called tools, for tests.
    pub fn calling(calls: Vec<Call>) -> Self {
        Self::Assistant { text: None, calls }
    }

    /// A successful result of `call_id` from `name`, for tests.
    pub fn result(call_id: &str, name: &str, content: &str) -> Self {
        Self::ToolResult {
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            content: content.to_owned(),
            is_error: false,
        }
    }
}
