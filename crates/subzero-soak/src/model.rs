//! The soak's model: an OpenAI-compatible server that answers each request from the plan
//! its conversation carries ([`crate::plan`]), and that a fault can make drop every
//! connection for a while.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::json;
use subzero_testkit::directed::DirectedServer;
use subzero_testkit::{RecordedRequest, Reply, Step};

use crate::plan::{Bash, Ending, Plan, Turn, answer_text};

/// Bytes of one streamed text chunk.
const CHUNK: usize = 1024;
/// The longest pause inside a stream that is meant to complete.
const MAX_PAUSE_MS: u64 = 900;

/// The switch the model-drop fault turns.
#[derive(Debug, Default)]
pub struct ModelSwitch {
    dropping: AtomicBool,
    dropped: AtomicU64,
}

impl ModelSwitch {
    pub fn set_dropping(&self, on: bool) {
        self.dropping.store(on, Ordering::SeqCst);
    }

    /// Connections dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The running model server.
#[derive(Debug)]
pub struct Model {
    pub server: DirectedServer,
    pub switch: Arc<ModelSwitch>,
}

impl Model {
    pub fn start() -> std::io::Result<Model> {
        let switch = Arc::new(ModelSwitch::default());
        let seen = switch.clone();
        let server = DirectedServer::start(Arc::new(move |request| respond(&seen, request)))?;
        Ok(Model { server, switch })
    }
}

/// The parts of a Chat Completions request the model reads; everything else is ignored.
#[derive(Debug, Default, Deserialize)]
struct ChatRequest {
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    tools: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Content,
}

#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
    #[default]
    None,
}

#[derive(Debug, Deserialize)]
struct Part {
    #[serde(default)]
    text: String,
}

impl Content {
    fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts.iter().map(|p| p.text.as_str()).collect(),
            Content::None => String::new(),
        }
    }
}

/// The answer to one request.
pub fn respond(switch: &ModelSwitch, request: &RecordedRequest) -> Reply {
    if switch.dropping.load(Ordering::SeqCst) {
        let n = switch.dropped.fetch_add(1, Ordering::Relaxed);
        // Alternate between a cut before any data and a cut after some.
        return if n.is_multiple_of(2) {
            Reply::Sse(vec![Step::Cut])
        } else {
            Reply::Sse(vec![Step::text("partial "), Step::Cut])
        };
    }
    let chat: ChatRequest = serde_json::from_str(&request.body).unwrap_or_default();
    let Some((at, plan)) = chat
        .messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == "user")
        .find_map(|(i, m)| Plan::find_in(&m.content.text()).map(|p| (i, p)))
    else {
        return Reply::text("soak: no plan in this conversation");
    };
    if chat.tools.is_empty() {
        // A handoff or compaction summary: the worker asks without tools.
        return Reply::text(&format!("soak summary {}", plan.tag));
    }
    let turn = chat.messages[at + 1..]
        .iter()
        .filter(|m| m.role == "assistant")
        .count();
    let reply = match plan.turns.get(turn) {
        Some(call) => tool_call(&plan.tag, turn, *call),
        None => ending(&plan),
    };
    paced(reply, plan.pace_ms)
}

/// `reply` with a pause before its first byte (a streamed reply only).
fn paced(reply: Reply, pace_ms: u32) -> Reply {
    match reply {
        Reply::Sse(mut steps) if pace_ms > 0 => {
            steps.insert(0, Step::delay_ms(u64::from(pace_ms)));
            Reply::Sse(steps)
        }
        other => other,
    }
}

fn tool_call(tag: &str, turn: usize, call: Turn) -> Reply {
    let id = format!("call_{tag}_{turn}");
    let (name, arguments) = match call {
        Turn::Read => ("read", json!({"path": "README.md"})),
        Turn::Grep => ("grep", json!({"pattern": "soak", "path": "."})),
        Turn::Ls => ("ls", json!({"path": "."})),
        Turn::Find => ("find", json!({"pattern": "**/*.md"})),
        Turn::Bash(kind) => ("bash", json!({"command": bash_command(tag, turn, kind)})),
    };
    Reply::tool_call(&id, name, &arguments.to_string())
}

/// The command of a `bash` call; every process it starts carries `SOAK_TAG=<tag>`. A write
/// appends the line [`written_line`], which names this one call: no line is ever written
/// twice, so a line found twice in the workspace landed twice.
pub fn bash_command(tag: &str, turn: usize, kind: Bash) -> String {
    let export = format!("export SOAK_TAG={tag}");
    match kind {
        Bash::Quick => format!("{export}; echo soak-{tag}; ls"),
        Bash::Tree => format!(
            "{export}; sleep 60 >/dev/null 2>&1 & setsid sleep 60 >/dev/null 2>&1 & \
             (sleep 60 >/dev/null 2>&1 &); echo tree-{tag}"
        ),
        Bash::Write => format!(
            "{export}; echo {line} >> {WRITES}; wc -l {WRITES}",
            line = written_line(tag, turn)
        ),
        Bash::Note => format!(
            "{export}; mkdir -p {NOTES}; echo {line} >> {NOTES}/{tag}.txt",
            line = written_line(tag, turn)
        ),
        Bash::Hold => format!("{export}; sleep 60"),
        Bash::Slow => format!("{export}; sleep 1.5; echo slow-{tag}"),
    }
}

