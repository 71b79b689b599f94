//! What a delegated task costs a parent's context in a real host: the bytes of the
//! requests Claude Code sent its model (Anthropic Messages bodies, as the scripted parent
//! recorded them) that the delegation caused.
//!
//! Caused bytes of one request: the definitions of the delegating tools (`tools[]` entries,
//! compact JSON), the server's instructions in the system prompt, every call of those
//! tools (the `tool_use` block) and its result (the `tool_result` block), the `ToolSearch`
//! calls and results that loaded them, and every `<task-notification>` a finished task
//! brought. Only the parent's own conversation counts (requests whose user text carries
//! the plan's marker): a built-in subagent's requests are its child's work, as a Subzero
//! child's model requests are.

use serde::Serialize;
use serde_json::Value;
use subzero_testkit::RecordedRequest;

/// What one delegation cost, over the requests of one parent conversation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    /// Requests the host sent its model for the parent (turns).
    pub requests: usize,
    /// Caused bytes of definitions and instructions in one request (the largest).
    pub definitions: usize,
    /// Caused bytes of calls, results and notifications in the last request.
    pub exchange: usize,
    /// Caused bytes summed over every request (what the host sent in all).
    pub total: usize,
    /// Calls of the delegating tools the parent made.
    pub calls: usize,
    /// `subzero_spawn` + `subzero_get` as the host declares them (0 before they load).
    pub spawn_get: usize,
    /// The host's own `Agent` tool, as declared in the same requests.
    pub agent: usize,
}

/// Which tools a flavour of delegation uses.
#[derive(Clone, Copy, Debug)]
pub enum Delegation {
    /// Subzero's tools (`mcp__subzero__*`), loaded through `ToolSearch`.
    Subzero,
    /// Claude Code's built-in `Agent` tool.
    Agent,
}

impl Delegation {
    fn tool(self, name: &str, input: &Value) -> bool {
        match self {
            Delegation::Subzero => {
                name.starts_with("mcp__subzero__")
                    || (name == "ToolSearch" && input.to_string().contains("mcp__subzero__"))
            }
            Delegation::Agent => name == "Agent",
        }
    }
}

/// The cost of the delegation in the parent's requests (those whose user text holds
/// `marker`).
pub fn cost(requests: &[RecordedRequest], marker: &str, how: Delegation) -> Cost {
    let mut cost = Cost::default();
    for body in requests.iter().filter_map(RecordedRequest::json) {
        if !body.to_string().contains(marker) || body.get("messages").is_none() {
            continue;
        }
        let (definitions, exchange, calls) = caused(&body, how);
        cost.requests += 1;
        cost.definitions = cost.definitions.max(definitions);
        cost.exchange = exchange;
        cost.total += definitions + exchange;
        cost.calls = calls;
        let declared = |names: &[&str]| -> usize {
            array(&body, "tools")
                .iter()
                .filter(|t| names.contains(&str_of(t, "name")))
                .map(|t| t.to_string().len())
                .sum()
        };
        cost.spawn_get = cost.spawn_get.max(declared(&[
            "mcp__subzero__subzero_spawn",
            "mcp__subzero__subzero_get",
        ]));
        cost.agent = cost.agent.max(declared(&["Agent"]));
    }
    cost
}

/// Caused bytes of one request body: (definitions and instructions, the conversation's
/// calls, results and notifications, calls of the delegating tools).
fn caused(body: &Value, how: Delegation) -> (usize, usize, usize) {
    let tools = array(body, "tools");
    let mut definitions: usize = tools
        .iter()
        .filter(|t| how.tool(str_of(t, "name"), &Value::Null))
        .map(|t| t.to_string().len())
        .sum();
    if let Delegation::Subzero = how {
        definitions += instructions(body);
    }
    let mut ids = Vec::new();
    let (mut exchange, mut calls) = (0, 0);
    for message in array(body, "messages") {
        for block in blocks(message) {
            match str_of(&block, "type") {
                "tool_use" if how.tool(str_of(&block, "name"), &block["input"]) => {
                    ids.push(str_of(&block, "id").to_owned());
                    exchange += block.to_string().len();
                    calls += usize::from(str_of(&block, "name") != "ToolSearch");
                }
                "tool_result" if ids.iter().any(|id| id == str_of(&block, "tool_use_id")) => {
                    exchange += block.to_string().len();
                }
                "text" => exchange += notifications(str_of(&block, "text")),
                _ => {}
            }
        }
    }
    (definitions, exchange, calls)
}

/// Bytes of the `## subzero` section of the system prompt's MCP server instructions.
fn instructions(body: &Value) -> usize {
    let system = body.get("system").map(Value::to_string).unwrap_or_default();
    let messages = body
        .get("messages")
        .map(Value::to_string)
        .unwrap_or_default();
    [system, messages]
        .iter()
        .filter_map(|text| {
            let at = text.find("## subzero")?;
            let rest = &text[at..];
            // The section ends at a blank line, the next heading, or the end of its text.
            ["\\n\\n", "\\n#", "\""]
                .iter()
                .filter_map(|stop| rest.find(stop))
                .min()
        })
        .max()
        .unwrap_or(0)
}

/// Bytes of the `<task-notification>` blocks in a text.
fn notifications(text: &str) -> usize {
    text.match_indices("<task-notification>")
        .filter_map(|(at, _)| {
            let end = text[at..].find("</task-notification>")?;
            Some(end + "</task-notification>".len())
        })
        .sum()
}

fn array<'a>(value: &'a Value, key: &str) -> Vec<&'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}
