//! An OpenAI Responses API stand-in (`POST /v1/responses`, streamed) serving a scripted
//! parent model to Codex (a `model_providers.<id>` entry with `wire_api = "responses"` and
//! `base_url = "<origin>/v1"`).
//!
//! A turn is streamed as the Responses API does it: `response.created`, one output item
//! (`response.output_item.added`, then `response.function_call_arguments.delta`s or
//! `response.output_text.delta`s, then `response.output_item.done`) and
//! `response.completed` carrying the output and usage. Any other path or method gets 404
//! at once.
//!
//! Tools declared inside a `namespace` (Codex puts each MCP server's tools in one, e.g.
//! `mcp__subzero` holding `subzero_spawn`) are known as `<namespace>__<name>`; a call of such a
//! name is sent as `{"namespace": …, "name": …}`, as the Responses API does.
//!
//! ```no_run
//! use std::sync::Arc;
//! use subzero_testkit::parent::Act;
//! let server = subzero_testkit::responses::start(Arc::new(|_seen: &_| Act::say("Done."))).expect("server");
//! let base_url = format!("{}/v1", server.origin());
//! ```

use serde_json::{Value, json};

use crate::parent::{Act, Brain, Dialect, Exchange, ParentServer, pieces};
use crate::transcript::{Transcript, content_text, encoded_json, list, names, str_of};

/// Starts the stand-in on `127.0.0.1` at a free port.
pub fn start(brain: Brain) -> std::io::Result<ParentServer> {
    ParentServer::start(Box::new(Responses), brain)
}

struct Responses;

impl Dialect for Responses {
    fn exchange(&self, body: &Value) -> Exchange {
        let mut seen = Transcript::default();
        for item in list(body, "input") {
            match item.get("type").and_then(Value::as_str) {
                Some("message") | None
                    if item.get("role").and_then(Value::as_str) == Some("user") =>
                {
                    seen.user(content_text(item.get("content").unwrap_or(&Value::Null)));
                }
                Some("function_call") => {
                    let name = match item.get("namespace").and_then(Value::as_str) {
                        Some(namespace) => format!("{namespace}__{}", str_of(item, "name")),
                        None => str_of(item, "name"),
                    };
                    seen.call(
                        str_of(item, "call_id"),
                        name,
                        encoded_json(item.get("arguments")),
                    );
                }
                Some("function_call_output") => seen.result(
                    &str_of(item, "call_id"),
                    output_text(item.get("output").unwrap_or(&Value::Null)),
                ),
                _ => {}
            }
        }
        seen.exchange(list(body, "tools").iter().flat_map(tool_names).collect())
    }

