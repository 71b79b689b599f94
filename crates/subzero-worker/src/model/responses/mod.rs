//! Streaming OpenAI Responses (`openai-responses`): `POST <url>/responses` with
//! `store: false`, so nothing is kept at the provider and every request carries the whole
//! transcript as input items.
//!
//! What is sent: `instructions` (the system text), `input` items — user turns as `message`
//! items with `input_text`, assistant text as `message` items with `output_text`, tool calls as
//! `function_call` and results as `function_call_output` (never an item `id`: with
//! `store: false` there is nothing to refer to, and an `fc_…` id without its reasoning item is
//! refused by OpenAI) — `tools` as `function` declarations with `strict: false` (left out,
//! OpenAI turns a schema it can into strict mode, where every optional argument becomes
//! required), `tool_choice: "none"` when no tool may be called, `max_output_tokens`,
//! `stream: true`.
//!
//! What is read: the event's `type` in each `data:` payload (the SSE `event:` line only
//! repeats it). Text from `response.output_text.delta` (and `response.refusal.delta`); calls
//! from `response.output_item.added` / `.done` (`call_id`, `name`) and
//! `response.function_call_arguments.delta` / `.done`, keyed by `item_id`, else
//! `output_index`; usage and the end from `response.completed`; `response.incomplete` ends the
//! answer with its reason (`max_output_tokens` becomes `finish_reason: "length"`).
//! `response.failed` and `error` fail the request with the provider's message, redacted.
//! Reasoning items, lifecycle events and unknown event types are skipped. A `data:` payload
//! that is not JSON, or a stream that ends before `response.completed` /

mod stream;
mod wire;

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::protocol::Protocol;
use super::{Conversation, Item, Request, ToolChoice, ToolSpec};
pub use stream::ResponsesStream;

/// The output of a call the transcript holds no result for (OpenAI refuses a
/// `function_call` without its `function_call_output`).
const NO_RESULT: &str = "no result was recorded for this call (the run ended before it finished)";

/// The Responses protocol.
#[derive(Debug, Clone, Copy, Default)]
pub struct Responses;

impl Protocol for Responses {
    type Body<'a> = Body<'a>;
    type Assembler = ResponsesStream;
    const PATH: &'static str = "/responses";

    /// The body for `model`. Without tools the request names none (and no `tool_choice`:
    /// some servers refuse one without tools). When no call is allowed the declarations
    /// stay, so the earlier `function_call` items still name declared tools, and
    /// `tool_choice: "none"` forbids calls.
    fn body<'a>(&self, model: &'a str, request: &Request<'a>) -> Body<'a> {
        let conversation = request.conversation;
        let system = conversation.system.as_str();
        let declared = !request.tools.is_empty();
        Body {
            model,
            instructions: (!system.is_empty()).then_some(system),
            input: input(conversation),
            stream: true,
            store: false,
            max_output_tokens: request.max_output_tokens,
            tools: declared.then(|| request.tools.iter().map(declaration).collect()),
            tool_choice: (declared && request.tool_choice == ToolChoice::None).then_some("none"),
        }
    }
}

/// The request body (`POST …/responses`).
#[derive(Debug, Serialize)]
pub struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Input<'a>>,
    stream: bool,
    store: bool,
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Declaration<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
}

/// One input item.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Input<'a> {
    Message {
        role: &'static str,
        content: [Part<'a>; 1],
    },
    FunctionCall {
        call_id: String,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        call_id: String,
        output: &'a str,
    },
}

#[derive(Debug, Serialize)]
struct Part<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// A tool as a Responses function declaration (flat, unlike Chat Completions).
#[derive(Debug, Serialize)]
struct Declaration<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
    strict: bool,
}

fn declaration(tool: &ToolSpec) -> Declaration<'_> {
    Declaration {
        kind: "function",
        name: &tool.name,
        description: &tool.description,
        parameters: &tool.parameters,
        // Left out, OpenAI turns a schema it can into strict mode, where every optional
        // argument becomes required.
        strict: false,
    }
}

