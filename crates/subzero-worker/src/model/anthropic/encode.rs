//! A protocol-neutral [`Request`] as a Messages request body.
//!
//! The Messages API refuses what the other protocols let through, so the encoder keeps
//! every request inside its rules, whichever protocol wrote the transcript:
//! - roles alternate: consecutive user-side items (tool results, a steer, a notice) are one
//!   `user` message, `tool_result` blocks first, then `text` blocks; two assistant turns with
//!   nothing between them are one `assistant` message;
//! - no empty or whitespace-only `text` block, no message without content;
//! - every `tool_use` is answered by a `tool_result` in the next message: a call whose result
//!   the transcript lacks (a run cut between the two) is answered with an error result, and a
//!   result that answers no call of the previous message is kept as text;
//! - tool ids match `^[a-zA-Z0-9_-]+$` and are unique in the request: an id that does not
//!   (another protocol's, or one repeated by a server that numbers calls per turn) is
//!   replaced by a deterministic one, the same in the call and in its result, and the same
//!   in every later request (the conversation only grows at its end);
//! - `tool_use`/`tool_result` blocks need tool declarations: a request with no tools
//!   declared shows earlier tool turns as text instead.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::super::{Call, Conversation, Item, Request, ToolChoice, ToolSpec};

/// The request body (`POST …/v1/messages`).
#[derive(Debug, Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    messages: Vec<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Declaration<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<NoTool>,
}

/// `{"type": "none"}`: the declarations stay for the earlier tool turns; no new call.
#[derive(Debug, Serialize)]
struct NoTool {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Debug, Serialize)]
struct Message {
    role: Role,
    content: Vec<Block>,
}

/// One content block as sent.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        is_error: bool,
        /// Optional; an empty string is left out rather than sent empty.
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<String>,
    },
}

/// A tool as a Messages tool definition; `input_schema` must be an object schema.
#[derive(Debug, Serialize)]
struct Declaration<'a> {
    name: &'a str,
    input_schema: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
}

/// The streaming request body for `model`.
pub fn body<'a>(model: &'a str, request: &Request<'a>) -> Body<'a> {
    let with_tools = !request.tools.is_empty();
    let system = request.conversation.system.as_str();
    Body {
        model,
        max_tokens: request.max_output_tokens,
        stream: true,
        messages: messages(request.conversation, with_tools),
        system: (!system.trim().is_empty()).then_some(system),
        tools: with_tools.then(|| request.tools.iter().map(declaration).collect()),
        tool_choice: (with_tools && request.tool_choice == ToolChoice::None)
            .then_some(NoTool { kind: "none" }),
    }
}

fn declaration(tool: &ToolSpec) -> Declaration<'_> {
    let mut schema = match &tool.parameters {
        Value::Object(schema) => schema.clone(),
        _ => Map::new(),
    };
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".to_owned()));
    Declaration {
        name: &tool.name,
        input_schema: schema,
        description: (!tool.description.is_empty()).then_some(tool.description.as_str()),
    }
}

/// The conversation as alternating `user` / `assistant` messages.
fn messages(conversation: &Conversation, with_tools: bool) -> Vec<Message> {
    let mut builder = Builder {
        with_tools,
        ..Builder::default()
    };
    for item in &conversation.items {
        match item {
            Item::User(text) => builder.user_text(text),
            Item::Assistant { text, calls } => builder.assistant(text.as_deref(), calls),
            Item::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => builder.result(call_id, name, content, *is_error),
        }
    }
    builder.flush_user();
    builder.messages
}

/// A call of the last assistant message, waiting for its result.
#[derive(Debug)]
struct Open {
    /// The id as the transcript has it (what its result names).
    recorded: String,
    /// The id as sent.
    sent: String,
    answered: bool,
}

#[derive(Debug, Default)]
struct Builder {
    with_tools: bool,
    messages: Vec<Message>,
    /// The user-side blocks since the last assistant message.
    results: Vec<Block>,
    texts: Vec<Block>,
    open: Vec<Open>,
    /// Every tool id sent so far in this request.
    used: HashSet<String>,
}