    fn events(&self, body: &Value, act: &Act, n: u64) -> Vec<(&'static str, Value)> {
        let id = format!("resp_testkit_{n}");
        let mut events = vec![(
            "response.created",
            json!({"type": "response.created", "sequence_number": 0,
                   "response": {"id": id, "object": "response", "status": "in_progress",
                                "model": "testkit", "output": []}}),
        )];
        let item = match act {
            Act::Call { tool, arguments } => {
                let item_id = format!("fc_testkit_{n}");
                let arguments = arguments.to_string();
                let mut item = json!({"type": "function_call", "id": item_id,
                                  "call_id": format!("call_testkit_{n}"), "name": tool,
                                  "arguments": arguments, "status": "completed"});
                if let Some((namespace, name)) = split_namespace(body, tool) {
                    item["namespace"] = json!(namespace);
                    item["name"] = json!(name);
                }
                let mut added = item.clone();
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                events.push(output_item("response.output_item.added", &added));
                for delta in pieces(&arguments) {
                    events.push((
                        "response.function_call_arguments.delta",
                        json!({"type": "response.function_call_arguments.delta",
                               "item_id": item_id, "output_index": 0, "delta": delta}),
                    ));
                }
                events.push((
                    "response.function_call_arguments.done",
                    json!({"type": "response.function_call_arguments.done",
                           "item_id": item_id, "output_index": 0, "arguments": arguments}),
                ));
                item
            }
            Act::Say(text) => {
                let item_id = format!("msg_testkit_{n}");
                let added = json!({"type": "message", "id": item_id, "role": "assistant",
                                   "status": "in_progress", "content": []});
                events.push(output_item("response.output_item.added", &added));
                for delta in pieces(text) {
                    events.push((
                        "response.output_text.delta",
                        json!({"type": "response.output_text.delta", "item_id": item_id,
                               "output_index": 0, "content_index": 0, "delta": delta}),
                    ));
                }
                events.push((
                    "response.output_text.done",
                    json!({"type": "response.output_text.done", "item_id": item_id,
                           "output_index": 0, "content_index": 0, "text": text}),
                ));
                json!({"type": "message", "id": item_id, "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
            }
        };
        events.push(output_item("response.output_item.done", &item));
        events.push((
            "response.completed",
            json!({"type": "response.completed",
                   "response": {"id": id, "object": "response", "status": "completed",
                                "model": "testkit", "output": [item],
                                "usage": {"input_tokens": 10,
                                          "input_tokens_details": {"cached_tokens": 0},
                                          "output_tokens": 5,
                                          "output_tokens_details": {"reasoning_tokens": 0},
                                          "total_tokens": 15}}}),
        ));
        events
    }

    fn aside(&self, method: &str, path: &str) -> Option<(u16, Value)> {
        if method == "POST" && path.ends_with("/responses") {
            return None;
        }
        Some((
            404,
            json!({"error": {"message": "not served by the subzero testkit",
                             "type": "invalid_request_error"}}),
        ))
    }
}

/// The function names a `tools` entry declares: a function's name, or `<namespace>__<name>`
/// for each function of a namespace.
fn tool_names(tool: &Value) -> Vec<String> {
    let Some(name) = tool.get("name").and_then(Value::as_str) else {
        return Vec::new();
    };
    if tool.get("type").and_then(Value::as_str) == Some("namespace") {
        return names(list(tool, "tools"), "/name")
            .into_iter()
            .map(|inner| format!("{name}__{inner}"))
            .collect();
    }
    vec![name.to_owned()]
}

/// `(namespace, name)` when `qualified` is a function of a namespace the request declares.
fn split_namespace(body: &Value, qualified: &str) -> Option<(String, String)> {
    list(body, "tools")
        .iter()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("namespace"))
        .find_map(|t| {
            let namespace = t.get("name").and_then(Value::as_str)?;
            let name = qualified.strip_prefix(namespace)?.strip_prefix("__")?;
            list(t, "tools")
                .iter()
                .any(|f| f.get("name").and_then(Value::as_str) == Some(name))
                .then(|| (namespace.to_owned(), name.to_owned()))
        })
}

/// A `function_call_output`'s `output`: a string, content parts, or `{content: …}`.
fn output_text(output: &Value) -> String {
    match output.get("content") {
        Some(content) => content_text(content),
        None => content_text(output),
    }
}

fn output_item(kind: &'static str, item: &Value) -> (&'static str, Value) {
    (kind, json!({"type": kind, "output_index": 0, "item": item}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_call_output_is_paired_with_its_call() {
        let body = json!({
            "tools": [{"type": "function", "name": "subzero__subzero_get"}],
            "input": [
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "Delegate it."}]},
                {"type": "function_call", "call_id": "c1", "name": "subzero__subzero_get",
                 "arguments": "{\"childId\":\"ch_1\"}"},
                {"type": "function_call_output", "call_id": "c1",
                 "output": "{\"childId\":\"ch_1\",\"state\":\"ready\"}"}
            ]
        });
        let seen = Responses.exchange(&body);
        assert_eq!(seen.prompt, "Delegate it.");
        assert!(seen.declares("subzero__subzero_get"));
        let get = seen.last_of("subzero_get").expect("a result");
        assert_eq!(get.arguments, json!({"childId": "ch_1"}));
        assert!(get.text.contains("ready"), "{}", get.text);
    }

    #[test]
    fn a_function_call_streams_its_arguments_and_completes() {
        let args = json!({"prompt": "Summarise", "templateId": "researcher"});
        let body = json!({"tools": [{"type": "namespace", "name": "mcp__subzero",
                                     "tools": [{"type": "function", "name": "subzero_spawn"}]}]});
        let seen = Responses.exchange(&body);
        assert_eq!(seen.tools, ["mcp__subzero__subzero_spawn"]);
        let events = Responses.events(
            &body,
            &Act::call("mcp__subzero__subzero_spawn", args.clone()),
            1,
        );
        let joined: String = events
            .iter()
            .filter(|(e, _)| *e == "response.function_call_arguments.delta")
            .filter_map(|(_, d)| d["delta"].as_str())
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&joined).ok(), Some(args));
        let (last, done) = events.last().expect("events");
        assert_eq!(*last, "response.completed");
        let item = &done["response"]["output"][0];
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["namespace"], "mcp__subzero");
        assert_eq!(item["name"], "subzero_spawn");
    }
}
