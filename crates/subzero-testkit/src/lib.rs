//! A scripted OpenAI-compatible Chat Completions server on loopback.
//!
//! Each request to any path takes the next [`Reply`] from the script (a request past the end
//! of the script gets HTTP 500 `script exhausted`) and is recorded with its headers and body.
//! The server runs on its own thread with its own runtime, so it works from plain `#[test]`
//! functions and from normal binaries (`subzero demo`) alike.
//!
//! ```no_run
//! use subzero_testkit::{Reply, ScriptedServer};
//! let server = ScriptedServer::start(vec![
//!     Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
//!     Reply::text("All done."),
//! ]).expect("server");
//! let url = server.base_url(); // http://127.0.0.1:PORT/v1
//! ```

pub mod chat;
pub mod directed;
pub mod held;
mod http;
pub mod llama_cpp;
pub mod mcp_client;
pub mod messages;
pub mod model_chat_shapes;
pub mod model_messages;
pub mod model_requests;
pub mod model_responses;
pub mod overflow;
pub mod parent;
pub mod procs;
pub mod responses;
mod transcript;
pub mod worker_transcript;

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};

/// One piece of a streamed (SSE) response.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// One SSE event: `data: <payload>\n\n`.
    Data(String),
    /// Bytes sent as they are (for malformed streams).
    Raw(String),
    /// A pause before the next step.
    Delay(Duration),
    /// Stop sending, keep the connection open forever.
    Hang,
    /// Abort the response mid-body (no chunked terminator): the client sees the
    /// connection cut, not a clean end of stream.
    Cut,
    /// These bytes sent `times` times, one chunk each: a hostile flood (a 200 MB answer,
    /// an endless run of empty deltas) without holding it in memory.
    Repeat { raw: String, times: u64 },
}

impl Step {
    /// One event as the Responses and Messages APIs frame it: `event: <type>` (the `type`
    /// inside `data`), then `data: <json>`.
    pub fn event(data: &Value) -> Self {
        let name = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        Step::Raw(format!("event: {name}\ndata: {data}\n\n"))
    }

    /// A `chat.completion.chunk` with `delta`, like OpenAI sends it.
    pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Self {
        Step::Data(
            json!({
                "id": "chatcmpl-testkit",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "testkit",
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
            })
            .to_string(),
        )
    }

    /// A text delta.
    pub fn text(text: &str) -> Self {
        Step::chunk(json!({ "content": text }), None)
    }

    /// A tool-call delta; `None` fields are left out (as lenient servers do).
    pub fn tool_delta(
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) -> Self {
        let mut call = json!({ "function": { "arguments": arguments } });
        if let Some(index) = index {
            call["index"] = json!(index);
        }
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        Step::chunk(json!({ "tool_calls": [call] }), None)
    }

    /// The chunk carrying `finish_reason`.
    pub fn finish(reason: &str) -> Self {
        Step::chunk(json!({}), Some(reason))
    }

    /// The usage chunk (`stream_options.include_usage`).
    pub fn usage(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Step::Data(
            json!({
                "id": "chatcmpl-testkit", "object": "chat.completion.chunk", "choices": [],
                "usage": { "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens }
            })
            .to_string(),
        )
    }

    /// `data: [DONE]`.
    pub fn done() -> Self {
        Step::Data("[DONE]".to_owned())
    }

    /// `payload` as one SSE event, sent `times` times.
    pub fn repeat_data(payload: &str, times: u64) -> Self {
        Step::Repeat {
            raw: format!("data: {payload}\n\n"),
            times,
        }
    }

    pub fn delay_ms(ms: u64) -> Self {
        Step::Delay(Duration::from_millis(ms))
    }
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// HTTP 200 `text/event-stream` with these steps.
    Sse(Vec<Step>),
    /// Any status with a body (401, 500, 503…).
    Status { status: u16, body: String },
    /// Never answer (not even headers).
    Hang,
    /// A redirect (`status` 301, 302, 303, 307 or 308) to `location`, with an empty body.
    Redirect { status: u16, location: String },
}

impl Reply {
    /// A streamed text answer in a few deltas, `finish_reason: stop`, usage, `[DONE]`.
    pub fn text(text: &str) -> Self {
        let mut steps = split(text, 3)
            .into_iter()
            .map(|piece| Step::text(&piece))
            .collect::<Vec<_>>();
        steps.extend([Step::finish("stop"), Step::usage(10, 5), Step::done()]);
        Reply::Sse(steps)
    }

    /// Text streamed exactly in these deltas.
    pub fn text_deltas(deltas: &[&str]) -> Self {
        let mut steps: Vec<Step> = deltas.iter().map(|d| Step::text(d)).collect();
        steps.extend([Step::finish("stop"), Step::usage(10, 5), Step::done()]);
        Reply::Sse(steps)
    }

    /// One tool call whose arguments are split across three chunks.
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Self {
        Reply::tool_calls(&[(id, name, arguments)])
    }

    /// Several tool calls (indexed), each with arguments split across chunks.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Self {
        let mut steps = Vec::new();
        for (n, (id, name, arguments)) in calls.iter().enumerate() {
            let index = Some(n as u64);
            let mut pieces = split(arguments, 3).into_iter();
            let first = pieces.next().unwrap_or_default();
            steps.push(Step::tool_delta(index, Some(id), Some(name), &first));
            for piece in pieces {
                steps.push(Step::tool_delta(index, None, None, &piece));
            }
        }
        steps.extend([Step::finish("tool_calls"), Step::usage(10, 5), Step::done()]);
        Reply::Sse(steps)
    }

