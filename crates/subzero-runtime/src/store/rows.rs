//! Plain row types: what the store returns and takes. Never a key.

use std::path::PathBuf;
use std::str::FromStr;

use rusqlite::Row;
use rusqlite::types::Type;
use serde_json::Value;
use subzero_core::{ArtifactId, ChildId, ChildState, EventSeq, RunId, RunStatus};

use crate::scope::WorkspaceScope;

/// The model a child talks to. `credential_ref` is the configured *name*; the key is
/// resolved in memory per run and never stored.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ModelRow {
    /// Endpoint base URL.
    pub url: String,
    /// Model name.
    pub model: String,
    /// Wire protocol (`openai-completions`).
    pub api: String,
    /// Name of a `[credentials.NAME]` entry.
    pub credential_ref: String,
}

pub use subzero_core::{Ownership, Phase};

/// The last completed transcript leaf and its digest.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LeafRef {
    /// Transcript entry id.
    pub leaf_id: String,
    /// Digest the worker reported for it.
    pub digest: String,
}

/// The worker that last ran a child.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WorkerInfo {
    /// Worker name.
    pub name: String,
    /// Worker version.
    pub version: String,
    /// Transcript format version.
    pub transcript_version: u32,
}

/// Everything needed to create a child.
#[derive(Clone, Debug)]
pub struct NewChild {
    /// Fresh id.
    pub child_id: ChildId,
    /// Its workspace.
    pub scope: WorkspaceScope,
    /// Template id the snapshot was frozen from.
    pub template_id: String,
    /// The frozen grant snapshot (JSON).
    pub snapshot: Value,
    /// Whether runs of this child need the writer slot.
    pub write_capable: bool,
    /// The model (never a key).
    pub model: ModelRow,
}

/// A stored child.
#[derive(Clone, Debug)]
pub struct ChildRow {
    /// Id.
    pub child_id: ChildId,
    /// Workspace.
    pub scope: WorkspaceScope,
    /// Template id.
    pub template_id: String,
    /// Grant snapshot.
    pub snapshot: Value,
    /// Write-capable.
    pub write_capable: bool,
    /// Model.
    pub model: ModelRow,
    /// Lifecycle state.
    pub state: ChildState,
    /// Display phase.
    pub phase: Phase,
    /// Ownership record.
    pub ownership: Ownership,
    /// Owning broker's token.
    pub owner_token: Option<String>,
    /// Bumped by every claim.
    pub owner_generation: u64,
    /// Bumped by every write of the lifecycle columns (`store::write`); a transition
    /// applies only to the generation it was decided from.
    pub generation: u64,
    /// Running or stop-requested run.
    pub active_run_id: Option<RunId>,
    /// Last completed leaf.
    pub last_leaf: Option<LeafRef>,
    /// Last worker identity.
    pub worker: Option<WorkerInfo>,
    /// Why the child is interrupted.
    pub interrupt_reason: Option<String>,
    /// Last worker progress.
    pub last_progress_at: Option<String>,
    /// Created.
    pub created_at: String,
    /// Updated.
    pub updated_at: String,
    /// Oldest retained event seq (equals `next_event_seq` when none is retained).
    pub oldest_event_seq: EventSeq,
    /// Seq the next event gets.
    pub next_event_seq: EventSeq,
}

impl ChildRow {
    /// The custody record the core decides claims, releases and recoveries from.
    pub fn custody(&self) -> subzero_core::lifecycle::Custody {
        subzero_core::lifecycle::Custody {
            child: self.child_id,
            state: self.state,
            ownership: self.ownership,
            owner: self.owner_token.clone(),
            generation: self.owner_generation,
        }
    }
}