impl Builder {
    fn user_text(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.texts.push(Block::Text {
                text: text.to_owned(),
            });
        }
    }

    fn result(&mut self, call_id: &str, name: &str, content: &str, is_error: bool) {
        let open = self
            .open
            .iter_mut()
            .find(|o| !o.answered && o.recorded == call_id);
        let Some(open) = open else {
            // Answers no call of the previous message (or tools are not declared): text.
            let status = if is_error { "error" } else { "result" };
            self.user_text(&format!("[tool {status} of {name} ({call_id})]\n{content}"));
            return;
        };
        open.answered = true;
        self.results.push(Block::ToolResult {
            tool_use_id: open.sent.clone(),
            is_error,
            content: (!content.is_empty()).then(|| content.to_owned()),
        });
    }

    fn assistant(&mut self, text: Option<&str>, calls: &[Call]) {
        let mut blocks = Vec::new();
        if let Some(text) = text.filter(|t| !t.trim().is_empty()) {
            blocks.push(Block::Text {
                text: text.to_owned(),
            });
        }
        let mut open = Vec::new();
        for call in calls {
            if self.with_tools {
                let sent = self.unique_id(&call.id);
                blocks.push(Block::ToolUse {
                    id: sent.clone(),
                    name: tool_name(&call.name),
                    input: call.arguments_object(),
                });
                open.push(Open {
                    recorded: call.id.clone(),
                    sent,
                    answered: false,
                });
            } else {
                blocks.push(Block::Text {
                    text: format!(
                        "[tool call {} ({})]\n{}",
                        call.name, call.id, call.arguments
                    ),
                });
            }
        }
        if blocks.is_empty() {
            return;
        }
        self.flush_user();
        match self.messages.last_mut() {
            // Nothing came between this answer and the previous one (which then made no
            // call, or its calls would have been answered): one assistant message.
            Some(last) if last.role == Role::Assistant => last.content.extend(blocks),
            _ => self.messages.push(Message {
                role: Role::Assistant,
                content: blocks,
            }),
        }
        self.open = open;
    }

    /// Ends the user-side turn: every open call answered (with an error result when the
    /// transcript has none), results first, then text.
    fn flush_user(&mut self) {
        for open in self.open.drain(..).filter(|o| !o.answered) {
            self.results.push(Block::ToolResult {
                tool_use_id: open.sent,
                content: Some(
                    "no result was recorded for this call (the run ended before it finished)"
                        .to_owned(),
                ),
                is_error: true,
            });
        }
        let mut content = std::mem::take(&mut self.results);
        content.append(&mut self.texts);
        if !content.is_empty() {
            self.messages.push(Message {
                role: Role::User,
                content,
            });
        }
    }

    /// `id` as sent: unchanged when Anthropic accepts it and it was not used yet in this
    /// request, else made valid and unique (deterministically).
    fn unique_id(&mut self, id: &str) -> String {
        let base = valid_id(id);
        let mut sent = base.clone();
        let mut n = 1;
        while self.used.contains(&sent) {
            n += 1;
            sent = format!("{base}_{n}");
        }
        self.used.insert(sent.clone());
        sent
    }
}

fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `id` when it matches `^[a-zA-Z0-9_-]+$`; else its valid characters, the others as `_`,
/// and a hash of the original, so two ids that differ only in invalid characters differ.
fn valid_id(id: &str) -> String {
    if !id.is_empty() && id.chars().all(valid_char) {
        return id.to_owned();
    }
    let kept: String = id
        .chars()
        .map(|c| if valid_char(c) { c } else { '_' })
        .collect();
    let hash = hex::encode(&Sha256::digest(id.as_bytes())[..6]);
    if kept.is_empty() {
        format!("toolu_{hash}")
    } else {
        format!("{kept}_{hash}")
    }
}

