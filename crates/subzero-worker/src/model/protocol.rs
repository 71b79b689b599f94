//! What a model protocol is to the one client ([`super::client::Client`]): where a request
//! goes, its headers, its typed body, and an assembler that turns the stream's events back
//! into a [`ModelTurn`]. Everything else — HTTP, the origin policy, SSE framing, the size caps,
//! the idle timeout, the text cap — is the client's, written once.
//!
//! A new protocol is one module with one `impl Protocol` and one `impl Assembler`
//! (docs/architecture.md, "Adding a protocol").

use reqwest::header::HeaderMap;
use serde::Serialize;
use subzero_protocol::ApiKey;

use super::client::{bearer, joined};
use super::partial::Draft;
use super::{ModelError, ModelTurn, Request};

/// Where a model's text goes as it arrives.
pub type OnText<'a> = dyn FnMut(&str) + Send + 'a;

/// Whether the stream goes on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    More,
    /// The protocol's own end-of-answer event (`[DONE]`, `response.completed`,
    /// `message_stop`, …): the answer is whole; nothing after it is read.
    Done,
}

/// One model protocol: a request's shape and its stream's meaning.
pub trait Protocol: std::fmt::Debug + Send + Sync {
    /// The request body, borrowing from the conversation it encodes.
    type Body<'a>: Serialize;
    /// Assembles one answer from the stream's `data:` payloads.
    type Assembler: Assembler;

    /// The path of the endpoint below the caller's base URL.
    const PATH: &'static str;

    /// The streaming request body for `model`.
    fn body<'a>(&self, model: &'a str, request: &Request<'a>) -> Self::Body<'a>;

    /// The URL requests go to, from the caller's `model.url`: the base with [`Self::PATH`]
    /// appended, or already the full endpoint.
    fn endpoint(url: &str) -> String {
        joined(url, Self::PATH)
    }

    /// The headers that carry `key` (marked sensitive) and whatever else the protocol needs;
    /// `content-type` is the client's. A Bearer token unless the protocol says otherwise.
    fn headers(&self, key: &ApiKey) -> Result<HeaderMap, ModelError> {
        bearer(key)
    }

    /// Whether `error` is the endpoint refusing this request's *shape* (it generated
    /// nothing) in a way the protocol has now adapted to: the client then sends the same
    /// request once more, in the new shape. Never a retry of a generation.
    fn adapts_to(&self, error: &ModelError) -> bool {
        let _ = error;
        false
    }

    /// An HTTP error as the caller should read it (a provider's error object made short).
    fn explain(&self, error: ModelError) -> ModelError {
        error
    }
}

/// The stream of one answer, event by event.
pub trait Assembler: Send + Sized {
    /// A fresh assembler for one answer; a call's arguments past `max_argument_bytes` are
    /// dropped and counted.
    fn new(max_argument_bytes: u64) -> Self;

    /// The answer so far.
    fn draft(&self) -> &Draft;

    /// Handles one SSE `data:` payload; text goes to `on_text` as it arrives. A payload that
    /// is not JSON, or the provider's error event, fails the request.
    fn feed(&mut self, data: &str, on_text: &mut OnText<'_>) -> Result<Flow, ModelError>;

    /// Bytes of answer text so far (for the request's text cap).
    fn text_len(&self) -> usize {
        self.draft().text_len()
    }

    /// The answer so far, taken as it is (after [`Flow::Done`], or at the text cap).
    fn finish(self) -> ModelTurn;

    /// The stream ended without [`Flow::Done`]: the answer when what came says it is whole
    /// (a `finish_reason`, a `stop_reason`), else the error for a cut stream. A cut answer
    /// is never taken as a whole one.
    fn end(self) -> Result<ModelTurn, ModelError>;
}
