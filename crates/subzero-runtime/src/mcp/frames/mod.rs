//! The stdio framing layer in front of the MCP server: every frame the host sends gets an
//! answer.
//!
//! rmcp drops a frame it cannot decode and the host then waits for its own timeout. So every
//! line from stdin is checked here first, and the server sees only frames it can handle:
//! - not UTF-8, or not JSON → `-32700` (parse error);
//! - a frame over [`MAX_FRAME_BYTES`], nesting deeper than [`MAX_DEPTH`], no
//!   `"jsonrpc": "2.0"`, or not an object (batches included) → `-32600` (invalid request);
//! - a request whose `params` is not an object, or a `tools/call` whose `name` is not a
//!   string or whose `arguments` is not an object → `-32602` (invalid params);
//! - a lone UTF-16 surrogate escape (JavaScript hosts send one when a string is cut inside
//!   an emoji) is rewritten as U+FFFD and the frame goes on.
//!
//! Each answer carries the frame's top-level `id` when it can be read, else `null`.

mod out;
mod scan;
mod window;

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

pub(super) use out::ServerOut;
use window::{Metered, Window};

/// Largest frame read; a longer line is skipped to its end and answered `-32600`.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Deepest nesting of arrays and objects accepted: serde_json's own limit (its parser, and
/// so rmcp's, refuses a 128th level).
pub const MAX_DEPTH: usize = 127;
/// Bytes of a skipped frame's head kept to find its `id`.
const HEAD_BYTES: usize = 4096;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// The server's side of the framing layer: read frames from `reader`, write to `writer`.
pub(super) struct Framed {
    /// What the MCP server reads: only frames that passed the checks.
    pub reader: DuplexStream,
    /// What the MCP server writes.
    pub writer: ServerOut,
    /// Ends when the host's input ended and every answer was written.
    pub done: tokio::task::JoinHandle<()>,
}

/// Put the framing layer between `input`/`output` (the process's stdin/stdout) and the
/// MCP server.
pub(super) fn frame<R, W>(input: R, output: W) -> Framed
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (server_reader, to_server) = tokio::io::duplex(1 << 20);
    let window = Arc::new(Window::new());
    let (writer, answers, written) = out::stdout_writer(output, Arc::clone(&window));
    let reading = tokio::spawn(read_frames(input, to_server, answers, window));
    let done = tokio::spawn(async move {
        let _ = reading.await;
        let _ = written.await;
    });
    Framed {
        reader: server_reader,
        writer,
        done,
    }
}

/// Reads lines, answers the bad ones, passes the rest on; closes `to_server` at the end of
/// input so the server sees end of file.
async fn read_frames<R: AsyncRead + Unpin>(
    mut input: R,
    mut to_server: DuplexStream,
    answers: mpsc::UnboundedSender<Vec<u8>>,
    window: Arc<Window>,
) {
    let mut lines = Lines::default();
    // Filled without being zeroed first: only the pages a read writes are touched (a
    // zeroed 64 KiB buffer was sixteen page faults before the first reply).
    let mut chunk: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        chunk.clear();
        match input.read_buf(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        for frame in lines.feed(&chunk) {
            if let Some((line, metered)) = check(&frame, &answers) {
                meter(&window, &metered).await;
                if to_server.write_all(&line).await.is_err() {
                    return;
                }
            }
        }
    }
    if let Some(frame) = lines.finish()
        && let Some((line, metered)) = check(&frame, &answers)
    {
        meter(&window, &metered).await;
        let _ = to_server.write_all(&line).await;
    }
    let _ = to_server.shutdown().await;
}

/// A request waits for its place in the window; a cancellation gives one back.
async fn meter(window: &Window, metered: &Metered) {
    match metered {
        Metered::Request(id) => window.admit(id).await,
        Metered::Cancels(id) => window.release(id),
        Metered::Free => {}
    }
}

/// One line of input, or a line that was too long (only its head kept).
enum Frame {
    Line(Vec<u8>),
    TooLong { head: Vec<u8> },
}

