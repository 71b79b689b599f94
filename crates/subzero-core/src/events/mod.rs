//! Child events: what happened, typed from the worker's report to the wire.
//!
//! [`EventBody`] is the one event type: the runtime builds one for every event it
//! records (a worker's text and tool activity, a lifecycle transition), the store keeps
//! it through serde ([`StoredEvent`]: its kind and run in columns of their own, the rest
//! as the payload object), and the broker turns a stored one into the wire `ChildEvent`
//! of the same type. The payload is also what the limits measure: at most
//! `event_payload_bytes` bytes ([`EventBody::payload_bytes`]), counted against byte
//! retention.
//!
//! `log`: the per-child log rules — sequence numbers, retention, reads from a cursor and
//! their explicit gaps — used by [`EventLog`] and by the store alike.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::budget::BudgetReached;
use crate::error_code::{Coded, ErrorCode};
use crate::ids::{ArtifactId, RunId};

mod log;

pub use log::{
    CursorAhead, Event, EventLog, EventLogCorrupt, EventPage, Gap, Retention, Window, cursor_before,
};

/// The state of a tool call, by name only (never arguments).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolState {
    /// The call began.
    Started,
    /// The call returned.
    Finished,
    /// The call failed.
    Failed,
}

/// Why a steer was not applied.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SteerDiscardReason {
    /// The run was stopped first.
    Stopped,
    /// The run failed first.
    Failed,
    /// A limit ended the run first.
    Limit,
    /// The worker was lost.
    Interrupted,
    /// The steer arrived after the run it named had given its final answer.
    NotActive,
}

/// What happened. Mirrors the wire `ChildEvent` types without `seq`/`at`/`childId`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum EventBody {
    /// A follow-up waits behind the active run.
    RunQueued {
        /// The queued run.
        run_id: RunId,
        /// Its 1-based queue position.
        position: u32,
    },
    /// A run started.
    RunStarted {
        /// The run.
        run_id: RunId,
    },
    /// Coalesced text preview (never one event per token).
    Text {
        /// The run.
        run_id: RunId,
        /// The coalesced text.
        text: String,
        /// Whether the preview was cut.
        truncated: bool,
    },
    /// Tool activity, by name only.
    Tool {
        /// The run.
        run_id: RunId,
        /// The tool's name.
        name: String,
        /// What happened.
        state: ToolState,
    },
    /// The allowlist proxy refused a tool's connection: the host and port it asked for,
    /// never more of the URL.
    NetworkRefused {
        /// The run.
        run_id: RunId,
        /// The host the tool asked for.
        host: String,
        /// The port it asked for.
        port: u16,
    },
    /// A steer reached the model between turns.
    SteerApplied {
        /// The steered run.
        run_id: RunId,
        /// The steer's id.
        steer_id: String,
        /// The caller's idempotency key, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// A steer never reached the model.
    SteerDiscarded {
        /// The run.
        run_id: RunId,
        /// The steer's id.
        steer_id: String,
        /// The caller's idempotency key, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// Why.
        reason: SteerDiscardReason,
    },
    /// The worker compacted the child's transcript into a new branch (the core decided it
    /// from the worker's report, [`crate::lifecycle::CompactionReported`]).
    Compacted {
        /// The run that compacted.
        run_id: RunId,
        /// Prompt tokens before.
        tokens_before: u64,
        /// Prompt tokens after.
        tokens_after: u64,
        /// The last entry of the branch left behind (kept whole).
        branch_from: String,
    },
    /// A matching stop was accepted.
    StopRequested {
        /// The stopping run.
        run_id: RunId,
        /// Queued follow-ups the stop cleared.
        cleared_queued: u32,
    },
    /// The worker confirmed the stop and its tree exited.
    StopConfirmed {
        /// The stopped run.
        run_id: RunId,
        /// Tool processes killed.
        reaped: u32,
    },
    /// A run completed.
    Completed {
        /// The run.
        run_id: RunId,
        /// The full result.
        artifact_id: ArtifactId,
        /// A bounded preview.
        preview: String,
        /// Whether the preview was cut.
        preview_truncated: bool,
    },
    /// A run reached a budget; its result is the child's handoff summary.
    BudgetExhausted {
        /// The run.
        run_id: RunId,
        /// The full result (the handoff summary).
        artifact_id: ArtifactId,
        /// A bounded preview.
        preview: String,
        /// Whether the preview was cut.
        preview_truncated: bool,
        /// The budget it reached.
        budget_reached: BudgetReached,
    },
    /// A run failed.
    Failed {
        /// The run.
        run_id: RunId,
        /// The stable code.
        code: ErrorCode,
        /// A bounded message.
        message: String,
    },
    /// Execution ended without a confirmed result.
    Interrupted {
        /// The run that was active, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<RunId>,
        /// Why.
        reason: String,
    },
}

