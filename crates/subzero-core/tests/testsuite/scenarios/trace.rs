//! The scenario trace format, typed: the fields the replayer reads from a trace, its
//! steps, their inputs and the child records they load. `scenario.schema.json` is the
//! contract; these types hold only what the replayer uses.

use serde::Deserialize;
use serde_json::Value;
use subzero_core::limits::LimitName;

/// One trace file.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Trace {
    pub(super) queue_capacity: Option<u32>,
    pub(super) event_retention: Option<EventRetention>,
    pub(super) steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EventRetention {
    pub(super) max_events: u32,
    pub(super) max_bytes: Option<u64>,
}

/// One operation and what it should do.
#[derive(Deserialize)]
pub(super) struct Step {
    #[serde(flatten)]
    pub(super) op: Op,
    pub(super) expect: Expect,
}

/// `{"ok": {...}}`, compared with `matches`, or `{"error": code}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Expect {
    Ok(Value),
    Error(String),
}

/// A step's operation (`op`) with its `input`.
#[derive(Deserialize)]
#[serde(tag = "op", content = "input", rename_all = "snake_case")]
pub(super) enum Op {
    Spawn(RunPrompt),
    Load { record: ChildRecordSpec },
    Followup(RunPrompt),
    Steer { steering: bool },
    Stop(StopInput),
    ConfirmStop(ConfirmStopInput),
    Complete(CompleteInput),
    Fail(FailInput),
    LoseWorker { reason: String },
    Compacted(CompactedInput),
    Checkpoint(CheckpointInput),
    Resume(ResumeInput),
    EventAppend(EventAppendInput),
    EventRead(EventReadInput),
    FreezeTemplate(FreezeTemplateInput),
    CheckLimit(CheckLimitInput),
}

impl Op {
    /// The `op` as the trace spells it.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Op::Spawn(_) => "spawn",
            Op::Load { .. } => "load",
            Op::Followup(_) => "followup",
            Op::Steer { .. } => "steer",
            Op::Stop(_) => "stop",
            Op::ConfirmStop(_) => "confirm_stop",
            Op::Complete(_) => "complete",
            Op::Fail(_) => "fail",
            Op::LoseWorker { .. } => "lose_worker",
            Op::Compacted(_) => "compacted",
            Op::Checkpoint(_) => "checkpoint",
            Op::Resume(_) => "resume",
            Op::EventAppend(_) => "event_append",
            Op::EventRead(_) => "event_read",
            Op::FreezeTemplate(_) => "freeze_template",
            Op::CheckLimit(_) => "check_limit",
        }
    }
}

/// A transcript leaf: its id and the text whose SHA-256 is its digest.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LeafSpec {
    pub(super) leaf_id: String,
    pub(super) digest_of: String,
}

/// A run name and its prompt (`spawn`, `followup`, a queued run, a resume message).
#[derive(Deserialize)]
pub(super) struct RunPrompt {
    pub(super) child: Option<String>,
    pub(super) run: String,
    pub(super) prompt: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StopInput {
    pub(super) expected_run: String,
}

#[derive(Deserialize)]
pub(super) struct ConfirmStopInput {
    pub(super) child: Option<String>,
    pub(super) run: String,
    #[serde(default)]
    pub(super) reaped: u32,
}

#[derive(Deserialize)]
pub(super) struct CompleteInput {
    pub(super) child: Option<String>,
    pub(super) run: String,
    pub(super) leaf: LeafSpec,
}

#[derive(Deserialize)]
pub(super) struct FailInput {
    pub(super) run: String,
    pub(super) code: String,
    pub(super) message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactedInput {
    pub(super) child: Option<String>,
    pub(super) run: String,
    pub(super) tokens_before: u64,
    pub(super) tokens_after: u64,
    pub(super) branch_from: String,
}

#[derive(Deserialize)]
pub(super) struct CheckpointInput {
    /// Set: a checkpoint verified for that other child.
    pub(super) child: Option<String>,
    pub(super) observed: Option<LeafSpec>,
}

#[derive(Deserialize)]
pub(super) struct ResumeInput {
    pub(super) message: Option<RunPrompt>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EventAppendInput {
    pub(super) run: String,
    pub(super) kind: String,
    /// The payload size of a `text` event.
    pub(super) text_bytes: Option<usize>,
}

#[derive(Deserialize)]
pub(super) struct EventReadInput {
    pub(super) cursor: u64,
    #[serde(default = "default_read_limit")]
    pub(super) limit: usize,
}

fn default_read_limit() -> usize {
    50
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FreezeTemplateInput {
    /// The configuration file's `templates`, checked against its contract as given.
    pub(super) user_templates: Option<Value>,
    pub(super) template_id: String,
}

#[derive(Deserialize)]
pub(super) struct CheckLimitInput {
    pub(super) limit: LimitName,
    pub(super) value: u64,
}

/// A stored child, with symbolic names.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChildRecordSpec {
    pub(super) child: Option<String>,
    pub(super) state: String,
    pub(super) active_run: Option<ActiveRunSpec>,
    #[serde(default)]
    pub(super) queued: Vec<QueuedRunSpec>,
    pub(super) last_leaf: Option<LeafSpec>,
    pub(super) interrupted_run: Option<String>,
    pub(super) interruption_reason: Option<String>,
    pub(super) queue_capacity: Option<u32>,
}

#[derive(Deserialize)]
pub(super) struct ActiveRunSpec {
    pub(super) run: String,
    pub(super) status: String,
}

#[derive(Deserialize)]
pub(super) struct QueuedRunSpec {
    pub(super) run: String,
    pub(super) prompt: String,
}