/// A recorded call's tool name as a `tool_use` block may carry it (another protocol may
/// have recorded a name the model made up, in any characters).
fn tool_name(name: &str) -> String {
    let shown: String = name
        .chars()
        .map(|c| if valid_char(c) { c } else { '_' })
        .collect();
    if shown.is_empty() {
        "_".to_owned()
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ls() -> ToolSpec {
        ToolSpec {
            name: "ls".to_owned(),
            description: "List a directory.".to_owned(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn encode(items: Vec<Item>, tools: &[ToolSpec], choice: ToolChoice) -> Value {
        let conversation = Conversation {
            system: "Be brief.".to_owned(),
            items,
        };
        to_json(body(
            "claude-test",
            &Request {
                conversation: &conversation,
                tools,
                tool_choice: choice,
                max_output_tokens: 1024,
                max_text_bytes: None,
            },
        ))
    }

    fn to_json(body: Body<'_>) -> Value {
        serde_json::to_value(body).expect("body")
    }

    #[test]
    fn results_and_a_steer_are_one_user_message_results_first() {
        let body = encode(
            vec![
                Item::User("list it".into()),
                Item::Assistant {
                    text: Some("Looking.".into()),
                    calls: vec![
                        Call::of("toolu_1", "ls", "{\"path\":\".\"}"),
                        Call::of("toolu_2", "ls", "{}"),
                    ],
                },
                Item::result("toolu_1", "ls", "a\nb"),
                Item::User("also check src".into()),
                Item::result("toolu_2", "ls", ""),
            ],
            &[ls()],
            ToolChoice::Auto,
        );
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["stream"], true);
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert!(body.get("tool_choice").is_none());
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "list it"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
                    {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false, "content": "a\nb"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": false},
                    {"type": "text", "text": "also check src"}]},
            ])
        );
    }

    #[test]
    fn foreign_and_repeated_ids_are_mapped_the_same_in_call_and_result() {
        let items = vec![
            Item::User("go".into()),
            Item::calling(vec![Call::of("call:0", "ls", "{}")]),
            Item::result("call:0", "ls", "x"),
            Item::calling(vec![Call::of("call:0", "ls", "{}")]),
            Item::result("call:0", "ls", "y"),
        ];
        let body = encode(items.clone(), &[ls()], ToolChoice::Auto);
        let m = &body["messages"];
        let first = m[1]["content"][0]["id"].as_str().expect("id");
        let second = m[3]["content"][0]["id"].as_str().expect("id");
        assert!(
            first.starts_with("call_0_") && first.chars().all(valid_char),
            "{first}"
        );
        assert_ne!(first, second);
        assert_eq!(m[2]["content"][0]["tool_use_id"], first);
        assert_eq!(m[4]["content"][0]["tool_use_id"], second);
        assert_eq!(
            encode(items, &[ls()], ToolChoice::Auto),
            body,
            "deterministic"
        );
        assert_ne!(valid_id("a.b"), valid_id("a:b"));
        assert_eq!(valid_id("toolu_01A-b"), "toolu_01A-b");
        assert!(valid_id("").starts_with("toolu_"));
    }

    #[test]
    fn a_call_without_a_result_is_answered_and_a_stray_result_is_text() {
        let body = encode(
            vec![
                Item::User("go".into()),
                Item::calling(vec![Call::of("c1", "ls", "not json")]),
                Item::User("Recovery notice: the run was interrupted.".into()),
                Item::result("c9", "ls", "orphan"),
            ],
            &[ls()],
            ToolChoice::Auto,
        );
        let m = body["messages"].as_array().expect("messages");
        assert_eq!(m.len(), 3);
        assert_eq!(m[1]["content"][0]["input"], json!({}));
        let user = m[2]["content"].as_array().expect("content");
        assert_eq!(user[0]["type"], "tool_result");
        assert_eq!(user[0]["tool_use_id"], "c1");
        assert_eq!(user[0]["is_error"], true);
        assert_eq!(user[1]["type"], "text");
        assert!(user[2]["text"].as_str().expect("text").contains("orphan"));
    }

    #[test]
    fn no_empty_blocks_and_adjacent_answers_are_merged() {
        let body = encode(
            vec![
                Item::User("go".into()),
                Item::Assistant {
                    text: Some("  ".into()),
                    calls: vec![],
                },
                Item::Assistant {
                    text: Some("first".into()),
                    calls: vec![],
                },
                Item::User(String::new()),
                Item::Assistant {
                    text: Some("second".into()),
                    calls: vec![],
                },
                Item::User("more".into()),
            ],
            &[],
            ToolChoice::Auto,
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
                {"role": "user", "content": [{"type": "text", "text": "more"}]},
            ])
        );
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn tool_choice_none_keeps_the_declarations_and_forbids_calls() {
        let items = vec![
            Item::User("go".into()),
            Item::calling(vec![Call::of("c1", "ls", "{}")]),
            Item::result("c1", "ls", "x"),
        ];
        let body = encode(items.clone(), &[ls()], ToolChoice::None);
        assert_eq!(body["tool_choice"], json!({"type": "none"}));
        assert_eq!(body["tools"][0]["name"], "ls");
        assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");

        // Without any declaration, earlier tool turns are shown as text.
        let body = encode(items, &[], ToolChoice::None);
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        let text = body.to_string();
        assert!(
            !text.contains("tool_use") && !text.contains("tool_result"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_system_is_left_out() {
        let conversation = Conversation {
            system: String::new(),
            items: vec![Item::User("hi".into())],
        };
        let body = to_json(body(
            "m",
            &Request {
                conversation: &conversation,
                tools: &[],
                tool_choice: ToolChoice::Auto,
                max_output_tokens: 1,
                max_text_bytes: None,
            },
        ));
        assert!(body.get("system").is_none());
    }
}
