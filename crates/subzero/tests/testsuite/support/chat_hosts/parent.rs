//! The scripted parent of the chat hosts: it reads each request's conversation and plays the
//! scenario the prompt names ([`DELEGATE`], [`LIST`], [`QUIT`]) under the host's tool naming.

use std::sync::Arc;

use serde_json::{Value, json};
use subzero_testkit::parent::{Act, Exchange, find_id};

use super::{FIRST_ANSWER, HostSpec, LIST, QUIT, WAKE};

/// The scripted parent for `spec`'s tool naming; `child_model` is the `model` of each spawn.
pub(super) fn parent(spec: HostSpec, child_model: Value) -> subzero_testkit::parent::Brain {
    Arc::new(move |seen: &Exchange| {
        if !seen.declares(&spec.tool("subzero_spawn")) {
            // Not the agent's turn (OpenCode's title request): any short text will do.
            return Act::say("Subzero host test");
        }
        if seen.prompt.contains(QUIT) {
            quit(spec, seen, &child_model)
        } else if seen.prompt.contains(WAKE) {
            wake(spec, seen, &child_model)
        } else if seen.prompt.contains(LIST) {
            list(spec, seen)
        } else {
            delegate(spec, seen, &child_model)
        }
    })
}

fn delegate(spec: HostSpec, seen: &Exchange, child_model: &Value) -> Act {
    let r = &seen.results;
    let child = || r.get(1).and_then(|s| s.id("ch_")).unwrap_or_default();
    match r.len() {
        0 => Act::call(&spec.tool("subzero_info"), json!({})),
        1 => Act::call(
            &spec.tool("subzero_spawn"),
            json!({"templateId": "researcher", "prompt": "Summarize README.md", "model": child_model}),
        ),
        2 => Act::call(
            &spec.tool("subzero_get"),
            json!({"childId": child(), "waitMs": 25000}),
        ),
        3 => Act::call(
            &spec.tool("subzero_send"),
            json!({"childId": child(), "mode": "followup", "message": "Is there a license?"}),
        ),
        4 => Act::call(
            &spec.tool("subzero_get"),
            json!({"childId": child(), "waitMs": 25000}),
        ),
        5 => Act::call(
            &spec.tool("subzero_output"),
            json!({"artifactId": field(&r[4].text, "/lastRun/artifactId")}),
        ),
        _ => {
            let first = field(&r[2].text, "/lastRun/preview");
            let output = field(&r[5].text, "/text");
            Act::Say(format!("The child answered: {first} Then: {output}"))
        }
    }
}

/// Spawn, then end the turn without polling: the host's wake-up brings the child's answer.
fn wake(spec: HostSpec, seen: &Exchange, child_model: &Value) -> Act {
    if seen.results.is_empty() {
        return Act::call(
            &spec.tool("subzero_spawn"),
            json!({"templateId": "researcher", "prompt": "Summarize README.md", "model": child_model}),
        );
    }
    if seen.prompt.contains(FIRST_ANSWER) {
        return Act::Say(format!("Woken with: {FIRST_ANSWER}"));
    }
    Act::say("Waiting for the child; it will report back.")
}

fn list(spec: HostSpec, seen: &Exchange) -> Act {
    match seen.results.first() {
        None => Act::call(&spec.tool("subzero_list"), json!({})),
        Some(listed) => Act::Say(format!("Children: {}", ids(&listed.text, "ch_").join(", "))),
    }
}

fn quit(spec: HostSpec, seen: &Exchange, child_model: &Value) -> Act {
    match seen.results.first() {
        None => Act::call(
            &spec.tool("subzero_spawn"),
            json!({"templateId": "coder", "prompt": "Run the long job", "model": child_model}),
        ),
        Some(spawned) => Act::call(
            &spec.tool("subzero_get"),
            json!({"childId": spawned.id("ch_").unwrap_or_default(), "waitMs": 30000}),
        ),
    }
}

/// A string field of a tool result's JSON text, or the whole text when it is not JSON.
fn field(text: &str, pointer: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| text.to_owned())
}

/// Every distinct `<prefix>…` id in `text`, in order.
pub fn ids(text: &str, prefix: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(id) = find_id(rest, prefix) {
        let at = rest.find(&id).expect("found id") + id.len();
        if !found.contains(&id) {
            found.push(id);
        }
        rest = &rest[at..];
    }
    found
}