    /// A redirect to `location` (absolute or relative).
    pub fn redirect(status: u16, location: &str) -> Self {
        Reply::Redirect {
            status,
            location: location.to_owned(),
        }
    }

    pub fn status(status: u16, body: &str) -> Self {
        Reply::Status {
            status,
            body: body.to_owned(),
        }
    }
}

/// Splits `text` into up to `parts` pieces at char boundaries (at least one piece).
fn split(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(parts.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RecordedRequest {
    /// The body parsed as JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Names of the tools declared in the request body.
    pub fn tool_names(&self) -> Vec<String> {
        self.json()
            .and_then(|b| b.get("tools").cloned())
            .and_then(|t| t.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    /// A context window: a request over it gets the refusal, and the script is not read.
    window: Mutex<Option<Window>>,
    log: Mutex<Vec<RecordedRequest>>,
    logged: Condvar,
}

/// A context window the server enforces ([`ScriptedServer::refuse_past`]).
#[derive(Debug)]
struct Window {
    tokens: u64,
    refusal: Reply,
}

/// The running server; stops when dropped.
#[derive(Debug)]
pub struct ScriptedServer {
    shared: Arc<Shared>,
    loopback: http::Loopback,
}

impl ScriptedServer {
    /// Starts serving `script` on `127.0.0.1` at a free port.
    pub fn start(script: Vec<Reply>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            ..Shared::default()
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let loopback = http::Loopback::serve(app, "subzero-testkit")?;
        Ok(Self { shared, loopback })
    }

    /// `http://127.0.0.1:PORT/v1`; the worker appends `/chat/completions`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.loopback.addr())
    }

    /// Refuses with `refusal` (a provider's overflow answer, see [`overflow`]) every
    /// request whose prompt passes `tokens`, counted as the worker estimates them: ⌈body
    /// bytes / 4⌉. Such a request takes no reply from the script.
    pub fn refuse_past(&self, tokens: u64, refusal: Reply) {
        *lock(&self.shared.window) = Some(Window { tokens, refusal });
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.script).push_back(reply);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.log).clone()
    }

    /// Waits until at least `n` requests were received; false on timeout.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut log = lock(&self.shared.log);
        while log.len() < n {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            log = self
                .shared
                .logged
                .wait_timeout(log, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let recorded = http::record(request).await;
    let refused = lock(&shared.window)
        .as_ref()
        .filter(|w| (recorded.body.len() as u64).div_ceil(4) > w.tokens)
        .map(|w| w.refusal.clone());
    lock(&shared.log).push(recorded);
    shared.logged.notify_all();
    let reply = refused.or_else(|| lock(&shared.script).pop_front());
    match reply {
        None => http::json(500, "script exhausted"),
        Some(reply) => answer(reply).await,
    }
}

/// The response a [`Reply`] stands for (a `Hang` never resolves).
pub(crate) async fn answer(reply: Reply) -> Response {
    match reply {
        Reply::Status { status, body } => http::json(status, body),
        Reply::Hang => std::future::pending().await,
        Reply::Redirect { status, location } => redirect(status, &location),
        Reply::Sse(steps) => sse(steps),
    }
}

fn redirect(status: u16, location: &str) -> Response {
    let mut response = http::json(status, "");
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// What the response body does next, with `Repeat` steps unrolled lazily (a flood is
/// never held in memory).
enum Piece {
    Bytes(Bytes),
    Delay(Duration),
    Hang,
    Cut,
}

fn pieces(steps: Vec<Step>) -> impl Iterator<Item = Piece> + Send {
    steps
        .into_iter()
        .flat_map(|step| -> Box<dyn Iterator<Item = Piece> + Send> {
            match step {
                Step::Data(payload) => Box::new(std::iter::once(Piece::Bytes(Bytes::from(
                    format!("data: {payload}\n\n"),
                )))),
                Step::Raw(raw) => Box::new(std::iter::once(Piece::Bytes(Bytes::from(raw)))),
                Step::Delay(pause) => Box::new(std::iter::once(Piece::Delay(pause))),
                Step::Hang => Box::new(std::iter::once(Piece::Hang)),
                Step::Cut => Box::new(std::iter::once(Piece::Cut)),
                Step::Repeat { raw, times } => {
                    let raw = Bytes::from(raw);
                    Box::new((0..times).map(move |_| Piece::Bytes(raw.clone())))
                }
            }
        })
}

fn sse(steps: Vec<Step>) -> Response {
    let state = Some(pieces(steps));
    let stream = futures::stream::unfold(state, |state| async move {
        let mut pieces = state?;
        loop {
            match pieces.next()? {
                Piece::Bytes(bytes) => return Some((Ok::<_, std::io::Error>(bytes), Some(pieces))),
                Piece::Delay(pause) => tokio::time::sleep(pause).await,
                Piece::Hang => std::future::pending::<()>().await,
                Piece::Cut => {
                    let cut = std::io::Error::other("testkit: connection cut");
                    return Some((Err(cut), None));
                }
            }
        }
    });
    http::event_stream(Body::from_stream(stream))
}
