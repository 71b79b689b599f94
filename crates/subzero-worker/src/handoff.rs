//! The end of a run that reached a budget: one last request without tools asking the child
//! for a short handoff summary, which becomes the run's result (`budget_exhausted`).
//!
//! The request is bounded on its own: at most [`HANDOFF_MAX_OUTPUT_TOKENS`] output tokens
//! and [`HANDOFF_TIMEOUT`] of wall clock, and — because a model may ignore the token cap —
//! at most [`HANDOFF_MAX_BYTES`] of summary text: the stream is no longer read once the
//! text reaches it, and the summary is cut there and marked ([`cut_summary`]). When the
//! request fails, the result is a note the worker writes itself (the budget, the value
//! reached, why no summary came, and the child's last text), so the parent always gets
//! something it can act on.

use std::num::NonZeroU64;
use std::time::Duration;

use crate::control::{BudgetName, BudgetReached};

/// Output tokens of the handoff request (or less, when the run's `maxOutputTokens` is).
pub const HANDOFF_MAX_OUTPUT_TOKENS: u32 = 1024;
/// Wall clock the handoff request may take, past the budget that ended the run.
pub const HANDOFF_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of handoff summary kept; the stream is not read past them.
pub const HANDOFF_MAX_BYTES: usize = 16 * 1024;

/// `summary` within [`HANDOFF_MAX_BYTES`]: unchanged when it fits (and the stream was read
/// to its end), else its first bytes up to the cap (at a character boundary) followed by
/// `\n[… handoff summary cut at 16384 bytes]`.
pub fn cut_summary(mut summary: String, stream_stopped: bool) -> String {
    if summary.len() <= HANDOFF_MAX_BYTES && !stream_stopped {
        return summary;
    }
    let cut = summary.floor_char_boundary(HANDOFF_MAX_BYTES);
    summary.truncate(cut);
    summary.push_str(&cut_marker());
    summary
}

/// The line that ends a cut summary.
pub fn cut_marker() -> String {
    format!("\n[… handoff summary cut at {HANDOFF_MAX_BYTES} bytes]")
}

/// A budget the run reached: which, its value, and what the run had used of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reached {
    pub budget: BudgetName,
    pub limit: u64,
    pub reached: u64,
}

impl Reached {
    /// The wire value for `run_settled`.
    pub fn wire(&self) -> BudgetReached {
        BudgetReached {
            budget: self.budget,
            limit: NonZeroU64::new(self.limit).unwrap_or(NonZeroU64::MIN),
            reached: self.reached,
        }
    }

    fn what(&self) -> String {
        match self.budget {
            BudgetName::MaxTurns => format!("its {} model turns (maxTurns)", self.limit),
            BudgetName::DeadlineMs => format!(
                "its deadline of {} ms (deadlineMs) after {} ms",
                self.limit, self.reached
            ),
            BudgetName::TokenBudget => format!(
                "its token budget: {} of {} tokens used (tokenBudget)",
                self.reached, self.limit
            ),
            BudgetName::ToolTimeoutMs => {
                format!("its tool timeout of {} ms (toolTimeoutMs)", self.limit)
            }
            BudgetName::MaxOutputTokens => {
                format!("its output-token cap of {} (maxOutputTokens)", self.limit)
            }
        }
    }

    /// The user-side message that asks for the summary; it stays in the transcript, so a
    /// later followup sees why the run ended.
    pub fn notice(&self) -> String {
        format!(
            "[subzero] This run has used {}. Do not call any tool. Reply now with a short handoff summary for the agent that delegated this task: what you did, what you found, what remains to be done, and how to continue.",
            self.what()
        )
    }

    /// The result when no summary came: the budget, why, and the child's last text.
    pub fn fallback(&self, why: &str, last_text: &str) -> String {
        let mut text = format!(
            "[subzero] The run used {} and ended before its work was done; no handoff summary could be produced ({why}).",
            self.what()
        );
        if !last_text.trim().is_empty() {
            text.push_str("\n\nThe child's last text:\n");
            text.push_str(last_text);
        }
        text
    }

    /// The tool result recorded for a call the budget left unrun, so every protocol still
    /// sees each call answered.
    pub fn unrun_call(&self) -> String {
        format!(
            "not run: the run has used {}; no more tools run in it",
            self.what()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_over_the_byte_cap_is_cut_at_a_char_boundary_and_marked() {
        assert_eq!(cut_summary("short".to_owned(), false), "short");
        let long = "é".repeat(HANDOFF_MAX_BYTES);
        let cut = cut_summary(long, true);
        assert!(
            cut.ends_with("[… handoff summary cut at 16384 bytes]"),
            "{cut}"
        );
        assert!(cut.len() <= HANDOFF_MAX_BYTES + cut_marker().len());
        assert!(cut.starts_with("éé"));
        let stopped = cut_summary("x".repeat(HANDOFF_MAX_BYTES), true);
        assert_eq!(stopped.len(), HANDOFF_MAX_BYTES + cut_marker().len());
    }

    #[test]
    fn the_notice_names_the_budget_and_forbids_tools() {
        let reached = Reached {
            budget: BudgetName::TokenBudget,
            limit: 1000,
            reached: 1204,
        };
        let notice = reached.notice();
        assert!(notice.contains("1204 of 1000 tokens"), "{notice}");
        assert!(notice.contains("Do not call any tool"), "{notice}");
        let fallback = reached.fallback("HTTP 500", "half an answer");
        assert!(fallback.contains("tokenBudget") && fallback.contains("half an answer"));
    }
}