/// The type of an event (`type` on the wire and in the store).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// [`EventBody::RunQueued`].
    RunQueued,
    /// [`EventBody::RunStarted`].
    RunStarted,
    /// [`EventBody::Text`].
    Text,
    /// [`EventBody::Tool`].
    Tool,
    /// [`EventBody::NetworkRefused`].
    NetworkRefused,
    /// [`EventBody::SteerApplied`].
    SteerApplied,
    /// [`EventBody::SteerDiscarded`].
    SteerDiscarded,
    /// [`EventBody::Compacted`].
    Compacted,
    /// [`EventBody::StopRequested`].
    StopRequested,
    /// [`EventBody::StopConfirmed`].
    StopConfirmed,
    /// [`EventBody::Completed`].
    Completed,
    /// [`EventBody::BudgetExhausted`].
    BudgetExhausted,
    /// [`EventBody::Failed`].
    Failed,
    /// [`EventBody::Interrupted`].
    Interrupted,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [EventKind] = &[
        EventKind::RunQueued,
        EventKind::RunStarted,
        EventKind::Text,
        EventKind::Tool,
        EventKind::NetworkRefused,
        EventKind::SteerApplied,
        EventKind::SteerDiscarded,
        EventKind::Compacted,
        EventKind::StopRequested,
        EventKind::StopConfirmed,
        EventKind::Completed,
        EventKind::BudgetExhausted,
        EventKind::Failed,
        EventKind::Interrupted,
    ];

    /// The stored and wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::RunQueued => "run_queued",
            EventKind::RunStarted => "run_started",
            EventKind::Text => "text",
            EventKind::Tool => "tool",
            EventKind::NetworkRefused => "network_refused",
            EventKind::SteerApplied => "steer_applied",
            EventKind::SteerDiscarded => "steer_discarded",
            EventKind::Compacted => "compacted",
            EventKind::StopRequested => "stop_requested",
            EventKind::StopConfirmed => "stop_confirmed",
            EventKind::Completed => "completed",
            EventKind::BudgetExhausted => "budget_exhausted",
            EventKind::Failed => "failed",
            EventKind::Interrupted => "interrupted",
        }
    }

    /// Parse the stored and wire spelling.
    pub fn parse(text: &str) -> Option<EventKind> {
        EventKind::ALL.iter().copied().find(|k| k.as_str() == text)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event body as the store keeps it: its kind and run, which have columns of their
/// own, and the rest of its fields as one JSON object, the payload.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StoredEvent {
    /// The event's type.
    pub kind: EventKind,
    /// The run it belongs to, if any.
    pub run: Option<RunId>,
    /// The other fields, as JSON object text.
    pub payload: String,
}

/// A stored event that is not an event of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("internal: a stored {kind} event does not hold one: {reason}")]
pub struct EventPayloadError {
    /// The stored kind.
    pub kind: EventKind,
    /// What is wrong.
    pub reason: String,
}