/// Splits input into lines, never holding more than [`MAX_FRAME_BYTES`].
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    /// Inside a line that passed the cap: its head, while the rest is skipped.
    skipping: Option<Vec<u8>>,
}

impl Lines {
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<Frame> {
        let mut frames = Vec::new();
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|b| *b == b'\n');
            let (piece, rest, ended) = match newline {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if let Some(head) = &mut self.skipping {
                if ended {
                    frames.push(Frame::TooLong {
                        head: std::mem::take(head),
                    });
                    self.skipping = None;
                }
                continue;
            }
            if self.buf.len() + piece.len() > MAX_FRAME_BYTES {
                let mut head = std::mem::take(&mut self.buf);
                head.extend_from_slice(&piece[..piece.len().min(HEAD_BYTES)]);
                head.truncate(HEAD_BYTES);
                if ended {
                    frames.push(Frame::TooLong { head });
                } else {
                    self.skipping = Some(head);
                }
                continue;
            }
            self.buf.extend_from_slice(piece);
            if ended {
                frames.push(Frame::Line(std::mem::take(&mut self.buf)));
            }
        }
        frames
    }

    fn finish(&mut self) -> Option<Frame> {
        if let Some(head) = self.skipping.take() {
            return Some(Frame::TooLong { head });
        }
        (!self.buf.is_empty()).then(|| Frame::Line(std::mem::take(&mut self.buf)))
    }
}

/// The line to pass on (newline-terminated) and how it is metered, or `None` when it was
/// answered here.
fn check(frame: &Frame, answers: &mpsc::UnboundedSender<Vec<u8>>) -> Option<(Vec<u8>, Metered)> {
    match verdict(frame) {
        Verdict::Pass(line, metered) => Some((line, metered)),
        Verdict::Skip => None,
        Verdict::Answer(answer) => {
            let _ = answers.send(answer);
            None
        }
    }
}

enum Verdict {
    Pass(Vec<u8>, Metered),
    Skip,
    Answer(Vec<u8>),
}

fn verdict(frame: &Frame) -> Verdict {
    let line = match frame {
        Frame::TooLong { head } => {
            let id = scan::scan(head).id(head);
            return answer(
                id,
                INVALID_REQUEST,
                format!(
                    "Invalid Request: the frame is over {MAX_FRAME_BYTES} bytes and was skipped; send smaller arguments"
                ),
            );
        }
        Frame::Line(line) => line,
    };
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Verdict::Skip;
    }
    let found = scan::scan(trimmed);
    let id = found.id(trimmed);
    let Ok(text) = std::str::from_utf8(trimmed) else {
        return answer(
            id,
            PARSE_ERROR,
            "Parse error: the frame is not valid UTF-8".to_owned(),
        );
    };
    if found.depth > MAX_DEPTH {
        return answer(
            id,
            INVALID_REQUEST,
            format!(
                "Invalid Request: the frame nests {} levels deep, more than {MAX_DEPTH}",
                found.depth
            ),
        );
    }
    let repaired = found.repaired(text);
    let text = repaired.as_deref().unwrap_or(text);
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            return answer(
                id,
                PARSE_ERROR,
                format!("Parse error: the frame is not JSON ({e})"),
            );
        }
    };
    if let Some((code, message)) = invalid(&value) {
        return answer(value.get("id").cloned().unwrap_or(id), code, message);
    }
    let mut line = text.as_bytes().to_vec();
    line.push(b'\n');
    Verdict::Pass(line, window::metered(&value))
}

