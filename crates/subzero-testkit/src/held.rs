//! [`HeldStream`]: an endpoint that starts an answer and holds it open, to show whether the
//! client closed its connection (a cancelled request is one the server sees closed). Any
//! protocol's stream: the steps are its framing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::Step;

#[derive(Debug, Default)]
struct Held {
    request: Option<String>,
    closed: Option<Instant>,
}

#[derive(Debug, Default)]
struct HeldShared {
    state: Mutex<Held>,
    changed: Condvar,
    stop: AtomicBool,
}

/// A model endpoint on loopback that answers its first request with HTTP 200, the
/// `steps` given (their bytes: `Data` and `Raw`), and then nothing: it keeps the connection open until the client closes it,
/// and records when it did. A cancelled request is one the server sees closed. Other
/// connections are not served. Stops when dropped.
#[derive(Debug)]
pub struct HeldStream {
    addr: SocketAddr,
    shared: Arc<HeldShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HeldStream {
    pub fn start(steps: Vec<Step>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(HeldShared::default());
        let served = shared.clone();
        let body: String = steps
            .into_iter()
            .map(|s| match s {
                Step::Raw(raw) => raw,
                Step::Data(data) => format!("data: {data}\n\n"),
                _ => String::new(),
            })
            .collect();
        let thread = std::thread::Builder::new()
            .name("subzero-testkit-held".into())
            .spawn(move || serve_held(&listener, &served, &body))?;
        Ok(Self {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The request (head and body) once it has been read; `None` on timeout.
    pub fn wait_for_request(&self, timeout: Duration) -> Option<String> {
        self.wait(timeout, |held| held.request.clone())
    }

    /// Whether the client closed the connection within `timeout`.
    pub fn wait_closed(&self, timeout: Duration) -> bool {
        self.wait(timeout, |held| held.closed).is_some()
    }

    fn wait<T>(&self, timeout: Duration, found: impl Fn(&Held) -> Option<T>) -> Option<T> {
        let end = Instant::now() + timeout;
        let mut held = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(value) = found(&held) {
                return Some(value);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            held = self
                .shared
                .changed
                .wait_timeout(held, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for HeldStream {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

const POLL: Duration = Duration::from_millis(20);

fn serve_held(listener: &TcpListener, shared: &HeldShared, body: &str) {
    let stopped = || shared.stop.load(Ordering::SeqCst);
    let mut stream = loop {
        if stopped() {
            return;
        }
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(_) => std::thread::sleep(POLL),
        }
    };
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let Some(request) = read_request(&mut stream, &stopped) else {
        return;
    };
    update(shared, |held| held.request = Some(request));
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    let chunk = format!("{:x}\r\n{body}\r\n", body.len());
    if stream.write_all(head.as_bytes()).is_err() || stream.write_all(chunk.as_bytes()).is_err() {
        update(shared, |held| held.closed = Some(Instant::now()));
        return;
    }
    let mut buf = [0u8; 1024];
    while !stopped() {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    if !stopped() {
        update(shared, |held| held.closed = Some(Instant::now()));
    }
}

fn update(shared: &HeldShared, change: impl FnOnce(&mut Held)) {
    change(&mut shared.state.lock().unwrap_or_else(PoisonError::into_inner));
    shared.changed.notify_all();
}

/// Reads one HTTP/1.1 request (head, then `content-length` bytes of body).
fn read_request(stream: &mut TcpStream, stopped: &dyn Fn() -> bool) -> Option<String> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let mut need: Option<usize> = None;
    while !stopped() {
        if let Some(need) = need
            && data.len() >= need
        {
            return Some(String::from_utf8_lossy(&data).into_owned());
        }
        match stream.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return None,
        }
        if need.is_none()
            && let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n")
        {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            need = Some(end + 4 + length);
        }
    }
    None
}
