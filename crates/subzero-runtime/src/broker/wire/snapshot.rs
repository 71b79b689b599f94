//! Building the snapshot and summary documents from stored rows.

use subzero_core::{ChildId, ChildState, RunId, RunStatus};
use subzero_protocol as p;

use super::{broken, wire};
use crate::broker::BrokerError;
use crate::store::{
    ChildRow, EventGap, EventPage, EventRow, Ownership, Phase, RunRow, UsageSource,
};

/// The documents built here, as error messages name them.
const GET: &str = "get result";
const LIST: &str = "list result";

/// The child's liveness phase as shown to callers.
fn phase(row: &ChildRow) -> Phase {
    if row.ownership == Ownership::RecoveryRequired {
        return Phase::RecoveryRequired;
    }
    if row.state != ChildState::Running {
        return Phase::Idle;
    }
    row.phase
}

/// The most recent run that reached a terminal status after it started. Runs withdrawn
/// from the queue (stopped or interrupted before they ever started) are not "the last
/// run": they would hide the result or error of the run that actually worked. Only when
/// no run ever started does a withdrawn one count.
fn last_terminal(runs: &[RunRow]) -> Option<&RunRow> {
    let ended = || runs.iter().filter(|r| r.status.is_terminal());
    ended()
        .filter(|r| r.started_at.is_some())
        .max_by_key(|r| r.ordinal)
        .or_else(|| ended().max_by_key(|r| r.ordinal))
}

fn queued(runs: &[RunRow]) -> Vec<RunId> {
    let mut queued: Vec<&RunRow> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Queued)
        .collect();
    queued.sort_by_key(|r| r.ordinal);
    queued.into_iter().map(|r| r.run_id).collect()
}

fn terminal(run: &RunRow, what: &str, field: &str) -> Result<p::TerminalRunStatus, BrokerError> {
    p::TerminalRunStatus::try_from(run.status).map_err(|e| broken(what, field, e))
}

/// `lastRun`, with its preview cut to `preview_limit` bytes on a character boundary.
fn last_run(runs: &[RunRow], preview_limit: usize) -> Result<Option<p::LastRun>, BrokerError> {
    let Some(run) = last_terminal(runs) else {
        return Ok(None);
    };
    settled_run(run, preview_limit).map(Some)
}

/// A terminal run as `lastRun` shows it (and a task's result), its preview cut to
/// `preview_limit` bytes on a character boundary.
pub fn settled_run(run: &RunRow, preview_limit: usize) -> Result<p::LastRun, BrokerError> {
    let stored = run.preview.as_deref().unwrap_or_default();
    let cut = stored.floor_char_boundary(preview_limit);
    Ok(p::LastRun {
        artifact_id: run.artifact_id.map(Into::into),
        error: last_error(run)?,
        preview: wire(&stored[..cut], GET, "lastRun.preview")?,
        preview_truncated: run.preview_truncated || cut < stored.len(),
        run_id: run.run_id.into(),
        status: terminal(run, GET, "lastRun.status")?,
        usage: usage(run),
        budget_reached: run.budget.as_ref().map(Into::into),
        cut: output_cut(run),
    })
}

/// What a run used, as the wire shows it.
fn usage(run: &RunRow) -> p::RunUsage {
    p::RunUsage {
        input_tokens: run.usage.input_tokens,
        output_tokens: run.usage.output_tokens,
        source: match run.usage.source {
            UsageSource::Reported => p::UsageSource::Reported,
            UsageSource::Estimated => p::UsageSource::Estimated,
        },
        turns: run.usage.turns,
        context_tokens: run.usage.context_tokens,
    }
}

/// `contextTokens` of a child: its last ended run's context use.
fn context_tokens(runs: &[RunRow]) -> Option<u64> {
    last_terminal(runs).and_then(|run| run.usage.context_tokens)
}

/// `contextWindow` of a child: the window its model was given, when known.
fn context_window(row: &ChildRow) -> Option<p::ContextWindow> {
    row.model
        .context_window
        .map(|w| p::ContextWindow::from(i64::from(w)))
}

