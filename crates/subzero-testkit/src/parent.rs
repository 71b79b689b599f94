//! A scripted *parent* model, served to a real host (Claude Code, Codex) in the host's own
//! model API: [`crate::messages`] speaks Anthropic Messages, [`crate::responses`] speaks
//! OpenAI Responses.
//!
//! A host sends its whole conversation with every request, so the parent keeps no state of
//! its own: each request is read into an [`Exchange`] (the tools the host declares, the
//! user's words, every tool result so far) and a [`Brain`] — a plain function the test
//! writes — decides the next [`Act`]: call a tool, or answer. Retries, side requests and
//! a second host process therefore all get the answer their conversation calls for.
//!
//! The server listens on `127.0.0.1` only, on its own thread and runtime, records every
//! request ([`ParentServer::requests`]) and stops when dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::Value;

use crate::{RecordedRequest, http, lock};

/// One tool call the host ran and what it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The tool's name as the host declared it (e.g. `mcp__subzero__subzero_spawn`).
    pub tool: String,
    /// The arguments the parent called it with.
    pub arguments: Value,
    /// The result's text as the host passed it back to the model.
    pub text: String,
}

impl ToolResult {
    /// The first Subzero id with this prefix (`ch_`, `run_`) in the result text.
    pub fn id(&self, prefix: &str) -> Option<String> {
        find_id(&self.text, prefix)
    }
}

/// The first `<prefix><alphanumerics>` in `text` (Subzero ids are ULIDs after a prefix).
pub fn find_id(text: &str, prefix: &str) -> Option<String> {
    let at = text.find(prefix)?;
    let tail = &text[at + prefix.len()..];
    let len = tail
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(tail.len());
    (len > 0).then(|| format!("{prefix}{}", &tail[..len]))
}

/// What the parent sees of one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Exchange {
    /// Names of the tools the request declares, in order.
    pub tools: Vec<String>,
    /// Every text the user (not a tool) wrote, joined with newlines.
    pub prompt: String,
    /// Every tool call of the conversation with its result, oldest first.
    pub results: Vec<ToolResult>,
}

impl Exchange {
    /// Whether the request declares a tool with this exact name.
    pub fn declares(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t == tool)
    }

    /// The newest result of a tool whose name ends with `suffix`.
    pub fn last_of(&self, suffix: &str) -> Option<&ToolResult> {
        self.results.iter().rev().find(|r| r.tool.ends_with(suffix))
    }

    /// How many calls of tools whose name ends with `suffix` the conversation holds.
    pub fn count_of(&self, suffix: &str) -> usize {
        self.results
            .iter()
            .filter(|r| r.tool.ends_with(suffix))
            .count()
    }
}

/// The parent's next move.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// Call this tool with these arguments (an object).
    Call { tool: String, arguments: Value },
    /// Answer in text; the turn ends.
    Say(String),
}

impl Act {
    pub fn call(tool: &str, arguments: Value) -> Self {
        Act::Call {
            tool: tool.to_owned(),
            arguments,
        }
    }

    pub fn say(text: &str) -> Self {
        Act::Say(text.to_owned())
    }
}

/// The test's parent: the next act for a conversation.
pub type Brain = Arc<dyn Fn(&Exchange) -> Act + Send + Sync>;

/// How one model API reads a request and writes a reply.
pub(crate) trait Dialect: Send + Sync + 'static {
    /// The conversation a request body carries.
    fn exchange(&self, body: &Value) -> Exchange;
    /// The SSE events (`event:` name, `data:` payload) that perform `act` in answer to `body`;
    /// `n` makes ids unique.
    fn events(&self, body: &Value, act: &Act, n: u64) -> Vec<(&'static str, Value)>;
    /// An answer for requests that are not a model turn (token counting, model lists…), or
    /// `None` to treat the request as a turn.
    fn aside(&self, method: &str, path: &str) -> Option<(u16, Value)>;
}

struct Shared {
    dialect: Box<dyn Dialect>,
    brain: Brain,
    log: Mutex<Vec<RecordedRequest>>,
    /// What the parent answered, turn by turn.
    acts: Mutex<Vec<Act>>,
    turns: AtomicU64,
}

/// The running stand-in; stops when dropped.
pub struct ParentServer {
    shared: Arc<Shared>,
    loopback: http::Loopback,
}

impl std::fmt::Debug for ParentServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParentServer")
            .field("addr", &self.loopback.addr())
            .finish_non_exhaustive()
    }
}

impl ParentServer {
    pub(crate) fn start(dialect: Box<dyn Dialect>, brain: Brain) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            dialect,
            brain,
            log: Mutex::new(Vec::new()),
            acts: Mutex::new(Vec::new()),
            turns: AtomicU64::new(0),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let loopback = http::Loopback::serve(app, "subzero-testkit-parent")?;
        Ok(Self { shared, loopback })
    }

    /// `http://127.0.0.1:PORT` (no path: each host appends its own).
    pub fn origin(&self) -> String {
        format!("http://{}", self.loopback.addr())
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.log).clone()
    }

    /// How many times the parent has answered with a call of a tool whose name ends with
    /// `suffix` (hosts prefix the server's name): once it has, the host is making that call.
    pub fn called(&self, suffix: &str) -> usize {
        lock(&self.shared.acts)
            .iter()
            .filter(|act| matches!(act, Act::Call { tool, .. } if tool.ends_with(suffix)))
            .count()
    }

    /// The conversation of every model turn so far, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.requests()
            .iter()
            .filter(|r| self.shared.dialect.aside(&r.method, &r.path).is_none())
            .filter_map(RecordedRequest::json)
            .map(|body| self.shared.dialect.exchange(&body))
            .collect()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let recorded = http::record(request).await;
    lock(&shared.log).push(recorded.clone());
    if let Some((status, body)) = shared.dialect.aside(&recorded.method, &recorded.path) {
        return http::json(status, body.to_string());
    }
    let Some(body) = recorded.json() else {
        return http::json(
            400,
            serde_json::json!({"error": "body is not JSON"}).to_string(),
        );
    };
    let exchange = shared.dialect.exchange(&body);
    let act = (shared.brain)(&exchange);
    let n = shared.turns.fetch_add(1, Ordering::Relaxed) + 1;
    let events = shared.dialect.events(&body, &act, n);
    lock(&shared.acts).push(act);
    sse(&events)
}

fn sse(events: &[(&'static str, Value)]) -> Response {
    let text: String = events
        .iter()
        .map(|(event, data)| format!("event: {event}\ndata: {data}\n\n"))
        .collect();
    http::event_stream(Body::from(text))
}

/// `text` in up to three pieces at char boundaries, for streamed deltas.
pub(crate) fn pieces(text: &str) -> Vec<String> {
    crate::split(text, 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_read_up_to_the_first_non_alphanumeric() {
        let text = r#"{"childId":"ch_01ABCdef","runId":"run_02XYZ"}"#;
        assert_eq!(find_id(text, "ch_").as_deref(), Some("ch_01ABCdef"));
        assert_eq!(find_id(text, "run_").as_deref(), Some("run_02XYZ"));
        assert_eq!(find_id("ch_", "ch_"), None);
    }

    #[test]
    fn deltas_rejoin_to_the_text() {
        assert_eq!(pieces("héllo wörld").concat(), "héllo wörld");
        assert_eq!(pieces(""), [""]);
    }
}
