//! Building the snapshot and summary documents from stored rows.

use serde_json::{Value, json};
use subzero_core::{ChildId, ChildState, RunId, RunStatus};

use crate::store::{ChildRow, EventGap, EventPage, EventRow, Ownership, Phase, RunRow};

/// The child's liveness phase as shown to callers.
fn phase(row: &ChildRow) -> &'static str {
    if row.ownership == Ownership::RecoveryRequired {
        return Phase::RecoveryRequired.as_str();
    }
    if row.state != ChildState::Running {
        return Phase::Idle.as_str();
    }
    row.phase.as_str()
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

/// `lastRun`, with its preview cut to `preview_limit` bytes on a character boundary.
fn last_run(runs: &[RunRow], preview_limit: usize) -> Value {
    let Some(run) = last_terminal(runs) else {
        return Value::Null;
    };
    let stored = run.preview.as_deref().unwrap_or_default();
    let cut = stored.floor_char_boundary(preview_limit);
    let mut last = json!({
        "runId": run.run_id.to_string(),
        "status": run.status.as_str(),
        "preview": &stored[..cut],
        "previewTruncated": run.preview_truncated || cut < stored.len(),
    });
    if let Some(artifact) = run.artifact_id {
        last["artifactId"] = json!(artifact.to_string());
    }
    let error = match (run.status, &run.error_code, &run.error_message, &run.reason) {
        (_, Some(code), message, _) => Some(json!({
            "code": code,
            "message": bounded(message.as_deref().unwrap_or("the run failed")),
        })),
        (RunStatus::Interrupted, None, _, reason) => Some(json!({
            "code": "interrupted",
            "message": bounded(&format!(
                "the run was interrupted ({}); nothing was retried — call subzero_resume to continue",
                reason.as_deref().unwrap_or("reason unknown")
            )),
        })),
        _ => None,
    };
    if let Some(error) = error {
        last["error"] = error;
    }
    last
}

fn bounded(message: &str) -> &str {
    &message[..message.floor_char_boundary(4000)]
}

/// The `subzero_get` document, minus `waited`.
pub fn snapshot(row: &ChildRow, runs: &[RunRow], page: &EventPage, preview_limit: usize) -> Value {
    let events: Vec<Value> = page.events.iter().map(super::events::to_wire).collect();
    json!({
        "childId": row.child_id.to_string(),
        "templateId": row.template_id,
        "workspaceRoot": row.scope.root().to_string_lossy(),
        "state": row.state.as_str(),
        "phase": phase(row),
        "lastProgressAt": row.last_progress_at,
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
        "model": {"url": row.model.url, "model": row.model.model, "api": row.model.api},
        "activeRunId": row.active_run_id.map(|r| r.to_string()),
        "queuedRuns": queued(runs).iter().map(ToString::to_string).collect::<Vec<_>>(),
        "lastRun": last_run(runs, preview_limit),
        "events": events,
        "nextCursor": page.next_cursor.get(),
        "oldestCursor": page.oldest_cursor.get(),
        "gap": page.gap.map(|g| json!({"requested": g.requested.get(), "oldest": g.oldest.get()})),
    })
}

/// One `subzero_list` item.
pub fn summary(row: &ChildRow, runs: &[RunRow]) -> Value {
    json!({
        "childId": row.child_id.to_string(),
        "templateId": row.template_id,
        "workspaceRoot": row.scope.root().to_string_lossy(),
        "state": row.state.as_str(),
        "phase": phase(row),
        "activeRunId": row.active_run_id.map(|r| r.to_string()),
        "queuedRunCount": queued(runs).len(),
        "lastRunStatus": last_terminal(runs).map(|r| r.status.as_str()),
        "lastProgressAt": row.last_progress_at,
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
    })
}

/// One stored event in its wire (`ChildEvent`) form, for readers outside the broker
/// (`subzero logs`).
pub fn wire_event(row: &EventRow) -> Value {
    super::events::to_wire(row)
}

/// The wire `gap` event for a pruned stretch, placed at `at` (default: now).
pub fn gap_event(child: ChildId, gap: EventGap, at: Option<&str>) -> Value {
    match at {
        Some(at) => super::events::gap_marker(child, gap, at),
        None => super::events::gap_marker(child, gap, &super::events::timestamp_now()),
    }
}
