//! A model endpoint on loopback whose answers the test releases one by one.
//!
//! The scripted model of `subzero-testkit` answers from a queue as requests arrive; a
//! lifecycle trace needs more: a run must stay at the model until the trace says it
//! completes or fails. Here every request is held until the test answers it (`answer`),
//! so "r1 is running" lasts exactly as long as the trace says. A held request whose
//! worker went away (a stop, a kill) is skipped: its connection is closed.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use subzero_testkit::{Reply, Step};

/// One request the model endpoint received and has not answered.
struct Held {
    stream: TcpStream,
}

#[derive(Default)]
struct Shared {
    held: Mutex<VecDeque<Held>>,
    arrived: Condvar,
    /// Every request body, in arrival order.
    bodies: Mutex<Vec<String>>,
    /// Set when the gate is dropped: the listener stops at its next connection.
    closed: AtomicBool,
}

/// The gated endpoint; dropping it closes its held requests and its listener (the suite's
/// tests share one process: a listener left behind would stay for the rest of the run).
pub struct Gate {
    port: u16,
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Gate {
    pub fn start() -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the gated model");
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared::default());
        let accept = shared.clone();
        thread::Builder::new()
            .name("gated-model".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    if accept.closed.load(Ordering::SeqCst) {
                        break;
                    }
                    let shared = accept.clone();
                    thread::spawn(move || receive(stream, &shared));
                }
            })
            .expect("gated model thread");
        Gate { port, shared }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// `http://127.0.0.1:PORT`, the origin a credential allows.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request body received so far.
    pub fn bodies(&self) -> Vec<Value> {
        lock(&self.shared.bodies)
            .iter()
            .filter_map(|b| serde_json::from_str(b).ok())
            .collect()
    }

    /// Wait (bounded) until `n` requests were received.
    pub fn wait_bodies(&self, n: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while lock(&self.shared.bodies).len() < n {
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Wait (bounded) until a request whose worker is still connected is held.
    pub fn wait_held(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut held = lock(&self.shared.held);
        loop {
            held.retain(|h| connected(&h.stream));
            if !held.is_empty() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let wait = left.min(Duration::from_millis(50));
            held = self
                .shared
                .arrived
                .wait_timeout(held, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// How many connected requests are held now.
    pub fn held(&self) -> usize {
        let mut held = lock(&self.shared.held);
        held.retain(|h| connected(&h.stream));
        held.len()
    }

    /// Answer the oldest connected held request with `reply`; false when none is held
    /// (within `limit`).
    pub fn answer(&self, reply: &Reply, limit: Duration) -> bool {
        if !self.wait_held(limit) {
            return false;
        }
        let Some(mut held) = lock(&self.shared.held).pop_front() else {
            return false;
        };
        let _ = held.stream.write_all(&render(reply));
        let _ = held.stream.flush();
        let _ = held.stream.shutdown(Shutdown::Write);
        true
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        lock(&self.shared.held).clear();
        // Wakes the listener from `accept`, to see `closed` and end.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Whether the peer of `stream` is still there (a closed connection reads as EOF).
fn connected(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    let alive = match stream.peek(&mut byte) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => e.kind() == ErrorKind::WouldBlock,
    };
    let _ = stream.set_nonblocking(false);
    alive
}

/// Read one HTTP/1.1 request (headers, then `Content-Length` bytes) and hold it.
fn receive(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&buf[header_end..header_end + length]).into_owned();
    lock(&shared.bodies).push(body);
    lock(&shared.held).push_back(Held { stream });
    shared.arrived.notify_all();
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A testkit reply as the bytes of a complete HTTP response (`Connection: close`).
fn render(reply: &Reply) -> Vec<u8> {
    match reply {
        Reply::Status { status, body } => format!(
            "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
        Reply::Sse(steps) => {
            let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n".to_vec();
            for step in steps {
                match step {
                    Step::Data(payload) => out.extend_from_slice(format!("data: {payload}\n\n").as_bytes()),
                    Step::Raw(raw) => out.extend_from_slice(raw.as_bytes()),
                    other => panic!("the gated model renders data steps only, not {other:?}"),
                }
            }
            out
        }
        other => panic!("the gated model does not render {other:?}"),
    }
}
