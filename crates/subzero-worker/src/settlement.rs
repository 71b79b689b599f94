//! How a finished run is reported: the `run_settled` fields that follow from how it ended,
//! and why the steers it never read are discarded.

use crate::control::{
    self, DiscardReason, ErrorBody, ErrorBodyExt, ErrorCode, Outbound, RunId, RunStatus, RunUsage,
};
use crate::run::Completed;
use crate::{Outcome, emit};

/// Why the steers still queued when the run ended are discarded.
pub(crate) fn discard_reason(outcome: &Outcome) -> DiscardReason {
    match outcome {
        Outcome::Completed(_) | Outcome::Stopped => DiscardReason::Stopped,
        Outcome::Failed(e) if e.code == ErrorCode::LimitExceeded => DiscardReason::Limit,
        Outcome::Failed(_) => DiscardReason::Failed,
    }
}

/// The fields of a `run_settled` that depend on how the run ended.
pub(crate) struct Settlement {
    pub(crate) status: RunStatus,
    result: Option<String>,
    error: Option<ErrorBody>,
    budget: Option<control::BudgetReached>,
    cut: Option<control::RunCut>,
}

impl Settlement {
    /// How `outcome` settles; `partial` (the redacted text so far) is the result of a failed
    /// or stopped run. A completed run's leaf is reported here (`leaf_committed`), so it goes
    /// out before the settlement.
    pub(crate) fn of(run_id: &RunId, outcome: Outcome, partial: Option<String>) -> Self {
        match outcome {
            Outcome::Completed(done) => Self::completed(run_id, done),
            Outcome::Failed(err) => Self::ended(RunStatus::Failed, partial, Some(err)),
            Outcome::Stopped => Self::ended(RunStatus::Stopped, partial, None),
        }
    }

    /// `completed`, or `budget_exhausted` when the run reached a budget; `failed` when the
    /// transcript's leaf id or digest is outside the contract (nothing is committed then).
    fn completed(run_id: &RunId, done: Completed) -> Self {
        let (Ok(leaf_id), Ok(digest)) = (
            control::LeafId::try_from(done.leaf_id.as_str()),
            control::Digest::try_from(done.digest.as_str()),
        ) else {
            return Self::ended(
                RunStatus::Failed,
                Some(done.result),
                Some(ErrorBody::new(
                    ErrorCode::Internal,
                    "internal: the transcript produced a leaf id or digest outside the contract",
                )),
            );
        };
        emit::emit(&Outbound::LeafCommitted {
            run_id: run_id.clone(),
            leaf_id,
            digest,
        });
        let budget = done.budget.map(|reached| reached.wire());
        let cut = done
            .cut
            .and_then(std::num::NonZeroU64::new)
            .map(|value| control::RunCut {
                limit: control::RunCutLimit::MaxOutputTokens,
                value,
            });
        let status = if budget.is_some() {
            RunStatus::BudgetExhausted
        } else {
            RunStatus::Completed
        };
        Self {
            status,
            result: Some(done.result),
            error: None,
            budget,
            cut,
        }
    }

    fn ended(status: RunStatus, result: Option<String>, error: Option<ErrorBody>) -> Self {
        Self {
            status,
            result,
            error,
            budget: None,
            cut: None,
        }
    }

    /// The `run_settled` of `run_id`, with the run's `usage`.
    pub(crate) fn message(self, run_id: RunId, usage: RunUsage) -> Outbound {
        Outbound::RunSettled {
            run_id,
            status: self.status,
            result: self.result,
            budget: self.budget,
            cut: self.cut,
            error: self.error,
            usage: usage.into(),
        }
    }
}
