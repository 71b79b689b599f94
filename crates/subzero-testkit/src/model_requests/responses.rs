//! An OpenAI Responses request body (`POST …/responses`).

use serde::Deserialize;
use serde_json::Value;

use super::ContentText;
use crate::RecordedRequest;
use crate::model_responses::check_request;

/// The request body.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    pub model: String,
    pub stream: Option<bool>,
    pub store: Option<bool>,
    pub max_output_tokens: Option<u64>,
    pub instructions: Option<String>,
    pub previous_response_id: Option<String>,
    pub input: Vec<Item>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Free-form (`"none"`, `"auto"` or an object); absent when not sent.
    pub tool_choice: Option<Value>,
}

impl Request {
    /// The body of `request`, after checking that the Responses API would accept it
    /// ([`check_request`]); panics with the body otherwise.
    pub fn of(request: &RecordedRequest) -> Self {
        super::checked(request, "Responses", check_request)
    }

    /// The `function_call` items, in order.
    pub fn calls(&self) -> Vec<&Call> {
        self.input
            .iter()
            .filter_map(|i| match i {
                Item::FunctionCall(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    /// The `function_call_output` items, in order.
    pub fn outputs(&self) -> Vec<&Output> {
        self.input
            .iter()
            .filter_map(|i| match i {
                Item::FunctionCallOutput(output) => Some(output),
                _ => None,
            })
            .collect()
    }

    /// The text of every user `message` item, in order.
    pub fn user_texts(&self) -> Vec<String> {
        self.input
            .iter()
            .filter_map(|i| match i {
                Item::Message(m) if m.role == "user" => Some(m.text()),
                _ => None,
            })
            .collect()
    }

    /// The names of the declared tools, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }
}

/// One `input` item; unknown fields are refused, so comparing items is exact. A message
/// may come without `type` (the API's short form); [`Message::typed`] says which.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Message(Message),
    FunctionCall(Call),
    FunctionCallOutput(Output),
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = serde_json::Map::deserialize(deserializer)?;
        let kind = match fields.remove("type") {
            None => None,
            Some(Value::String(kind)) => Some(kind),
            Some(other) => return Err(D::Error::custom(format!("an item type {other}"))),
        };
        let rest = Value::Object(fields);
        let item = match kind.as_deref() {
            None => Message::deserialize(rest).map(Item::Message),
            Some("message") => {
                Message::deserialize(rest).map(|m| Item::Message(Message { typed: true, ..m }))
            }
            Some("function_call") => Call::deserialize(rest).map(Item::FunctionCall),
            Some("function_call_output") => Output::deserialize(rest).map(Item::FunctionCallOutput),
            Some(other) => {
                return Err(D::Error::custom(format!("an input item of type {other}")));
            }
        };
        item.map_err(D::Error::custom)
    }
}

impl Item {
    /// The `type` of the item.
    pub fn kind(&self) -> &'static str {
        match self {
            Item::Message(_) => "message",
            Item::FunctionCall(_) => "function_call",
            Item::FunctionCallOutput(_) => "function_call_output",
        }
    }

    /// A user message of one `input_text` part.
    pub fn user(text: &str) -> Self {
        Item::Message(Message {
            typed: true,
            role: "user".to_owned(),
            content: Content::Parts(vec![Part {
                kind: "input_text".to_owned(),
                text: text.to_owned(),
            }]),
        })
    }
}

/// A `message` item.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Whether the item said `type: "message"`.
    #[serde(skip)]
    pub typed: bool,
    pub role: String,
    pub content: Content,
}

impl Message {
    /// The message's text (its parts joined).
    pub fn text(&self) -> String {
        match &self.content {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts.iter().map(|p| p.text.as_str()).collect(),
        }
    }
}

/// A message's content: a string or typed parts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// One content part (`input_text`, `output_text`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

/// A `function_call` item.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    pub call_id: String,
    pub name: String,
    /// The arguments as sent (a JSON text).
    pub arguments: String,
}

/// A `function_call_output` item.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    pub call_id: String,
    pub output: ContentText,
}

/// One declared tool.
#[derive(Debug, Clone, Deserialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub description: Option<String>,
    pub strict: Option<bool>,
    pub parameters: Value,
}
