//! Reading a host's conversation out of a model request, whatever its dialect: the JSON
//! accessors every dialect uses and a [`Transcript`] that pairs each tool call with the
//! result that answers it.

use serde_json::Value;

use crate::parent::{Exchange, ToolResult};

/// The user's words and tool calls of one conversation, read oldest first.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    prompt: Vec<String>,
    /// `(call id, tool, arguments)` of every call so far.
    calls: Vec<(String, String, Value)>,
    results: Vec<ToolResult>,
}

impl Transcript {
    /// Text the user (not a tool) wrote.
    pub(crate) fn user(&mut self, text: String) {
        self.prompt.push(text);
    }

    /// The model called `tool` with `arguments`; its result will name `id`.
    pub(crate) fn call(&mut self, id: String, tool: String, arguments: Value) {
        self.calls.push((id, tool, arguments));
    }

    /// The result of the call `id`; a result of no call seen so far is left out.
    pub(crate) fn result(&mut self, id: &str, text: String) {
        if let Some((_, tool, arguments)) = self.calls.iter().find(|c| c.0 == id) {
            self.results.push(ToolResult {
                tool: tool.clone(),
                arguments: arguments.clone(),
                text,
            });
        }
    }

    /// The exchange of a request declaring `tools`.
    pub(crate) fn exchange(self, tools: Vec<String>) -> Exchange {
        Exchange {
            tools,
            prompt: self.prompt.join("\n"),
            results: self.results,
        }
    }
}

/// The array at `key`, or nothing.
pub(crate) fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The string at `key`, or `""`.
pub(crate) fn str_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The string at JSON pointer `pointer`, or `""`.
pub(crate) fn str_at(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The strings at `pointer` in each of `items`, skipping items without one.
pub(crate) fn names(items: &[Value], pointer: &str) -> Vec<String> {
    items
        .iter()
        .filter_map(|t| t.pointer(pointer).and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// Arguments sent as a JSON-encoded string, decoded; `null` when absent or not JSON.
pub(crate) fn encoded_json(value: Option<&Value>) -> Value {
    value
        .and_then(Value::as_str)
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or(Value::Null)
}

/// The text of a tool result's content: a string, or the `text` of each part of an array.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
