//! One child as `watch` shows it: what the store says about it, reduced to what a person
//! supervising it reads at a glance.

use subzero_core::CheckoutState;
use subzero_protocol::{self as p, ChildEvent, ChildSummary};
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{ChildRow, RunRow};

use super::format;
use crate::inspect::document::Read;

/// Turns and tokens of one run, as the worker reported them when it settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Model turns.
    pub turns: u64,
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Estimated from bytes (some response reported no usage).
    pub estimated: bool,
}

impl Usage {
    fn of_wire(usage: &p::RunUsage) -> Usage {
        Usage {
            turns: usage.turns,
            input: usage.input_tokens,
            output: usage.output_tokens,
            estimated: usage.source == p::UsageSource::Estimated,
        }
    }
}

/// The newest event, as a short line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastEvent {
    /// Its sequence number.
    pub seq: u64,
    /// When it was recorded (wire timestamp).
    pub at: String,
    /// `type` and the few words that say what happened (`tool read started`).
    pub text: String,
}

/// One row of the board.
#[derive(Clone, Debug)]
pub struct ChildLine {
    /// `ch_…`.
    pub id: String,
    /// Its workspace.
    pub scope: WorkspaceScope,
    /// Template id.
    pub template: String,
    /// What the parent calls it (empty for a child spawned before labels existed).
    pub label: String,
    /// `ready`, `running`, `interrupted`.
    pub state: String,
    /// `idle`, `starting`, `model`, `tool`, `stopping`, `recovery_required`.
    pub phase: String,
    /// Model name, endpoint and protocol.
    pub model: String,
    pub model_url: String,
    pub api: String,
    /// The active run and when it started (epoch ms).
    pub active_run: Option<String>,
    pub run_started_ms: Option<i64>,
    /// Follow-ups waiting behind the active run.
    pub queued: u64,
    /// The most recent terminal run: id, status, usage, how long it took.
    pub last_run: Option<(String, String)>,
    pub last_usage: Option<Usage>,
    pub last_run_ms: Option<i64>,
    /// The tool the active run is in (started, not finished, in the events read).
    pub tool: Option<String>,
    /// The newest event.
    pub last_event: Option<LastEvent>,
    /// When it last did something (epoch ms): progress, else its last change.
    pub activity_ms: Option<i64>,
    /// The broker that owns it, if any (its liveness lock names it).
    pub owner_token: Option<String>,
    /// `next_event_seq` of the row the line was built from: a new event changes it.
    pub next_event_seq: u64,
    /// `updated_at` of the row the line was built from.
    pub updated_at: String,
    /// An isolated child's change in words, and its checkout's state (`None`: shared).
    pub change: Option<(String, CheckoutState)>,
}

impl ChildLine {
    /// A line from the child's row, its runs, its `ChildSummary` document (the state and
    /// phase the broker reports; `?` when the contract refuses it) and its newest events as
    /// wire `ChildEvent`s, oldest first.
    pub fn build(
        row: &ChildRow,
        runs: &[RunRow],
        summary: &Read<ChildSummary>,
        tail: &[Read<ChildEvent>],
    ) -> ChildLine {
        let summary = summary.as_ref().ok();
        let text = |of: fn(&ChildSummary) -> String, default: &str| {
            summary.map_or_else(|| default.to_owned(), of)
        };
        let active = row.active_run_id.map(|r| r.to_string());
        let started = |run: &RunRow| {
            run.started_at
                .as_deref()
                .and_then(|at| format::epoch_ms(at))
        };
        let active_row = row
            .active_run_id
            .and_then(|id| runs.iter().find(|r| r.run_id == id));
        let last_terminal = runs
            .iter()
            .filter(|r| r.status.is_terminal())
            .max_by_key(|r| r.ordinal);
        let last_run_ms = last_terminal.and_then(|r| {
            let end = r.ended_at.as_deref().and_then(|at| format::epoch_ms(at))?;
            Some(end - started(r)?)
        });
        let activity = summary
            .and_then(|s| s.last_progress_at.as_ref().or(s.updated_at.as_ref()))
            .and_then(|at| format::epoch_ms(at));
        ChildLine {
            id: row.child_id.to_string(),
            scope: row.scope.clone(),
            template: text(|s| s.template_id.as_str().to_owned(), &row.template_id),
            label: row.label.clone().unwrap_or_default(),
            state: text(|s| s.state.to_string(), "?"),
            phase: text(|s| s.phase.unwrap_or(p::Phase::Idle).to_string(), "?"),
            model: row.model.model.clone(),
            model_url: row.model.url.clone(),
            api: row.model.api.to_string(),
            tool: active.as_deref().and_then(|run| current_tool(tail, run)),
            active_run: active,
            run_started_ms: active_row.and_then(started),
            queued: summary.and_then(|s| s.queued_run_count).unwrap_or(0),
            last_run: last_terminal.map(|r| (r.run_id.to_string(), r.status.as_str().to_owned())),
            last_usage: summary
                .and_then(|s| s.last_run_usage.as_ref())
                .map(Usage::of_wire),
            last_run_ms,
            last_event: tail.last().map(|e| last_event(e.as_ref().ok())),
            activity_ms: activity,
            owner_token: row.owner_token.clone(),
            next_event_seq: row.next_event_seq.get(),
            updated_at: row.updated_at.to_string(),
            change: None,
        }
    }

    /// Whether a run is active (running or being stopped).
    pub fn is_running(&self) -> bool {
        self.active_run.is_some()
    }

