//! One child as `watch` shows it: what the store says about it, reduced to what a person
//! supervising it reads at a glance.

use serde_json::Value;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{ChildRow, RunRow};

use super::format;

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
    fn of_wire(usage: &Value) -> Option<Usage> {
        Some(Usage {
            turns: usage["turns"].as_u64()?,
            input: usage["inputTokens"].as_u64()?,
            output: usage["outputTokens"].as_u64()?,
            estimated: usage["source"] == "estimated",
        })
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
}

impl ChildLine {
    /// A line from the child's row, its runs, its `ChildSummary` document (the state and
    /// phase the broker reports) and its newest events as wire `ChildEvent`s, oldest first.
    pub fn build(row: &ChildRow, runs: &[RunRow], summary: &Value, tail: &[Value]) -> ChildLine {
        let text = |key: &str, default: &str| summary[key].as_str().unwrap_or(default).to_owned();
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
        let activity = summary["lastProgressAt"]
            .as_str()
            .or_else(|| summary["updatedAt"].as_str())
            .and_then(format::epoch_ms);
        ChildLine {
            id: row.child_id.to_string(),
            scope: row.scope.clone(),
            template: text("templateId", &row.template_id),
            state: text("state", "?"),
            phase: text("phase", "?"),
            model: row.model.model.clone(),
            model_url: row.model.url.clone(),
            api: row.model.api.to_string(),
            tool: active.as_deref().and_then(|run| current_tool(tail, run)),
            active_run: active,
            run_started_ms: active_row.and_then(started),
            queued: summary["queuedRunCount"].as_u64().unwrap_or(0),
            last_run: last_terminal.map(|r| (r.run_id.to_string(), r.status.as_str().to_owned())),
            last_usage: Usage::of_wire(&summary["lastRunUsage"]),
            last_run_ms,
            last_event: tail.last().map(last_event),
            activity_ms: activity,
            owner_token: row.owner_token.clone(),
            next_event_seq: row.next_event_seq.get(),
            updated_at: row.updated_at.to_string(),
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
pub fn current_tool(events: &[Value], run: &str) -> Option<String> {
    let mut current: Option<String> = None;
    for event in events.iter().filter(|e| e["runId"] == run) {
        match (event["type"].as_str(), event["state"].as_str()) {
            (Some("tool"), Some("started")) => current = event["name"].as_str().map(str::to_owned),
            (Some("tool"), _) if event["name"].as_str() == current.as_deref() => current = None,
            (Some("completed" | "failed" | "interrupted" | "stop_confirmed"), _) => current = None,
            _ => {}
        }
    }
    current
}

/// An event as `type` plus the words that say what happened.
pub fn last_event(event: &Value) -> LastEvent {
    let s = |key: &str| event[key].as_str().unwrap_or("");
    let kind = s("type");
    let detail = match kind {
        "tool" => format!("{} {}", s("name"), s("state")),
        "text" => format!(
            "“{}”",
            s("text").split_whitespace().collect::<Vec<_>>().join(" ")
        ),
        "failed" => s("code").to_owned(),
        "interrupted" => s("reason").to_owned(),
        "run_queued" => format!("position {}", event["position"]),
        "stop_requested" => format!("cleared {}", event["clearedQueued"]),
        "stop_confirmed" => format!("reaped {}", event["reaped"]),
        "budget_exhausted" => event["budgetReached"]["budget"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        _ => String::new(),
    };
    let text = match (kind, detail.is_empty()) {
        ("tool", _) => detail,
        (_, true) => kind.to_owned(),
        (_, false) => format!("{kind} {detail}"),
    };
    LastEvent {
        seq: event["seq"].as_u64().unwrap_or(0),
        at: s("at").to_owned(),
        text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(run: &str, name: &str, state: &str) -> Value {
        json!({"type": "tool", "runId": run, "name": name, "state": state, "seq": 1, "at": "x"})
    }

    #[test]
    fn the_current_tool_is_the_one_started_and_not_finished() {
        let events = [tool("r1", "read", "started")];
        assert_eq!(current_tool(&events, "r1").as_deref(), Some("read"));
        let events = [
            tool("r1", "read", "started"),
            tool("r1", "read", "finished"),
        ];
        assert_eq!(current_tool(&events, "r1"), None);
        let events = [
            tool("r1", "read", "started"),
            tool("r1", "read", "failed"),
            tool("r1", "bash", "started"),
        ];
        assert_eq!(current_tool(&events, "r1").as_deref(), Some("bash"));
        // Another run's tool is not this run's.
        assert_eq!(current_tool(&[tool("r0", "grep", "started")], "r1"), None);
    }

    #[test]
    fn the_last_event_says_what_happened_in_a_few_words() {
        assert_eq!(
            last_event(&tool("r1", "read", "started")).text,
            "read started"
        );
        let text = json!({"type": "text", "text": "Reading\nthe README", "seq": 4});
        assert_eq!(last_event(&text).text, "text “Reading the README”");
        let failed = json!({"type": "failed", "code": "model_error", "seq": 9});
        assert_eq!(last_event(&failed).text, "failed model_error");
        assert_eq!(
            last_event(&json!({"type": "run_started"})).text,
            "run_started"
        );
    }
}