/// Why a parsed frame cannot go to the server, if it cannot.
fn invalid(value: &Value) -> Option<(i64, String)> {
    let Some(object) = value.as_object() else {
        let what = if value.is_array() {
            "a batch (JSON-RPC batches are not supported; send one message per line)"
        } else {
            "not an object"
        };
        return Some((
            INVALID_REQUEST,
            format!("Invalid Request: the frame is {what}"),
        ));
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some((
            INVALID_REQUEST,
            "Invalid Request: \"jsonrpc\" must be \"2.0\"".to_owned(),
        ));
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // Only a response to one of the server's own requests may lack a method.
        let response = object.contains_key("id")
            && (object.contains_key("result") || object.contains_key("error"));
        return (!response).then(|| {
            (
                INVALID_REQUEST,
                "Invalid Request: a request needs a \"method\" string".to_owned(),
            )
        });
    };
    match object.get("params") {
        None | Some(Value::Object(_)) => {}
        Some(_) => {
            return Some((
                INVALID_PARAMS,
                format!("Invalid params: the params of {method} must be an object"),
            ));
        }
    }
    if method == "tools/call" {
        let params = object.get("params");
        if !params
            .and_then(|p| p.get("name"))
            .is_some_and(Value::is_string)
        {
            return Some((
                INVALID_PARAMS,
                "Invalid params: tools/call needs params.name, a tool name".to_owned(),
            ));
        }
        match params.and_then(|p| p.get("arguments")) {
            None | Some(Value::Object(_)) | Some(Value::Null) => {}
            Some(_) => {
                return Some((
                    INVALID_PARAMS,
                    "Invalid params: params.arguments of tools/call must be an object".to_owned(),
                ));
            }
        }
    }
    None
}

fn answer(id: Value, code: i64, message: String) -> Verdict {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    Verdict::Answer(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(frame: &[u8]) -> Option<i64> {
        match verdict(&Frame::Line(frame.to_vec())) {
            Verdict::Answer(line) => serde_json::from_slice::<Value>(&line)
                .ok()
                .and_then(|v| v["error"]["code"].as_i64()),
            Verdict::Pass(..) | Verdict::Skip => None,
        }
    }

    #[test]
    fn good_frames_pass_and_bad_ones_are_answered() {
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            None
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            None
        );
        assert_eq!(code_of(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
        assert_eq!(code_of(b"{oops"), Some(PARSE_ERROR));
        assert_eq!(code_of(b"\xff"), Some(PARSE_ERROR));
        assert_eq!(code_of(br#"{"id":1,"method":"x"}"#), Some(INVALID_REQUEST));
        assert_eq!(code_of(br#"[{"jsonrpc":"2.0"}]"#), Some(INVALID_REQUEST));
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            Some(INVALID_PARAMS)
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":"x"}}"#),
            Some(INVALID_PARAMS)
        );
        assert_eq!(code_of(b"   "), None);
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1}"#),
            Some(INVALID_REQUEST)
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            Some(INVALID_REQUEST)
        );
    }

    #[test]
    fn nesting_up_to_the_limit_passes_and_one_more_is_answered() {
        let frame = |depth: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"x":{}0{}}}}}"#,
                "[".repeat(depth - 2),
                "]".repeat(depth - 2)
            )
        };
        assert_eq!(code_of(frame(MAX_DEPTH).as_bytes()), None);
        assert_eq!(
            code_of(frame(MAX_DEPTH + 1).as_bytes()),
            Some(INVALID_REQUEST)
        );
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_to_its_end_without_being_held() {
        let mut lines = Lines::default();
        let mut frames = lines.feed(br#"{"jsonrpc":"2.0","id":5,"params":{"x":""#);
        for _ in 0..(MAX_FRAME_BYTES / (1 << 20) + 2) {
            frames.extend(lines.feed(&vec![b'a'; 1 << 20]));
            assert!(lines.buf.len() <= MAX_FRAME_BYTES);
        }
        frames.extend(lines.feed(b"\"}}\n{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"m\"}\n"));
        assert_eq!(frames.len(), 2);
        match &frames[0] {
            Frame::TooLong { head } => assert_eq!(scan::scan(head).id(head), json!(5)),
            Frame::Line(_) => panic!("the long line was not cut"),
        }
        assert!(matches!(&frames[1], Frame::Line(l) if l.ends_with(b"}")));
    }
}