    /// The order of the board: running first, then interrupted, then ready; the most
    /// recently active first within each; then by id, so the order is stable.
    pub fn sort_key(&self) -> (u8, i64, String) {
        let rank = match (self.is_running(), self.state.as_str()) {
            (true, _) => 0,
            (false, "interrupted") => 1,
            _ => 2,
        };
        (rank, -self.activity_ms.unwrap_or(0), self.id.clone())
    }

    /// How long the active run has been going, else how long the last run took.
    pub fn elapsed_ms(&self, now_ms: i64) -> Option<i64> {
        match (self.is_running(), self.run_started_ms) {
            (true, Some(start)) => Some(now_ms - start),
            (true, None) => None,
            (false, _) => self.last_run_ms,
        }
    }
}

/// The tool `run` started last and has not finished, in `events` (oldest first).
pub fn current_tool(events: &[Read<ChildEvent>], run: &str) -> Option<String> {
    let mut current: Option<String> = None;
    let of_run = events
        .iter()
        .filter_map(|e| e.as_ref().ok())
        .filter(|e| e.run_id().is_some_and(|r| r.as_str() == run));
    for event in of_run {
        match event {
            ChildEvent::Tool {
                name,
                state: p::ToolState::Started,
                ..
            } => current = Some(name.as_str().to_owned()),
            ChildEvent::Tool { name, .. } if current.as_deref() == Some(name.as_str()) => {
                current = None;
            }
            ChildEvent::Completed { .. }
            | ChildEvent::Failed { .. }
            | ChildEvent::Interrupted { .. }
            | ChildEvent::StopConfirmed { .. } => current = None,
            _ => {}
        }
    }
    current
}

/// An event as `type` plus the words that say what happened; one the contract refuses
/// (`None`) as nothing.
pub fn last_event(event: Option<&ChildEvent>) -> LastEvent {
    let Some(event) = event else {
        return LastEvent {
            seq: 0,
            at: String::new(),
            text: String::new(),
        };
    };
    let kind = event.kind();
    let detail = match event {
        ChildEvent::Tool { name, state, .. } => format!("{} {state}", name.as_str()),
        ChildEvent::NetworkRefused { host, port, .. } => format!("{}:{port}", host.as_str()),
        ChildEvent::Text { text, .. } => format!(
            "“{}”",
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        ),
        ChildEvent::Failed { code, .. } => code.to_string(),
        ChildEvent::Interrupted { reason, .. } => reason.as_str().to_owned(),
        ChildEvent::RunQueued { position, .. } => format!("position {position}"),
        ChildEvent::StopRequested { cleared_queued, .. } => format!("cleared {cleared_queued}"),
        ChildEvent::StopConfirmed { reaped, .. } => format!("reaped {reaped}"),
        ChildEvent::BudgetExhausted { budget_reached, .. } => budget_reached.budget.to_string(),
        _ => String::new(),
    };
    let text = match (kind, detail.is_empty()) {
        ("tool", _) => detail,
        (_, true) => kind.to_owned(),
        (_, false) => format!("{kind} {detail}"),
    };
    LastEvent {
        seq: event.seq(),
        at: event
            .at()
            .map_or_else(String::new, |at| at.as_str().to_owned()),
        text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const R0: &str = "run_01JH8Z6Q2V3W4X5Y6Z7A8B9C00";
    const R1: &str = "run_01JH8Z6Q2V3W4X5Y6Z7A8B9C01";

    /// A wire event of `fields`, with the child, time and sequence number filled in.
    fn event(fields: Value) -> ChildEvent {
        let mut event = json!({"childId": "ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D",
            "at": "2026-11-29T20:05:36.123Z", "seq": 1});
        event
            .as_object_mut()
            .expect("an object")
            .extend(fields.as_object().expect("an object").clone());
        serde_json::from_value(event).expect("a wire event")
    }

    fn tool(run: &str, name: &str, state: &str) -> Read<ChildEvent> {
        Ok(event(
            json!({"type": "tool", "runId": run, "name": name, "state": state}),
        ))
    }

    #[test]
    fn the_current_tool_is_the_one_started_and_not_finished() {
        let events = [tool(R1, "read", "started")];
        assert_eq!(current_tool(&events, R1).as_deref(), Some("read"));
        let events = [tool(R1, "read", "started"), tool(R1, "read", "finished")];
        assert_eq!(current_tool(&events, R1), None);
        let events = [
            tool(R1, "read", "started"),
            tool(R1, "read", "failed"),
            tool(R1, "bash", "started"),
        ];
        assert_eq!(current_tool(&events, R1).as_deref(), Some("bash"));
        // Another run's tool is not this run's.
        assert_eq!(current_tool(&[tool(R0, "grep", "started")], R1), None);
    }

    #[test]
    fn the_last_event_says_what_happened_in_a_few_words() {
        let started = tool(R1, "read", "started");
        assert_eq!(last_event(started.as_ref().ok()).text, "read started");
        let text = event(
            json!({"type": "text", "runId": R1, "text": "Reading\nthe README",
            "truncated": false}),
        );
        assert_eq!(last_event(Some(&text)).text, "text “Reading the README”");
        let failed = event(
            json!({"type": "failed", "runId": R1, "code": "model_request_failed",
            "message": "the endpoint refused"}),
        );
        assert_eq!(
            last_event(Some(&failed)).text,
            "failed model_request_failed"
        );
        let started = event(json!({"type": "run_started", "runId": R1}));
        assert_eq!(last_event(Some(&started)).text, "run_started");
    }
}