/// `lastRun.cut`: the output-token cap that cut a completed run's final answer.
fn output_cut(run: &RunRow) -> Option<p::RunCut> {
    let value = run
        .usage
        .cut_max_output_tokens
        .and_then(std::num::NonZeroU64::new)?;
    (run.status == RunStatus::Completed).then_some(p::RunCut {
        limit: p::RunCutLimit::MaxOutputTokens,
        value,
    })
}

/// `lastRun.error`: the recorded failure, or why an interrupted run ended.
fn last_error(run: &RunRow) -> Result<Option<p::ErrorBody>, BrokerError> {
    let (code, message) = match (run.status, &run.error_code, &run.error_message, &run.reason) {
        (_, Some(code), message, _) => (
            p::ErrorCode::from(*code),
            message.as_deref().unwrap_or("the run failed").to_owned(),
        ),
        (RunStatus::Interrupted, None, _, reason) => (
            p::ErrorCode::Interrupted,
            format!(
                "the run was interrupted ({}); nothing was retried — call subzero_resume to continue",
                reason.as_deref().unwrap_or("reason unknown")
            ),
        ),
        _ => return Ok(None),
    };
    Ok(Some(p::ErrorBody {
        code,
        details: run.error_details.clone().unwrap_or_default(),
        message: wire(bounded(&message), GET, "lastRun.error.message")?,
    }))
}

fn bounded(message: &str) -> &str {
    &message[..message.floor_char_boundary(4000)]
}

fn workspace_root(row: &ChildRow, what: &str) -> Result<p::WorkspaceRoot, BrokerError> {
    wire(
        row.scope.root().to_string_lossy().into_owned(),
        what,
        "workspaceRoot",
    )
}

/// The child's label as the wire carries it.
fn label(row: &ChildRow, what: &str) -> Result<Option<p::ChildLabel>, BrokerError> {
    row.label
        .as_deref()
        .map(|label| wire(label, what, "label"))
        .transpose()
}

/// The `subzero_get` document of `row`, its `runs` and one `page` of at most
/// `event_limit` of its events, waited as `waited` says.
pub(in crate::broker) fn snapshot(
    row: &ChildRow,
    runs: &[RunRow],
    page: &EventPage,
    event_limit: usize,
    preview_limit: usize,
    waited: p::Waited,
) -> Result<p::ChildSnapshot, BrokerError> {
    let (events, next_cursor) = events_with_gap(row.child_id, page, event_limit)?;
    Ok(p::ChildSnapshot {
        active_run_id: row.active_run_id.map(Into::into),
        // Filled by the caller from the checkout ledger (`Broker::get`).
        checkout: None,
        child_id: row.child_id.into(),
        // Filled by the caller from the child's live worker (`Broker::get`).
        containment: None,
        label: label(row, GET)?,
        created_at: Some(row.created_at.clone()),
        events: p::ChildSnapshotEvents(events),
        gap: page.gap.map(|g| p::CursorGap {
            oldest: g.oldest.get(),
            requested: g.requested.get(),
        }),
        last_progress_at: row.last_progress_at.clone(),
        last_run: last_run(runs, preview_limit)?,
        context_tokens: context_tokens(runs),
        context_window: context_window(row),
        model: p::ModelInfo {
            api: row.model.api,
            model: wire(row.model.model.as_str(), GET, "model.model")?,
            url: wire(row.model.url.as_str(), GET, "model.url")?,
        },
        next_cursor,
        oldest_cursor: page.oldest_cursor.get(),
        phase: phase(row).into(),
        queued_runs: p::ChildSnapshotQueuedRuns(queued(runs).into_iter().map(Into::into).collect()),
        state: row.state.into(),
        template_id: wire(row.template_id.as_str(), GET, "templateId")?,
        updated_at: Some(row.updated_at.clone()),
        waited,
        workspace_root: workspace_root(row, GET)?,
    })
}

