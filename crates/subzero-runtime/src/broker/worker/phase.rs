//! What a driver's worker is doing, as a state: idle, running a run, or waiting for the
//! confirmation of a stop it reported, each phase with what it has; and how a run's end, as
//! the worker reported it, becomes what is settled.

use subzero_core::lifecycle::{Activity, LeafRef};
use subzero_core::{BudgetReached, ErrorCode, RunId};
use subzero_protocol::{self as p, RunSettledStatus};

use super::settle::Ended;
use crate::store::{ErrorDetails, RunUsage, UsageSource};

/// The phases of a driver's worker, each with what it has.
#[derive(Debug)]
pub(super) enum Phase {
    /// No run. `closing`: a close was refused because a message was pending; the worker
    /// is closed once that message is passed on.
    Idle { closing: bool },
    /// The worker works on a run.
    Running(ActiveRun),
    /// The worker reported the run `stopped`; it is settled at its cancel confirmation.
    Stopped(ActiveRun),
}

/// A run the worker works on, and what the worker reported of it so far.
#[derive(Debug)]
pub(super) struct ActiveRun {
    pub(super) run: RunId,
    /// The leaf the worker committed for it.
    pub(super) leaf: Option<(String, String)>,
    /// What it used, from the worker's `run_settled`.
    pub(super) usage: Option<RunUsage>,
    /// The `details` of the error the worker reported (its `run_settled failed`),
    /// recorded with the failure.
    pub(super) error_details: Option<ErrorDetails>,
    /// What the worker last reported doing in it (the store is told only of changes).
    pub(super) activity: Option<Activity>,
}

impl ActiveRun {
    pub(super) fn new(run: RunId) -> ActiveRun {
        ActiveRun {
            run,
            leaf: None,
            usage: None,
            error_details: None,
            activity: None,
        }
    }
}

impl Phase {
    /// The run the worker works on (also while its stop awaits confirmation).
    pub(super) fn active(&mut self) -> Option<&mut ActiveRun> {
        match self {
            Phase::Running(active) | Phase::Stopped(active) => Some(active),
            Phase::Idle { .. } => None,
        }
    }
}

/// The worker's completion, with the leaf it committed for the run; a completion without a
/// (well-formed) leaf cannot be recorded as one and fails.
pub(super) fn completed(
    active: &mut ActiveRun,
    result: String,
    budget: Option<BudgetReached>,
) -> Ended {
    let failed = |message: String| Ended::Failed {
        code: ErrorCode::Internal,
        message,
        partial: None,
        artifact: None,
    };
    let Some((leaf_id, leaf_digest)) = active.leaf.take() else {
        return failed(
            "the worker reported completion without committing a transcript leaf".into(),
        );
    };
    let leaf = subzero_core::Sha256Digest::parse(&leaf_digest)
        .ok()
        .and_then(|digest| LeafRef::new(&leaf_id, digest).ok());
    match leaf {
        Some(leaf) => Ended::Completed {
            result,
            leaf,
            artifact: None,
            budget,
        },
        None => failed(format!(
            "the worker committed a malformed transcript leaf {leaf_id:?} ({leaf_digest:?})"
        )),
    }
}

/// The worker's `run_settled budget_exhausted`: a completion with the budget it names; one
/// that names none cannot be recorded as one and fails.
pub(super) fn exhausted(
    active: &mut ActiveRun,
    result: Option<String>,
    budget: Option<&p::BudgetReached>,
) -> Ended {
    match budget {
        Some(budget) => completed(
            active,
            result.unwrap_or_default(),
            Some(BudgetReached::from(budget)),
        ),
        None => Ended::Failed {
            code: ErrorCode::Internal,
            message: "the worker reported an exhausted budget without naming it".to_owned(),
            partial: result,
            artifact: None,
        },
    }
}

/// What a run used, from the worker's `run_settled`; only a completed run's final answer
/// is kept cut.
pub(super) fn run_usage(
    usage: &p::RunUsage,
    status: RunSettledStatus,
    cut: Option<&p::RunCut>,
) -> RunUsage {
    RunUsage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        turns: usage.turns,
        source: match usage.source {
            p::UsageSource::Reported => UsageSource::Reported,
            p::UsageSource::Estimated => UsageSource::Estimated,
        },
        cut_max_output_tokens: cut
            .filter(|_| status == RunSettledStatus::Completed)
            .map(|cut| match cut.limit {
                p::RunCutLimit::MaxOutputTokens => cut.value.get(),
            }),
        context_tokens: usage.context_tokens,
    }
}

/// The worker's `run_settled failed`, with its error (or the lack of one).
pub(super) fn failed(result: Option<String>, error: Option<&p::ErrorBody>) -> Ended {
    let (code, message) = match error {
        Some(body) => (ErrorCode::from(body.code), body.message.to_string()),
        None => (
            ErrorCode::Internal,
            "the worker reported a failure without a reason".to_owned(),
        ),
    };
    Ended::Failed {
        code,
        message,
        partial: result,
        artifact: None,
    }
}