fn message<'a>(role: &'static str, kind: &'static str, text: &'a str) -> Input<'a> {
    Input::Message {
        role,
        content: [Part { kind, text }],
    }
}

/// The conversation as input items, oldest first. Calls and results go by the ids
/// [`CallIds`] gives them, so every `function_call` is answered by one
/// `function_call_output` with its `call_id` and no output is sent without its call: OpenAI
/// answers HTTP 400 to either.
fn input(conversation: &Conversation) -> Vec<Input<'_>> {
    let ids = CallIds::assign(&conversation.items);
    let mut out = Vec::new();
    for (n, item) in conversation.items.iter().enumerate() {
        match item {
            Item::User(text) => out.push(message("user", "input_text", text)),
            Item::Assistant { text, calls } => {
                if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
                    out.push(message("assistant", "output_text", text));
                }
                let sent = ids.calls(n);
                for (call, id) in calls.iter().zip(sent) {
                    out.push(Input::FunctionCall {
                        call_id: id.clone(),
                        name: &call.name,
                        arguments: &call.arguments,
                    });
                }
                for id in sent.iter().filter(|id| !ids.answered.contains(*id)) {
                    out.push(Input::FunctionCallOutput {
                        call_id: id.clone(),
                        output: NO_RESULT,
                    });
                }
            }
            Item::ToolResult { content, .. } => {
                if let Some(id) = ids.result(n) {
                    out.push(Input::FunctionCallOutput {
                        call_id: id.clone(),
                        output: content,
                    });
                }
            }
        }
    }
    out
}

/// The `call_id` each call and result is sent with. A recorded id is kept as it is, except
/// an empty one and one that an earlier call already used (a Chat Completions server that
/// numbers its calls per turn, `call_0` every time): those get `_2`, `_3`, … so each call
/// is one pair. A result answers the latest call with its recorded id, once; a result that
/// answers no call (or a call already answered) is left out.
#[derive(Debug, Default)]
struct CallIds {
    /// Per item: the ids of an answer's calls, or the one id of a result (empty: left out).
    sent: Vec<Vec<String>>,
    answered: HashSet<String>,
}

impl CallIds {
    fn assign(items: &[Item]) -> Self {
        let mut uses: HashMap<&str, usize> = HashMap::new();
        let mut latest: HashMap<&str, String> = HashMap::new();
        let mut ids = CallIds::default();
        for item in items {
            let sent = match item {
                Item::Assistant { calls, .. } => calls
                    .iter()
                    .map(|call| {
                        let used = uses.entry(call.id.as_str()).or_insert(0);
                        *used += 1;
                        let id = match (call.id.as_str(), *used) {
                            ("", n) => format!("call_{n}"),
                            (id, 1) => id.to_owned(),
                            (id, n) => format!("{id}_{n}"),
                        };
                        latest.insert(call.id.as_str(), id.clone());
                        id
                    })
                    .collect(),
                Item::ToolResult { call_id, .. } => latest
                    .get(call_id.as_str())
                    .filter(|id| !ids.answered.contains(*id))
                    .cloned()
                    .inspect(|id| {
                        ids.answered.insert(id.clone());
                    })
                    .into_iter()
                    .collect(),
                Item::User(_) => Vec::new(),
            };
            ids.sent.push(sent);
        }
        ids
    }

    fn calls(&self, item: usize) -> &[String] {
        self.sent.get(item).map(Vec::as_slice).unwrap_or_default()
    }