impl Coded for EventPayloadError {
    fn code(&self) -> ErrorCode {
        ErrorCode::Internal
    }
}

/// The envelope fields a stored event keeps in columns of their own.
const TYPE: &str = "type";
const RUN_ID: &str = "runId";

impl EventBody {
    /// The event's type.
    pub fn kind(&self) -> EventKind {
        match self {
            EventBody::RunQueued { .. } => EventKind::RunQueued,
            EventBody::RunStarted { .. } => EventKind::RunStarted,
            EventBody::Text { .. } => EventKind::Text,
            EventBody::Tool { .. } => EventKind::Tool,
            EventBody::NetworkRefused { .. } => EventKind::NetworkRefused,
            EventBody::SteerApplied { .. } => EventKind::SteerApplied,
            EventBody::SteerDiscarded { .. } => EventKind::SteerDiscarded,
            EventBody::Compacted { .. } => EventKind::Compacted,
            EventBody::StopRequested { .. } => EventKind::StopRequested,
            EventBody::StopConfirmed { .. } => EventKind::StopConfirmed,
            EventBody::Completed { .. } => EventKind::Completed,
            EventBody::BudgetExhausted { .. } => EventKind::BudgetExhausted,
            EventBody::Failed { .. } => EventKind::Failed,
            EventBody::Interrupted { .. } => EventKind::Interrupted,
        }
    }

    /// The run the event belongs to, if any.
    pub fn run_id(&self) -> Option<RunId> {
        match self {
            EventBody::RunQueued { run_id, .. }
            | EventBody::RunStarted { run_id }
            | EventBody::Text { run_id, .. }
            | EventBody::Tool { run_id, .. }
            | EventBody::NetworkRefused { run_id, .. }
            | EventBody::SteerApplied { run_id, .. }
            | EventBody::SteerDiscarded { run_id, .. }
            | EventBody::Compacted { run_id, .. }
            | EventBody::StopRequested { run_id, .. }
            | EventBody::StopConfirmed { run_id, .. }
            | EventBody::Completed { run_id, .. }
            | EventBody::BudgetExhausted { run_id, .. }
            | EventBody::Failed { run_id, .. } => Some(*run_id),
            EventBody::Interrupted { run_id, .. } => *run_id,
        }
    }

    /// The body as the store keeps it (see [`StoredEvent`]).
    pub fn to_stored(&self) -> StoredEvent {
        let mut fields = match serde_json::to_value(self) {
            Ok(Value::Object(fields)) => fields,
            // A tagged enum of plain fields always serializes to an object.
            Ok(_) | Err(_) => Map::new(),
        };
        fields.remove(TYPE);
        fields.remove(RUN_ID);
        StoredEvent {
            kind: self.kind(),
            run: self.run_id(),
            payload: Value::Object(fields).to_string(),
        }
    }

    /// The body a [`StoredEvent`] holds.
    pub fn from_stored(stored: &StoredEvent) -> Result<EventBody, EventPayloadError> {
        let refused = |reason: String| EventPayloadError {
            kind: stored.kind,
            reason,
        };
        let mut fields = match serde_json::from_str::<Value>(&stored.payload) {
            Ok(Value::Object(fields)) => fields,
            Ok(_) => return Err(refused("the payload is not a JSON object".to_owned())),
            Err(e) => return Err(refused(format!("the payload is not JSON: {e}"))),
        };
        fields.insert(TYPE.to_owned(), Value::from(stored.kind.as_str()));
        if let Some(run) = stored.run {
            fields.insert(RUN_ID.to_owned(), Value::from(run.to_string()));
        }
        serde_json::from_value(Value::Object(fields)).map_err(|e| refused(e.to_string()))
    }

    /// Bytes of the stored payload: the measure of the `event_payload_bytes` limit and of
    /// byte retention.
    pub fn payload_bytes(&self) -> usize {
        self.to_stored().payload.len()
    }
}

#[cfg(test)]
mod tests;