/// The snapshot's events: when the cursor was older than retained history, a `gap`
/// event first (seq = the oldest cursor, the last pruned seq), so a reader of `events`
/// alone sees the loss in-band as a `subscribe` reader does. The marker takes a place of
/// the batch, which stays within `event_limit`; the cursor then ends at the last event
/// returned.
fn events_with_gap(
    child: ChildId,
    page: &EventPage,
    event_limit: usize,
) -> Result<(Vec<p::ChildEvent>, u64), BrokerError> {
    let mut rows: &[EventRow] = &page.events;
    let mut events = Vec::with_capacity(rows.len() + 1);
    let mut next_cursor = page.next_cursor.get();
    if let Some(gap) = page.gap {
        let at = match rows.first() {
            Some(first) => first.at.clone(),
            None => super::events::timestamp_now()?,
        };
        events.push(super::events::gap_marker(child, gap, at)?);
        let room = event_limit.clamp(1, GET_EVENT_LIMIT) - 1;
        if rows.len() > room {
            rows = &rows[..room];
            next_cursor = rows.last().map_or(gap.oldest.get(), |e| e.seq.get());
        }
    }
    for row in rows {
        events.push(p::ChildEvent::try_from(row)?);
    }
    Ok((events, next_cursor))
}

/// Most events one snapshot carries (`ChildSnapshot.events` maxItems, `eventLimit` max).
const GET_EVENT_LIMIT: usize = 50;

/// One `subzero_list` item.
pub(in crate::broker) fn summary(
    row: &ChildRow,
    runs: &[RunRow],
) -> Result<p::ChildSummary, BrokerError> {
    Ok(p::ChildSummary {
        active_run_id: row.active_run_id.map(Into::into),
        child_id: row.child_id.into(),
        created_at: Some(row.created_at.clone()),
        label: label(row, LIST)?,
        last_progress_at: row.last_progress_at.clone(),
        last_run_status: last_terminal(runs)
            .map(|run| terminal(run, LIST, "lastRunStatus"))
            .transpose()?,
        last_run_usage: last_terminal(runs).map(usage),
        context_tokens: context_tokens(runs),
        context_window: context_window(row),
        phase: Some(phase(row).into()),
        queued_run_count: Some(queued(runs).len() as u64),
        state: row.state.into(),
        template_id: wire(row.template_id.as_str(), LIST, "templateId")?,
        updated_at: Some(row.updated_at.clone()),
        workspace_root: Some(workspace_root(row, LIST)?),
    })
}

/// The `subzero_get` document of a child, as an immediate `get` answers it, for readers
/// outside the broker (`subzero show`). A stored value the contract refuses gives the
/// error body `{code, message}` instead, so an inspector still shows what is wrong.
pub fn child_snapshot(
    row: &ChildRow,
    runs: &[RunRow],
    page: &EventPage,
    preview_limit: usize,
) -> Result<p::ChildSnapshot, p::ErrorBody> {
    let waited = p::Waited {
        ms: p::WaitMs(0),
        reason: p::WaitedReason::Immediate,
    };
    snapshot(row, runs, page, GET_EVENT_LIMIT, preview_limit, waited).map_err(|e| e.to_error_body())
}

/// One `subzero_list` item, for readers outside the broker (`subzero ls`); like
/// [`child_snapshot`], a refused stored value gives the error body.
pub fn child_summary(row: &ChildRow, runs: &[RunRow]) -> Result<p::ChildSummary, p::ErrorBody> {
    summary(row, runs).map_err(|e| e.to_error_body())
}

/// One stored event in its wire (`ChildEvent`) form, for readers outside the broker
/// (`subzero logs`).
/// A stored value the contract refuses gives the error body, like [`child_snapshot`].
pub fn wire_event(row: &EventRow) -> Result<p::ChildEvent, p::ErrorBody> {
    p::ChildEvent::try_from(row).map_err(|e| e.to_error_body())
}

/// The wire `gap` event for a pruned stretch, placed at `at` (default: now).
pub fn gap_event(
    child: ChildId,
    gap: EventGap,
    at: Option<&str>,
) -> Result<p::ChildEvent, p::ErrorBody> {
    let at = match at {
        Some(at) => wire(at, "gap event", "at"),
        None => super::events::timestamp_now(),
    };
    at.and_then(|at| super::events::gap_marker(child, gap, at))
        .map_err(|e| e.to_error_body())
}