/// A stored run.
#[derive(Clone, Debug)]
pub struct RunRow {
    /// Id.
    pub run_id: RunId,
    /// Its child.
    pub child_id: ChildId,
    /// 1-based order within the child.
    pub ordinal: u64,
    /// Status.
    pub status: RunStatus,
    /// Prompt or follow-up message.
    pub prompt: String,
    /// The caller's requestId, if any.
    pub request_id: Option<String>,
    /// Created.
    pub created_at: String,
    /// Started.
    pub started_at: Option<String>,
    /// Ended.
    pub ended_at: Option<String>,
    /// Bounded result preview.
    pub preview: Option<String>,
    /// Whether the preview is shorter than the result.
    pub preview_truncated: bool,
    /// Full result.
    pub artifact_id: Option<ArtifactId>,
    /// Failure code.
    pub error_code: Option<String>,
    /// Failure message.
    pub error_message: Option<String>,
    /// Why it was interrupted, stopped or cancelled.
    pub reason: Option<String>,
    /// Turns and tokens it used (zero until it ends).
    pub usage: super::RunUsage,
    /// The budget a `budget_exhausted` run reached.
    pub budget: Option<subzero_core::BudgetReached>,
    /// Machine-readable details of a failed run's error (`lastRun.error.details`).
    pub error_details: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One stored event.
#[derive(Clone, PartialEq, Debug)]
pub struct EventRow {
    /// Child.
    pub child_id: ChildId,
    /// Sequence number (≥ 1).
    pub seq: EventSeq,
    /// Timestamp.
    pub at: String,
    /// Run, when the event belongs to one.
    pub run_id: Option<RunId>,
    /// Event type (`run_started`, `tool`, …).
    pub kind: String,
    /// Type-specific fields (JSON object, ≤ 8 KiB).
    pub payload: Value,
}

/// Events between a cursor and now.
#[derive(Clone, PartialEq, Debug)]
pub struct EventPage {
    /// Events with `seq > cursor`, oldest first.
    pub events: Vec<EventRow>,
    /// Pass this back to continue.
    pub next_cursor: EventSeq,
    /// The cursor that yields the oldest retained event (oldest retained seq − 1).
    pub oldest_cursor: EventSeq,
    /// Set when events after the requested cursor were pruned.
    pub gap: Option<EventGap>,
}

/// Events after `requested` up to (excluding) `oldest` were pruned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct EventGap {
    /// The cursor the reader passed.
    pub requested: EventSeq,
    /// The cursor of the oldest retained event (its seq − 1).
    pub oldest: EventSeq,
}

/// An artifact record.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ArtifactRow {
    /// Id.
    pub artifact_id: ArtifactId,
    /// Owner child.
    pub child_id: ChildId,
    /// Run that produced it.
    pub run_id: Option<RunId>,
    /// File name under the child's artifact directory.
    pub file_name: String,
    /// Size in bytes.
    pub total_bytes: u64,
    /// Created.
    pub created_at: String,
}

/// An idempotency receipt to store with an admission.
#[derive(Clone, Debug)]
pub struct ReceiptInput {
    /// Tool name (`subzero_spawn`, …).
    pub tool: String,
    /// The caller's requestId.
    pub request_id: String,
    /// Digest of the canonical arguments.
    pub args_digest: String,
    /// The output to replay.
    pub receipt: Value,
}

/// A mutation that may have been done before under the same requestId.
#[derive(Clone, Debug)]
pub enum Admit<T> {
    /// Done now.
    New(T),
    /// Done before with the same arguments; this is the stored receipt, nothing changed.
    Replayed(Value),
}

fn bad(col: usize, what: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        col,
        Type::Text,
        format!("stored {what} is not valid").into(),
    )
}

pub(crate) fn id_col<T: FromStr>(row: &Row<'_>, col: usize) -> rusqlite::Result<T> {
    let text: String = row.get(col)?;
    text.parse().map_err(|_| bad(col, "id"))
}

pub(crate) fn opt_id_col<T: FromStr>(row: &Row<'_>, col: usize) -> rusqlite::Result<Option<T>> {
    let text: Option<String> = row.get(col)?;
    text.map(|t| t.parse().map_err(|_| bad(col, "id")))
        .transpose()
}

fn json_col(row: &Row<'_>, col: usize) -> rusqlite::Result<Value> {
    let text: String = row.get(col)?;
    serde_json::from_str(&text).map_err(|_| bad(col, "JSON"))
}

fn u64_col(row: &Row<'_>, col: usize) -> rusqlite::Result<u64> {
    let v: i64 = row.get(col)?;
    u64::try_from(v).map_err(|_| bad(col, "count"))
}

pub(crate) const CHILD_COLUMNS: &str = "child_id, scope_uid, workspace_root, scope_dev, scope_ino, \
    template_id, snapshot_json, write_capable, model_url, model_name, model_api, credential_ref, \
    state, phase, ownership, owner_token, owner_generation, active_run_id, last_leaf_id, \
    last_leaf_digest, worker_name, worker_version, transcript_version, interrupt_reason, \
    last_progress_at, created_at, updated_at, oldest_event_seq, next_event_seq, generation";

