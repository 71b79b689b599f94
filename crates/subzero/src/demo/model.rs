//! The demo's model: a scripted OpenAI-compatible Chat Completions endpoint on loopback,
//! small enough to ship in `subzero` (plain threads and `std::net`; the test kit's servers
//! stay test-only).
//!
//! Each request takes the next reply of the script, in order, and its body is kept. A reply
//! is streamed as Server-Sent Events on a connection the server then closes (`Connection:
//! close`, so every request is a fresh connection and a body needs no length); `Hang`
//! answers nothing, for a run the demo stops. A request past the script gets HTTP 500.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One answer of the script.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Streamed: each piece in order.
    Stream(Vec<Piece>),
    /// Never answered (the response does not even start).
    Hang,
}

/// One piece of a streamed answer.
#[derive(Debug, Clone)]
pub enum Piece {
    /// One SSE event, `data: <payload>`.
    Data(String),
    /// A pause before the next piece.
    Pause(Duration),
}

impl Reply {
    /// A text answer in these deltas, `finish_reason: stop`, usage, `[DONE]`.
    pub fn text(deltas: &[&str]) -> Reply {
        let mut pieces: Vec<Piece> = deltas
            .iter()
            .map(|d| chunk(json!({ "content": d }), None))
            .collect();
        pieces.extend(ending("stop"));
        Reply::Stream(pieces)
    }

    /// One tool call, its arguments split in two deltas, after `pause`.
    pub fn tool_call(pause: Duration, id: &str, name: &str, arguments: &str) -> Reply {
        let (first, rest) = arguments.split_at(arguments.len() / 2);
        let call = |extra: Value| json!({ "tool_calls": [extra] });
        let mut pieces = vec![
            Piece::Pause(pause),
            chunk(
                call(json!({"index": 0, "id": id, "type": "function",
                            "function": {"name": name, "arguments": first}})),
                None,
            ),
            chunk(
                call(json!({"index": 0, "function": {"arguments": rest}})),
                None,
            ),
        ];
        pieces.extend(ending("tool_calls"));
        Reply::Stream(pieces)
    }
}

/// A `chat.completion.chunk` with `delta`.
fn chunk(delta: Value, finish_reason: Option<&str>) -> Piece {
    Piece::Data(
        json!({
            "id": "chatcmpl-demo", "object": "chat.completion.chunk", "created": 0,
            "model": "scripted",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
        })
        .to_string(),
    )
}

/// The finish chunk, the usage chunk and `[DONE]`.
fn ending(reason: &str) -> Vec<Piece> {
    vec![
        chunk(json!({}), Some(reason)),
        Piece::Data(
            json!({"id": "chatcmpl-demo", "object": "chat.completion.chunk", "choices": [],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
            .to_string(),
        ),
        Piece::Data("[DONE]".to_owned()),
    ]
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    bodies: Mutex<Vec<String>>,
    arrived: Condvar,
    stopping: AtomicBool,
}

/// The running model; stops (and lets hanging answers go) when dropped.
#[derive(Debug)]
pub struct DemoModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DemoModel {
    /// Serves `script` on `127.0.0.1` at a free port.
    pub fn start(script: Vec<Reply>) -> std::io::Result<DemoModel> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            ..Shared::default()
        });
        let serving = shared.clone();
        std::thread::Builder::new()
            .name("demo-model".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if serving.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let shared = serving.clone();
                        let _ = std::thread::Builder::new()
                            .name("demo-model-request".into())
                            .spawn(move || answer(stream, &shared));
                    }
                }
            })?;
        Ok(DemoModel { addr, shared })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The body of every request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.shared.bodies).clone()
    }

    /// Waits until `n` requests arrived; false after `limit`.
    pub fn wait_for_requests(&self, n: usize, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        let mut bodies = lock(&self.shared.bodies);
        while bodies.len() < n {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            bodies = self
                .shared
                .arrived
                .wait_timeout(bodies, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

impl Drop for DemoModel {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Reads one request, keeps its body and answers it with the next reply.
fn answer(stream: TcpStream, shared: &Shared) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let Some(body) = read_request(&mut reader) else {
        return;
    };
    lock(&shared.bodies).push(body);
    shared.arrived.notify_all();
    let reply = lock(&shared.script).pop_front();
    let mut out = stream;
    match reply {
        None => {
            let body = r#"{"error":{"message":"the demo's script is exhausted"}}"#;
            let _ = write!(
                out,
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Some(Reply::Hang) => {
            while !shared.stopping.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Some(Reply::Stream(pieces)) => stream_pieces(&mut out, &pieces),
    }
}

fn stream_pieces(out: &mut TcpStream, pieces: &[Piece]) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                connection: close\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    for piece in pieces {
        let written = match piece {
            Piece::Pause(pause) => {
                std::thread::sleep(*pause);
                Ok(())
            }
            Piece::Data(payload) => out
                .write_all(format!("data: {payload}\n\n").as_bytes())
                .and_then(|()| out.flush()),
        };
        if written.is_err() {
            return;
        }
    }
}

/// The body of an HTTP/1.1 request (headers up to the blank line, then `Content-Length`
/// bytes); `None` when the request is malformed or the peer went away.
fn read_request(reader: &mut impl BufRead) -> Option<String> {
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length.min(64 * 1024 * 1024)];
    reader.read_exact(&mut body).ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_request_gets_the_next_reply_streamed_then_the_connection_closes() {
        let model = DemoModel::start(vec![Reply::text(&["Hello, ", "world."])]).expect("model");
        let addr = model
            .base_url()
            .trim_start_matches("http://")
            .replace("/v1", "");
        let mut stream = TcpStream::connect(addr).expect("connect");
        let body = r#"{"model":"scripted"}"#;
        write!(
            stream,
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read to close");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.contains(r#""content":"Hello, ""#), "{response}");
        assert!(response.ends_with("data: [DONE]\n\n"), "{response}");
        assert!(model.wait_for_requests(1, Duration::from_secs(5)));
        assert_eq!(model.requests(), vec![body.to_owned()]);
    }
}