    fn result(&self, item: usize) -> Option<&String> {
        self.sent.get(item).and_then(|ids| ids.first())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::model::Call;
    fn to_json(body: Body<'_>) -> Value {
        serde_json::to_value(body).expect("body")
    }

    fn inputs(conversation: &Conversation) -> Vec<Value> {
        input(conversation)
            .iter()
            .map(|i| serde_json::to_value(i).expect("item"))
            .collect()
    }

    fn conversation(items: Vec<Item>) -> Conversation {
        Conversation {
            system: "Be brief.".to_owned(),
            items,
        }
    }

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "read".to_owned(),
            description: "Read a file".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }
    }

    #[test]
    fn the_body_carries_instructions_items_tools_and_no_server_state() {
        let conversation = conversation(vec![
            Item::User("Summarise README.md".to_owned()),
            Item::Assistant {
                text: Some("Reading it.".to_owned()),
                calls: vec![Call::of("call_1", "read", r#"{"path":"README.md"}"#)],
            },
            Item::result("call_1", "read", "# Demo"),
            Item::User("focus on the title".to_owned()),
        ]);
        let tools = [tool()];
        let request = Request {
            conversation: &conversation,
            tools: &tools,
            tool_choice: ToolChoice::Auto,
            max_output_tokens: 512,
            max_text_bytes: None,
        };
        let body = to_json(Responses.body("gpt-test", &request));
        assert_eq!(body["model"], "gpt-test");
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["stream"], true);
        assert_eq!(body["store"], false);
        assert_eq!(body["max_output_tokens"], 512);
        assert!(body.get("tool_choice").is_none());
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "read", "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                    "strict": false}])
        );
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "Summarise README.md"}]},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Reading it."}]},
                {"type": "function_call", "call_id": "call_1", "name": "read",
                 "arguments": "{\"path\":\"README.md\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "# Demo"},
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "focus on the title"}]},
            ])
        );
    }

    #[test]
    fn no_calls_allowed_keeps_the_declarations_and_says_none() {
        let conversation = conversation(vec![Item::User("hand off".to_owned())]);
        let tools = [tool()];
        let request = Request {
            conversation: &conversation,
            tools: &tools,
            tool_choice: ToolChoice::None,
            max_output_tokens: 256,
            max_text_bytes: None,
        };
        let body = to_json(Responses.body("m", &request));
        assert_eq!(body["tool_choice"], "none");
        assert_eq!(body["tools"][0]["name"], "read");
        let request = Request {
            tools: &[],
            ..request
        };
        let body = to_json(Responses.body("m", &request));
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        let empty = Conversation::default();
        let request = Request {
            conversation: &empty,
            ..request
        };
        assert!(
            to_json(Responses.body("m", &request))
                .get("instructions")
                .is_none()
        );
    }

    #[test]
    fn every_call_has_an_output_and_no_output_is_orphaned() {
        let items = inputs(&conversation(vec![
            Item::User("go".to_owned()),
            Item::calling(vec![
                Call::of("call_1", "ls", "{}"),
                Call::of("call_2", "ls", "{}"),
            ]),
            Item::result("call_2", "read", "b"),
            Item::result("call_9", "read", "from nowhere"),
        ]));
        let kinds: Vec<(String, String)> = items
            .iter()
            .map(|i| {
                (
                    i["type"].as_str().unwrap_or_default().to_owned(),
                    i["call_id"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("message", ""),
                ("function_call", "call_1"),
                ("function_call", "call_2"),
                ("function_call_output", "call_1"),
                ("function_call_output", "call_2"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        assert_eq!(items[3]["output"], NO_RESULT);
    }

    #[test]
    fn ids_repeated_across_turns_or_empty_become_distinct_pairs() {
        let items = inputs(&conversation(vec![
            Item::calling(vec![Call::of("call_0", "ls", "{}")]),
            Item::result("call_0", "read", "first"),
            Item::calling(vec![
                Call::of("call_0", "ls", "{}"),
                Call::of("", "ls", "{}"),
            ]),
            Item::result("call_0", "read", "second"),
            Item::result("call_0", "read", "a second answer to the same call"),
            Item::result("", "read", "third"),
        ]));
        let pairs: Vec<(&str, &str)> = items
            .iter()
            .map(|i| {
                (
                    i["call_id"].as_str().unwrap_or_default(),
                    i["output"].as_str().unwrap_or("call"),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("call_0", "call"),
                ("call_0", "first"),
                ("call_0_2", "call"),
                ("call_1", "call"),
                ("call_0_2", "second"),
                ("call_1", "third"),
            ]
        );
    }
}
