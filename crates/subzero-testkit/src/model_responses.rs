//! Scripted OpenAI Responses replies for [`ScriptedServer`](crate::ScriptedServer) (a child
//! model on `openai-responses`); [`crate::held::HeldStream`] holds one open.
//!
//! Events are framed as OpenAI streams them: `event: <type>` then `data: <json>` carrying the
//! same `type` and a `sequence_number`. A whole answer ([`text`], [`tool_call`],
//! [`tool_calls`]) runs `response.created`, `response.in_progress`, the output items
//! (`response.output_item.added`, the deltas, their `.done` events,
//! `response.output_item.done`) and `response.completed` with the output and usage; the
//! single-event builders make streams that break in one particular way.
//!
//! ```no_run
//! use subzero_testkit::{ScriptedServer, model_responses as responses};
//! let server = ScriptedServer::start(vec![
//!     responses::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
//!     responses::text("All done."),
//! ]).expect("server");
//! // spawn with model {url: server.base_url(), api: "openai-responses", …}
//! ```

use serde_json::{Value, json};

use crate::{Reply, Step, split};

mod check;

pub use check::check_request;

/// Usage every whole answer reports.
pub const INPUT_TOKENS: u64 = 10;
pub const OUTPUT_TOKENS: u64 = 5;

/// `events` as SSE steps, numbered from 0 in order.
pub fn steps(events: Vec<Value>) -> Vec<Step> {
    events
        .into_iter()
        .enumerate()
        .map(|(n, mut event)| {
            event["sequence_number"] = json!(n);
            step(&event)
        })
        .collect()
}

/// One event as an SSE frame with its `event:` line.
pub fn step(event: &Value) -> Step {
    Step::event(event)
}

fn response(status: &str, output: Vec<Value>, usage: Option<(u64, u64)>) -> Value {
    let mut response = json!({"id": "resp_testkit", "object": "response", "created_at": 0,
                              "status": status, "model": "testkit", "output": output,
                              "usage": null});
    if let Some((input, output)) = usage {
        response["usage"] = json!({"input_tokens": input,
                                   "input_tokens_details": {"cached_tokens": 0},
                                   "output_tokens": output,
                                   "output_tokens_details": {"reasoning_tokens": 0},
                                   "total_tokens": input + output});
    }
    response
}

pub fn created() -> Value {
    json!({"type": "response.created", "response": response("in_progress", vec![], None)})
}

pub fn in_progress() -> Value {
    json!({"type": "response.in_progress", "response": response("in_progress", vec![], None)})
}

/// `response.completed` with `output` and usage.
pub fn completed(output: Vec<Value>, input_tokens: u64, output_tokens: u64) -> Value {
    json!({"type": "response.completed",
           "response": response("completed", output, Some((input_tokens, output_tokens)))})
}

/// `response.incomplete` with `incomplete_details.reason` (`max_output_tokens`, …).
pub fn incomplete(reason: &str, input_tokens: u64, output_tokens: u64) -> Value {
    let mut response = response("incomplete", vec![], Some((input_tokens, output_tokens)));
    response["incomplete_details"] = json!({"reason": reason});
    json!({"type": "response.incomplete", "response": response})
}

/// `response.failed` with `response.error`.
pub fn failed(code: &str, message: &str) -> Value {
    let mut response = response("failed", vec![], None);
    response["error"] = json!({"code": code, "message": message});
    json!({"type": "response.failed", "response": response})
}

/// The top-level `error` event.
pub fn error(code: &str, message: &str) -> Value {
    json!({"type": "error", "code": code, "message": message, "param": null})
}

