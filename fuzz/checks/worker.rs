//! The checks behind the `transcript_lines`, `sse_stream` and `stream_redactor` fuzz targets.
//!
//! Shared by the fuzz targets (`fuzz/fuzz_targets/`) and the seed replay in
//! `crates/subzero-worker/tests/testsuite/fuzz_smoke.rs`, which includes this file by path, so CI runs
//! the same assertions on stable without libFuzzer. Each check takes raw bytes, must never
//! panic except on a broken invariant, and is deterministic.
//!
//! Inputs that need split points start with a small header (see [`Splits`]): byte 0 says how
//! many chunk sizes follow (mod 16), each next byte is one chunk size, the rest is the stream.

use std::sync::Once;

use serde_json::Value;
use subzero_worker::fuzzing::{
    Assembler, ChatStream, Flow, ModelError, ModelTurn, PLACEHOLDER, ParsedTranscript, SseError,
    SseParser, StreamRedactor, add_secrets,
};

/// Ids tried as `fromLeaf` per input; bounds the quadratic re-parse.
const MAX_LEAVES_TRIED: usize = 32;

/// The `sse_stream` parser's cap on a line and on one event's data: small, so inputs of
/// libFuzzer's default length reach both sides of it.
const MAX_SSE_LINE: usize = 512;

/// (c) Transcript lines: the bytes as a transcript file. When it opens at its end, it must
/// reopen at that leaf with that digest; every id it names must open or be refused cleanly,
/// and a leaf that opens must reopen with its own digest.
pub fn transcript_lines(data: &[u8]) {
    let Ok(at_end) = ParsedTranscript::from_bytes(data, None, None) else {
        return;
    };
    reopens_with_its_digest(data, at_end.leaf());
    for id in ids_named(data).iter().take(MAX_LEAVES_TRIED) {
        if ParsedTranscript::from_bytes(data, Some(id), None).is_ok() {
            reopens_with_its_digest(data, id);
        }
    }
}

fn reopens_with_its_digest(data: &[u8], leaf: &str) {
    let opened = ParsedTranscript::from_bytes(data, Some(leaf), None)
        .unwrap_or_else(|why| panic!("leaf {leaf} opened once, then: {why}"));
    let digest = opened.digest().expect("an opened transcript has a digest");
    assert!(
        digest.len() == "sha256:".len() + 64 && digest.starts_with("sha256:"),
        "malformed digest {digest}"
    );
    let again = ParsedTranscript::from_bytes(data, Some(leaf), Some(&digest))
        .unwrap_or_else(|why| panic!("leaf {leaf} does not reopen with its own digest: {why}"));
    assert_eq!(again.leaf(), leaf);
    assert_eq!(again.digest().as_deref(), Some(digest.as_str()));
}

/// Every `id` and `parentId` string on a line that is a JSON object.
fn ids_named(data: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .flat_map(|entry| {
            ["id", "parentId"].map(|key| entry.get(key).and_then(Value::as_str).map(str::to_owned))
        })
        .flatten()
        .collect()
}

/// An input's stream and the chunk sizes it asks for.
struct Splits<'a> {
    sizes: &'a [u8],
    stream: &'a [u8],
}

impl<'a> Splits<'a> {
    fn of(data: &'a [u8]) -> Self {
        let Some((&count, rest)) = data.split_first() else {
            return Self {
                sizes: &[],
                stream: &[],
            };
        };
        let count = usize::from(count % 16).min(rest.len());
        let (sizes, stream) = rest.split_at(count);
        Self { sizes, stream }
    }

    /// The stream cut at the requested sizes (empty chunks included), the rest as one chunk.
    fn chunks(&self) -> Vec<&'a [u8]> {
        let mut rest = self.stream;
        let mut chunks = Vec::new();
        for &size in self.sizes {
            let (chunk, tail) = rest.split_at(usize::from(size).min(rest.len()));
            chunks.push(chunk);
            rest = tail;
        }
        chunks.push(rest);
        chunks
    }
}

/// The payloads an [`SseParser`] yields: those completed while feeding, then those of `finish`.
#[derive(Debug, PartialEq, Eq)]
struct Events {
    fed: Vec<String>,
    finished: Vec<String>,
}

/// The events, or the cap error that ended the stream (the client then fails the request,
/// so the events before it do not matter).
fn parse_events<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Result<Events, SseError> {
    let mut parser = SseParser::with_max_line(MAX_SSE_LINE);
    let mut fed = Vec::new();
    for chunk in chunks {
        fed.extend(parser.feed(chunk)?);
    }
    Ok(Events {
        fed,
        finished: parser.finish()?,
    })
}

