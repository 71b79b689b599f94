//! How full the model's context window is: the prompt size of each request, from the
//! endpoint's reported input tokens, else the `tokenBudget` estimate (`crate::usage`: four
//! bytes of request body per token), and the projection of the next request's prompt
//! before it is sent.
//!
//! The projection scales the next request's estimate by what the last reported request
//! showed (its reported input tokens over its estimate), so a server whose tokenizer reads
//! four bytes as two tokens is measured in its own tokens; without a reported turn it is
//! the plain estimate.

use std::sync::Mutex;

use serde_json::json;

use crate::control::{ErrorBody, ErrorBodyExt, ErrorCode};
use crate::model::{ModelError, ModelTurn};
use crate::redact::redact;
use crate::usage::{TurnTokens, estimate};

/// The share of the window past which the worker compacts before sending (80 %).
pub use subzero_protocol::defaults::COMPACT_AT_PERCENT;

/// The prompt sizes of one child's requests against its window.
#[derive(Debug)]
pub struct ContextMeter {
    /// The model's window in tokens, when the broker knows it.
    window: Option<u64>,
    last: Mutex<Option<Sample>>,
}

/// One request's prompt: the body's bytes and its tokens (reported or estimated).
#[derive(Debug, Clone, Copy)]
struct Sample {
    request_bytes: u64,
    prompt_tokens: u64,
    reported: bool,
}

impl ContextMeter {
    pub fn new(window: Option<u64>) -> Self {
        Self {
            window,
            last: Mutex::new(None),
        }
    }

    pub fn window(&self) -> Option<u64> {
        self.window
    }

    /// Records the prompt of the request that produced `turn`.
    pub fn record(&self, turn: &ModelTurn) {
        let tokens = TurnTokens::of(turn);
        let sample = Sample {
            request_bytes: turn.request_bytes,
            prompt_tokens: tokens.input,
            reported: !tokens.estimated,
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(sample);
    }

    fn sample(&self) -> Option<Sample> {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The prompt tokens a request body of `request_bytes` bytes is expected to take.
    pub fn project(&self, request_bytes: u64) -> u64 {
        let estimated = estimate(request_bytes);
        match self.sample() {
            // A reported 0 measures nothing (a server that leaves usage at zero).
            Some(s) if s.reported && s.request_bytes > 0 && s.prompt_tokens > 0 => {
                let scaled = u128::from(estimated) * u128::from(s.prompt_tokens)
                    / u128::from(estimate(s.request_bytes).max(1));
                u64::try_from(scaled).unwrap_or(u64::MAX)
            }
            _ => estimated,
        }
    }

    /// The most prompt tokens a request may take before the worker compacts first:
    /// [`COMPACT_AT_PERCENT`] of the window; `None` when the window is unknown.
    pub fn threshold(&self) -> Option<u64> {
        self.window.map(|w| w * COMPACT_AT_PERCENT / 100)
    }

    /// Whether a request of `request_bytes` bytes would pass the threshold.
    pub fn would_pass(&self, request_bytes: u64) -> bool {
        self.threshold()
            .is_some_and(|limit| self.project(request_bytes) > limit)
    }
}

/// `context_exhausted`: the endpoint refused the prompt as too long (`err`), or the worker
/// would not send it (`err` is `None`: compaction is off, or compacting failed and `why`
/// says how). The child stays `ready`; its transcript is as it was.
pub fn exhausted(
    err: Option<&ModelError>,
    why: &str,
    meter: &ContextMeter,
    prompt: u64,
) -> ErrorBody {
    let mut details = json!({
        "contextTokens": prompt,
        "contextWindow": meter.window(),
    });
    if let Some(ModelError::ContextExhausted { status, excerpt }) = err {
        details["status"] = json!(status);
        details["excerpt"] = json!(excerpt);
    }
    let cause = match err {
        Some(err) => err.to_string(),
        None => why.to_owned(),
    };
    ErrorBody::new(
        ErrorCode::ContextExhausted,
        redact(&format!(
            "context_exhausted: {cause}; the child is ready and its transcript unchanged: send the followup with compact: true to summarise it into a new branch, or resume with a larger contextWindow"
        )),
    )
    .with_details(details)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(request_bytes: u64, reported: Option<u64>) -> ModelTurn {
        ModelTurn {
            request_bytes,
            usage_reported: reported.is_some(),
            input_tokens: reported.unwrap_or(0),
            ..ModelTurn::default()
        }
    }

    #[test]
    fn without_a_reported_turn_the_projection_is_the_token_budget_estimate() {
        let meter = ContextMeter::new(Some(1000));
        assert_eq!(meter.project(4001), 1001);
        meter.record(&turn(4000, None));
        assert_eq!(meter.project(8000), 2000);
    }

    #[test]
    fn a_reported_turn_scales_the_estimate_to_the_servers_tokens() {
        let meter = ContextMeter::new(Some(1000));
        meter.record(&turn(4000, Some(500)));
        assert_eq!(meter.project(8000), 1000);
    }

    #[test]
    fn the_threshold_is_eighty_percent_of_a_known_window() {
        let meter = ContextMeter::new(Some(1000));
        assert_eq!(meter.threshold(), Some(800));
        assert!(!meter.would_pass(3200));
        assert!(meter.would_pass(3204));
        let unknown = ContextMeter::new(None);
        assert!(!unknown.would_pass(u64::MAX / 2));
    }
}