/// An assistant message item as `response.output_item.done` and `completed` carry it.
pub fn message_item(item_id: &str, text: &str) -> Value {
    json!({"type": "message", "id": item_id, "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A function call item as `response.output_item.done` and `completed` carry it.
pub fn call_item(item_id: &str, call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
           "arguments": arguments, "status": "completed"})
}

pub fn item_added(output_index: u64, item: Value) -> Value {
    json!({"type": "response.output_item.added", "output_index": output_index, "item": item})
}

pub fn item_done(output_index: u64, item: Value) -> Value {
    json!({"type": "response.output_item.done", "output_index": output_index, "item": item})
}

/// The `response.output_item.added` of a function call (empty arguments, in progress).
pub fn call_added(output_index: u64, item_id: &str, call_id: &str, name: &str) -> Value {
    let mut item = call_item(item_id, call_id, name, "");
    item["status"] = json!("in_progress");
    item_added(output_index, item)
}

pub fn text_delta(output_index: u64, item_id: &str, delta: &str) -> Value {
    json!({"type": "response.output_text.delta", "item_id": item_id,
           "output_index": output_index, "content_index": 0, "delta": delta})
}

pub fn arguments_delta(output_index: u64, item_id: &str, delta: &str) -> Value {
    json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
           "output_index": output_index, "delta": delta})
}

pub fn arguments_done(output_index: u64, item_id: &str, arguments: &str) -> Value {
    json!({"type": "response.function_call_arguments.done", "item_id": item_id,
           "output_index": output_index, "arguments": arguments})
}

/// A reasoning item with a summary delta (which a client keeps out of the answer).
pub fn reasoning(output_index: u64, item_id: &str, summary: &str) -> Vec<Value> {
    let item = json!({"type": "reasoning", "id": item_id, "summary": []});
    vec![
        item_added(output_index, item.clone()),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": item_id,
               "output_index": output_index, "summary_index": 0, "delta": summary}),
        item_done(output_index, item),
    ]
}

/// The events of one message item streamed in three deltas, without the lifecycle events.
pub fn message_events(output_index: u64, item_id: &str, text: &str) -> Vec<Value> {
    let mut added = message_item(item_id, "");
    added["status"] = json!("in_progress");
    added["content"] = json!([]);
    let part = |kind: &str, text: &str| {
        json!({"type": kind, "item_id": item_id, "output_index": output_index,
               "content_index": 0,
               "part": {"type": "output_text", "text": text, "annotations": []}})
    };
    let mut events = vec![
        item_added(output_index, added),
        part("response.content_part.added", ""),
    ];
    events.extend(
        split(text, 3)
            .iter()
            .map(|piece| text_delta(output_index, item_id, piece)),
    );
    events.extend([
        json!({"type": "response.output_text.done", "item_id": item_id,
               "output_index": output_index, "content_index": 0, "text": text}),
        part("response.content_part.done", text),
        item_done(output_index, message_item(item_id, text)),
    ]);
    events
}

/// The events of one function call item, its arguments in three deltas.
pub fn call_events(
    output_index: u64,
    item_id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
) -> Vec<Value> {
    let mut events = vec![call_added(output_index, item_id, call_id, name)];
    events.extend(
        split(arguments, 3)
            .iter()
            .map(|piece| arguments_delta(output_index, item_id, piece)),
    );
    events.extend([
        arguments_done(output_index, item_id, arguments),
        item_done(output_index, call_item(item_id, call_id, name, arguments)),
    ]);
    events
}

/// A streamed text answer, completed with usage.
pub fn text(text: &str) -> Reply {
    let mut events = vec![created(), in_progress()];
    events.extend(message_events(0, "msg_testkit", text));
    events.push(completed(
        vec![message_item("msg_testkit", text)],
        INPUT_TOKENS,
        OUTPUT_TOKENS,
    ));
    Reply::Sse(steps(events))
}

/// A streamed text answer completed without usage (`"usage": null`, as some servers send).
pub fn text_unmetered(text: &str) -> Reply {
    let mut events = vec![created(), in_progress()];
    events.extend(message_events(0, "msg_testkit", text));
    events.push(json!({"type": "response.completed",
        "response": response("completed", vec![message_item("msg_testkit", text)], None)}));
    Reply::Sse(steps(events))
}

/// One function call whose arguments arrive in three deltas.
pub fn tool_call(call_id: &str, name: &str, arguments: &str) -> Reply {
    tool_calls(&[(call_id, name, arguments)])
}