/// (d) The model client's SSE parser and tool-call assembler: the same bytes fed whole, byte
/// by byte and in the input's chunks yield the same events (so the same turn) or the same
/// cap error; assembling the events does not panic, the streamed text equals the turn's
/// text, and every kept tool call has an id and a name or arguments.
pub fn sse_stream(data: &[u8]) {
    let splits = Splits::of(data);
    let whole = parse_events([splits.stream]);
    let chunked = parse_events(splits.chunks());
    assert_eq!(
        whole, chunked,
        "events depend on where the stream was split"
    );
    let bytewise = parse_events(splits.stream.chunks(1));
    assert_eq!(whole, bytewise, "events differ when fed byte by byte");
    if let Ok(events) = &whole {
        assemble(events);
    }
}

/// Mirrors `ChatClient::complete`: events fed while streaming stop at `[DONE]`; the events of
/// `finish` are all handled; an error event ends the turn.
fn assemble(events: &Events) {
    let mut assembler = ChatStream::default();
    let mut streamed = String::new();
    let outcome = {
        let mut on_text = |text: &str| streamed.push_str(text);
        replay(&mut assembler, events, &mut on_text)
    };
    if outcome.is_ok() {
        turn_is_sound(&assembler.finish(), &streamed);
    }
}

fn replay(
    assembler: &mut ChatStream,
    events: &Events,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Result<(), ModelError> {
    for data in &events.fed {
        if assembler.feed(data, on_text)? == Flow::Done {
            return Ok(());
        }
    }
    for data in &events.finished {
        assembler.feed(data, on_text)?;
    }
    Ok(())
}

fn turn_is_sound(turn: &ModelTurn, streamed: &str) {
    assert_eq!(
        turn.text, streamed,
        "the turn's text is not what was streamed"
    );
    for call in &turn.tool_calls {
        assert!(!call.id.is_empty(), "a tool call without an id: {call:?}");
        assert!(
            !call.name.is_empty() || !call.arguments.is_empty(),
            "an empty tool call was kept: {call:?}"
        );
    }
}

/// Secrets the redactor knows during the `stream_redactor` check: a key, one with JSON escapes,
/// a multi-byte one, one that is a prefix of another, two that overlap, a tiny repetitive one.
/// None shares characters with the placeholder's ends (a secret that starts with `D]` can be
/// completed by a placeholder; that is out of scope).
pub const SECRETS: &[&str] = &[
    "sk-live-0123456789abcdef",
    "pa\"ss\\word-42",
    "ключ-секрет-🔑",
    "tok-1234",
    "tok-12345678",
    "abcXYZ",
    "XYZdef",
    "qq",
];

static SECRETS_ADDED: Once = Once::new();

/// Every form the redactor must catch: each secret and its JSON-escaped form.
fn secret_forms() -> Vec<String> {
    SECRETS
        .iter()
        .flat_map(|secret| {
            let json = serde_json::to_string(secret).expect("a string serializes");
            [(*secret).to_owned(), json[1..json.len() - 1].to_owned()]
        })
        .collect()
}

/// (e) The streaming redactor: byte 0 picks a secret, byte 1 where it goes into the text,
/// the rest is a split header (see [`Splits`]) and the text. However the text is split, no
/// secret (nor its JSON-escaped form) appears in the concatenated output.
pub fn stream_redactor(data: &[u8]) {
    SECRETS_ADDED.call_once(|| add_secrets(SECRETS.iter().copied()));
    let (pick, at, rest) = match data {
        [pick, at, rest @ ..] => (usize::from(*pick), usize::from(*at), rest),
        _ => return,
    };
    let splits = Splits::of(rest);
    let secret = SECRETS[pick % SECRETS.len()];
    let mut text = String::from_utf8_lossy(splits.stream).into_owned();
    let mut insert_at = text.len() * at / 255;
    while !text.is_char_boundary(insert_at) {
        insert_at -= 1;
    }
    text.insert_str(insert_at, secret);

    let mut redactor = StreamRedactor::new();
    let mut released = String::new();
    let mut rest = text.as_str();
    for &size in splits.sizes {
        let mut cut = usize::from(size).min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        released.push_str(&redactor.push(chunk));
        rest = tail;
    }
    released.push_str(&redactor.push(rest));
    released.push_str(&redactor.finish());

    for form in secret_forms() {
        assert!(
            !released.contains(&form),
            "secret {form:?} leaked: {released:?}"
        );
    }
    assert!(
        released.contains(PLACEHOLDER),
        "nothing was redacted: {released:?}"
    );
}