/// The file every writing coder appends to (relative to its working directory).
pub const WRITES: &str = "soak-writes.txt";
/// The directory of the per-run files `bash-note` calls append to.
pub const NOTES: &str = "soak-notes";

/// The line the `turn`-th call of run `tag` writes.
pub fn written_line(tag: &str, turn: usize) -> String {
    format!("{tag}:{turn}")
}

fn ending(plan: &Plan) -> Reply {
    match plan.ending {
        Ending::Text { bytes } => text_reply(&answer_text(&plan.tag, bytes as usize), 0),
        Ending::Slow { bytes, ms } => {
            let text = answer_text(&plan.tag, bytes as usize);
            let chunks = text.len().div_ceil(CHUNK).max(1) as u64;
            // Each pause stays well under the brokers' 1.5 s idle timeout.
            text_reply(&text, (u64::from(ms) / chunks).min(MAX_PAUSE_MS))
        }
        Ending::Http(status) => Reply::status(
            status,
            &json!({"error": {"message": format!("soak: status {status} for {}", plan.tag)}})
                .to_string(),
        ),
        Ending::Cut => Reply::Sse(vec![Step::text("the answer starts "), Step::Cut]),
        Ending::HangHeaders => Reply::Hang,
        Ending::HangStream => Reply::Sse(vec![Step::text("the answer starts "), Step::Hang]),
        Ending::Oversize => {
            let chunk = json!({
                "id": "chatcmpl-soak", "object": "chat.completion.chunk", "created": 0,
                "model": "soak",
                "choices": [{"index": 0, "delta": {"content": "x".repeat(CHUNK)},
                             "finish_reason": null}]
            });
            Reply::Sse(vec![
                Step::repeat_data(&chunk.to_string(), 200),
                Step::finish("stop"),
                Step::done(),
            ])
        }
    }
}

/// `text` in chunks of [`CHUNK`] bytes, `pause_ms` before each.
fn text_reply(text: &str, pause_ms: u64) -> Reply {
    let mut steps = Vec::new();
    for piece in text.as_bytes().chunks(CHUNK) {
        if pause_ms > 0 {
            steps.push(Step::delay_ms(pause_ms));
        }
        steps.push(Step::text(&String::from_utf8_lossy(piece)));
    }
    steps.extend([Step::finish("stop"), Step::usage(10, 5), Step::done()]);
    Reply::Sse(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: serde_json::Value) -> RecordedRequest {
        RecordedRequest {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    fn plan() -> Plan {
        Plan {
            tag: "t1".into(),
            turns: vec![Turn::Read, Turn::Bash(Bash::Quick)],
            ending: Ending::Text { bytes: 40 },
            pace_ms: 0,
        }
    }

    fn tool_name(reply: &Reply) -> Option<String> {
        let Reply::Sse(steps) = reply else {
            return None;
        };
        steps.iter().find_map(|s| match s {
            Step::Data(d) => serde_json::from_str::<serde_json::Value>(d)
                .ok()?
                .pointer("/choices/0/delta/tool_calls/0/function/name")?
                .as_str()
                .map(str::to_owned),
            _ => None,
        })
    }

    #[test]
    fn the_conversation_says_which_turn_comes_next() {
        let switch = ModelSwitch::default();
        let tools = json!([{"type": "function", "function": {"name": "read"}}]);
        let first = request(json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": plan().prompt()}], "tools": tools}));
        assert_eq!(
            tool_name(&respond(&switch, &first)).as_deref(),
            Some("read")
        );
        let second = request(json!({"messages": [
            {"role": "user", "content": plan().prompt()},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "tool", "content": "..."},
            {"role": "user", "content": "a steer"}], "tools": tools}));
        assert_eq!(
            tool_name(&respond(&switch, &second)).as_deref(),
            Some("bash")
        );
        let last = request(json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": plan().prompt()}]},
            {"role": "assistant", "content": null}, {"role": "tool", "content": "."},
            {"role": "assistant", "content": null}, {"role": "tool", "content": "."}],
            "tools": tools}));
        assert_eq!(tool_name(&respond(&switch, &last)), None);
        let handoff = request(json!({"messages": [{"role": "user", "content": plan().prompt()}]}));
        assert_eq!(respond(&switch, &handoff), Reply::text("soak summary t1"));
    }

    #[test]
    fn a_dropping_model_cuts_every_answer() {
        let switch = ModelSwitch::default();
        switch.set_dropping(true);
        let any = request(json!({"messages": [{"role": "user", "content": plan().prompt()}]}));
        for _ in 0..2 {
            let Reply::Sse(steps) = respond(&switch, &any) else {
                panic!("a dropped answer is a cut stream")
            };
            assert_eq!(steps.last(), Some(&Step::Cut));
        }
        assert_eq!(switch.dropped(), 2);
    }
}