/// Parallel function calls, one output item each, in order.
pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
    let mut events = vec![created(), in_progress()];
    let mut output = Vec::new();
    for (n, (call_id, name, arguments)) in calls.iter().enumerate() {
        let item_id = format!("fc_testkit_{n}");
        events.extend(call_events(n as u64, &item_id, call_id, name, arguments));
        output.push(call_item(&item_id, call_id, name, arguments));
    }
    events.push(completed(output, INPUT_TOKENS, OUTPUT_TOKENS));
    Reply::Sse(steps(events))
}

/// The `input` items of a recorded Responses request body of type `kind`.
pub fn input_items<'a>(body: &'a Value, kind: &str) -> Vec<&'a Value> {
    body.get("input")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some(kind))
                .collect()
        })
        .unwrap_or_default()
}

/// The text of every user `message` input item, in order.
pub fn user_texts(body: &Value) -> Vec<String> {
    input_items(body, "message")
        .into_iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| match m.get("content") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(reply: &Reply) -> Vec<Value> {
        let Reply::Sse(steps) = reply else {
            panic!("not a stream");
        };
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Raw(raw) => raw.lines().find_map(|l| l.strip_prefix("data: ")),
                _ => None,
            })
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect()
    }

    #[test]
    fn a_call_streams_arguments_that_rejoin_and_completes_with_usage() {
        let all = events(&tool_calls(&[
            ("call_a", "read", r#"{"path":"a"}"#),
            ("call_b", "ls", "{}"),
        ]));
        let joined = |item: &str| -> String {
            all.iter()
                .filter(|e| {
                    e["type"] == "response.function_call_arguments.delta" && e["item_id"] == item
                })
                .filter_map(|e| e["delta"].as_str())
                .collect()
        };
        assert_eq!(joined("fc_testkit_0"), r#"{"path":"a"}"#);
        assert_eq!(joined("fc_testkit_1"), "{}");
        let last = all.last().expect("events");
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["usage"]["input_tokens"], INPUT_TOKENS);
        assert_eq!(last["response"]["output"][1]["call_id"], "call_b");
        let numbers: Vec<u64> = all
            .iter()
            .filter_map(|e| e["sequence_number"].as_u64())
            .collect();
        assert_eq!(numbers, (0..all.len() as u64).collect::<Vec<_>>());
    }

    #[test]
    fn every_frame_names_its_event_type() {
        let Reply::Sse(steps) = text("Hello there") else {
            panic!("not a stream");
        };
        for step in steps {
            let Step::Raw(raw) = step else {
                panic!("raw frames")
            };
            let kind = raw.lines().next().and_then(|l| l.strip_prefix("event: "));
            let data: Value = serde_json::from_str(
                raw.lines()
                    .nth(1)
                    .and_then(|l| l.strip_prefix("data: "))
                    .unwrap_or(""),
            )
            .expect("json");
            assert_eq!(kind, data["type"].as_str());
        }
    }

    #[test]
    fn check_request_refuses_what_openai_refuses() {
        let ok = json!({"model": "m", "max_output_tokens": 64, "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "x"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "b"}]}
        ], "tools": [{"type": "function", "name": "ls", "parameters": {"type": "object"}}]});
        assert_eq!(check_request(&ok), Ok(()));
        let mut orphan = ok.clone();
        orphan["input"].as_array_mut().expect("input").remove(2);
        assert!(check_request(&orphan).is_err_and(|e| e.contains("No tool output")));
        let mut stray = ok.clone();
        stray["input"].as_array_mut().expect("input").remove(1);
        assert!(check_request(&stray).is_err_and(|e| e.contains("No tool call found")));
        let mut wrong_part = ok.clone();
        wrong_part["input"][3]["content"][0]["type"] = json!("input_text");
        assert!(check_request(&wrong_part).is_err());
        let mut bad_id = ok.clone();
        bad_id["input"][1]["id"] = json!("call_1");
        assert!(check_request(&bad_id).is_err());
        let mut small = ok;
        small["max_output_tokens"] = json!(8);
        assert!(check_request(&small).is_err());
    }

    #[test]
    fn user_texts_read_both_content_forms() {
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "b"}]},
            {"type": "message", "role": "user", "content": "c"}
        ]});
        assert_eq!(user_texts(&body), ["a", "c"]);
    }
}
