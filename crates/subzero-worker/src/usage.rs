//! What a model turn cost, in tokens: what the endpoint reported, or — when its stream
//! carried no usage — an estimate from the bytes that crossed the wire, so `tokenBudget`
//! bounds a run on every endpoint.
//!
//! The estimate is `⌈bytes / 4⌉` on each side: input tokens from the request body sent,
//! output tokens from the response body received (SSE framing included). Four bytes per
//! token is the usual rule of thumb for English text and code; counting the framing makes
//! the output side an overestimate, which is the safe side for a budget. A run where any
//! turn was estimated reports `source: "estimated"`.

use crate::control::RunUsage;
use crate::model::ModelTurn;

/// Bytes per estimated token.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The tokens of one model turn and where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnTokens {
    pub input: u64,
    pub output: u64,
    /// The stream reported no usage: `input` and `output` are the byte estimate.
    pub estimated: bool,
}

impl TurnTokens {
    /// The reported usage of `turn`, or the estimate when its stream carried none.
    pub fn of(turn: &ModelTurn) -> Self {
        if turn.usage_reported {
            Self {
                input: turn.input_tokens,
                output: turn.output_tokens,
                estimated: false,
            }
        } else {
            Self {
                input: estimate(turn.request_bytes),
                output: estimate(turn.response_bytes),
                estimated: true,
            }
        }
    }
}

/// `⌈bytes / 4⌉`.
pub fn estimate(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

impl RunUsage {
    /// Adds one turn's tokens; one estimated turn makes the run's usage estimated.
    pub fn add(&mut self, tokens: TurnTokens) {
        self.input_tokens = self.input_tokens.saturating_add(tokens.input);
        self.output_tokens = self.output_tokens.saturating_add(tokens.output);
        self.estimated |= tokens.estimated;
    }

    /// Input plus output tokens so far (what `tokenBudget` bounds).
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_without_usage_is_estimated_from_its_bytes_rounded_up() {
        let turn = ModelTurn {
            request_bytes: 4001,
            response_bytes: 3,
            ..ModelTurn::default()
        };
        assert_eq!(
            TurnTokens::of(&turn),
            TurnTokens {
                input: 1001,
                output: 1,
                estimated: true
            }
        );
        let reported = ModelTurn {
            usage_reported: true,
            input_tokens: 7,
            output_tokens: 2,
            request_bytes: 4001,
            ..ModelTurn::default()
        };
        assert!(!TurnTokens::of(&reported).estimated);
        assert_eq!(TurnTokens::of(&reported).input, 7);
    }

    #[test]
    fn one_estimated_turn_makes_the_run_estimated() {
        let mut usage = RunUsage::default();
        usage.add(TurnTokens {
            input: 10,
            output: 5,
            estimated: false,
        });
        assert!(!usage.estimated);
        usage.add(TurnTokens {
            input: 1,
            output: 1,
            estimated: true,
        });
        usage.add(TurnTokens {
            input: 1,
            output: 1,
            estimated: false,
        });
        assert!(usage.estimated);
        assert_eq!(usage.tokens(), 19);
    }
}