pub(crate) fn child_from_row(row: &Row<'_>) -> rusqlite::Result<ChildRow> {
    let uid: i64 = row.get(1)?;
    let root: String = row.get(2)?;
    let dev: i64 = row.get(3)?;
    let ino: i64 = row.get(4)?;
    let state: String = row.get(12)?;
    let phase: String = row.get(13)?;
    let ownership: String = row.get(14)?;
    let leaf_id: Option<String> = row.get(18)?;
    let leaf_digest: Option<String> = row.get(19)?;
    let worker_name: Option<String> = row.get(20)?;
    let worker_version: Option<String> = row.get(21)?;
    let transcript_version: Option<i64> = row.get(22)?;
    Ok(ChildRow {
        child_id: id_col(row, 0)?,
        scope: WorkspaceScope::from_parts(
            u32::try_from(uid).map_err(|_| bad(1, "uid"))?,
            PathBuf::from(root),
            dev as u64,
            ino as u64,
        ),
        template_id: row.get(5)?,
        snapshot: json_col(row, 6)?,
        write_capable: row.get(7)?,
        model: ModelRow {
            url: row.get(8)?,
            model: row.get(9)?,
            api: row.get(10)?,
            credential_ref: row.get(11)?,
        },
        state: ChildState::parse(&state).ok_or_else(|| bad(12, "state"))?,
        phase: Phase::parse(&phase).ok_or_else(|| bad(13, "phase"))?,
        ownership: Ownership::parse(&ownership).ok_or_else(|| bad(14, "ownership"))?,
        owner_token: row.get(15)?,
        owner_generation: u64_col(row, 16)?,
        active_run_id: opt_id_col(row, 17)?,
        last_leaf: leaf_id
            .zip(leaf_digest)
            .map(|(leaf_id, digest)| LeafRef { leaf_id, digest }),
        worker: match (worker_name, worker_version, transcript_version) {
            (Some(name), Some(version), Some(tv)) => Some(WorkerInfo {
                name,
                version,
                transcript_version: u32::try_from(tv).map_err(|_| bad(22, "version"))?,
            }),
            _ => None,
        },
        interrupt_reason: row.get(23)?,
        last_progress_at: row.get(24)?,
        created_at: row.get(25)?,
        updated_at: row.get(26)?,
        oldest_event_seq: EventSeq::new(u64_col(row, 27)?),
        next_event_seq: EventSeq::new(u64_col(row, 28)?),
        generation: u64_col(row, 29)?,
    })
}

pub(crate) const RUN_COLUMNS: &str = "run_id, child_id, ordinal, status, prompt, request_id, \
    created_at, started_at, ended_at, preview, preview_truncated, artifact_id, error_code, \
    error_message, reason, input_tokens, output_tokens, turns, budget, usage_source, \
    cut_max_output_tokens, error_details";

pub(crate) fn run_from_row(row: &Row<'_>) -> rusqlite::Result<RunRow> {
    let status: String = row.get(3)?;
    Ok(RunRow {
        run_id: id_col(row, 0)?,
        child_id: id_col(row, 1)?,
        ordinal: u64_col(row, 2)?,
        status: RunStatus::parse(&status).ok_or_else(|| bad(3, "status"))?,
        prompt: row.get(4)?,
        request_id: row.get(5)?,
        created_at: row.get(6)?,
        started_at: row.get(7)?,
        ended_at: row.get(8)?,
        preview: row.get(9)?,
        preview_truncated: row.get(10)?,
        artifact_id: opt_id_col(row, 11)?,
        error_code: row.get(12)?,
        error_message: row.get(13)?,
        reason: row.get(14)?,
        usage: super::RunUsage {
            input_tokens: u64_col(row, 15)?,
            output_tokens: u64_col(row, 16)?,
            turns: u64_col(row, 17)?,
            source: row.get(19)?,
            cut_max_output_tokens: match row.get::<_, Option<i64>>(20)? {
                Some(value) => {
                    Some(u64::try_from(value).map_err(|_| bad(20, "cut_max_output_tokens"))?)
                }
                None => None,
            },
        },
        budget: match row.get::<_, Option<String>>(18)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|_| bad(18, "budget"))?),
            None => None,
        },
        error_details: match row.get::<_, Option<String>>(21)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|_| bad(21, "error_details"))?),
            None => None,
        },
    })
}

pub(crate) const EVENT_COLUMNS: &str = "child_id, seq, at, run_id, type, payload";

pub(crate) fn event_from_row(row: &Row<'_>) -> rusqlite::Result<EventRow> {
    Ok(EventRow {
        child_id: id_col(row, 0)?,
        seq: EventSeq::new(u64_col(row, 1)?),
        at: row.get(2)?,
        run_id: opt_id_col(row, 3)?,
        kind: row.get(4)?,
        payload: json_col(row, 5)?,
    })
}

pub(crate) const ARTIFACT_COLUMNS: &str =
    "artifact_id, child_id, run_id, file_name, total_bytes, created_at";

pub(crate) fn artifact_from_row(row: &Row<'_>) -> rusqlite::Result<ArtifactRow> {
    Ok(ArtifactRow {
        artifact_id: id_col(row, 0)?,
        child_id: id_col(row, 1)?,
        run_id: opt_id_col(row, 2)?,
        file_name: row.get(3)?,
        total_bytes: u64_col(row, 4)?,
        created_at: row.get(5)?,
    })
}
