//! Row types: what the store returns and takes. Never a key.
//!
//! Each table's row is declared once with [`table_row!`]: the struct, the column list a
//! `SELECT` names and the reader that takes every column by name come from the one
//! declaration, so they cannot drift apart. A field is one column of its name (or of the
//! name after `=>`), or — for a value kept in several columns — the columns its
//! [`Column`] impl names.

use std::path::PathBuf;

use rusqlite::Row;
use serde_json::Value;
use subzero_core::events::EventBody;
use subzero_core::{ArtifactId, BudgetReached, ChildId, ChildState, EventSeq, RunId, RunStatus};

use super::grant::StoredSnapshot;
use super::sql::{Column, RowExt, conversion};
use crate::scope::WorkspaceScope;

pub use subzero_core::{ErrorCode, Ownership, Phase};
pub use subzero_protocol::{ModelApi, Timestamp};

/// Declares a table's row struct once: its fields, its column list and its reader.
macro_rules! table_row {
    (
        $(#[$meta:meta])*
        pub struct $name:ident in $table:literal {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty $(=> $col:literal)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The table this row is read from.
            #[allow(dead_code, reason = "named by the queries of some tables only")]
            pub(crate) const TABLE: &'static str = $table;

            /// The columns a `SELECT` of this row names, in declaration order.
            #[allow(dead_code, reason = "some tables are only read joined")]
            pub(crate) fn columns() -> String {
                Self::column_names().join(", ")
            }

            /// [`Self::columns`], each taken from the table aliased `alias` (for joins).
            #[allow(dead_code, reason = "used by the joined queries of some tables only")]
            pub(crate) fn columns_of(alias: &str) -> String {
                Self::column_names()
                    .iter()
                    .map(|c| format!("{alias}.{c} AS {c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }

            fn column_names() -> Vec<&'static str> {
                let mut names: Vec<&'static str> = Vec::new();
                $( names.extend(<$ty as Column>::names(table_row!(@col $field $(, $col)?))); )*
                names
            }

            /// The row, every column read by name.
            pub(crate) fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
                Ok(Self {
                    $( $field: <$ty as Column>::read(row, table_row!(@col $field $(, $col)?))?, )*
                })
            }
        }
    };
    (@col $field:ident) => { stringify!($field) };
    (@col $field:ident, $col:literal) => { $col };
}
pub(super) use table_row;

/// The model a child talks to. `credential_ref` is the configured *name*; the key is
/// resolved in memory per run and never stored.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ModelRow {
    /// Endpoint base URL.
    pub url: String,
    /// Model name.
    pub model: String,
    /// Wire protocol.
    pub api: ModelApi,
    /// Name of a `[credentials.NAME]` entry.
    pub credential_ref: String,
    /// The model's context window in tokens, when known.
    pub context_window: Option<u32>,
}

impl Column for ModelRow {
    fn names(_: &'static str) -> Vec<&'static str> {
        vec![
            "model_url",
            "model_name",
            "model_api",
            "credential_ref",
            "model_context_window",
        ]
    }
    fn read(row: &Row<'_>, _: &'static str) -> rusqlite::Result<Self> {
        Ok(ModelRow {
            url: row.col("model_url")?,
            model: row.col("model_name")?,
            api: row.col("model_api")?,
            credential_ref: row.col("credential_ref")?,
            context_window: row.col("model_context_window")?,
        })
    }
}

impl Column for WorkspaceScope {
    fn names(_: &'static str) -> Vec<&'static str> {
        vec!["scope_uid", "workspace_root", "scope_dev", "scope_ino"]
    }
    fn read(row: &Row<'_>, _: &'static str) -> rusqlite::Result<Self> {
        let uid: u32 = row.get("scope_uid")?;
        let root: String = row.get("workspace_root")?;
        // Stored as the bit pattern of the u64 (SQLite integers are signed).
        let dev: i64 = row.get("scope_dev")?;
        let ino: i64 = row.get("scope_ino")?;
        Ok(WorkspaceScope::from_parts(
            uid,
            PathBuf::from(root),
            dev as u64,
            ino as u64,
        ))
    }
}

/// The last completed transcript leaf and its digest.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LeafRef {
    /// Transcript entry id.
    pub leaf_id: String,
    /// Digest the worker reported for it.
    pub digest: String,
}

impl Column for Option<LeafRef> {
    fn names(_: &'static str) -> Vec<&'static str> {
        vec!["last_leaf_id", "last_leaf_digest"]
    }
    fn read(row: &Row<'_>, _: &'static str) -> rusqlite::Result<Self> {
        let id: Option<String> = row.col("last_leaf_id")?;
        let digest: Option<String> = row.col("last_leaf_digest")?;
        Ok(id
            .zip(digest)
            .map(|(leaf_id, digest)| LeafRef { leaf_id, digest }))
    }
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

impl Column for Option<WorkerInfo> {
    fn names(_: &'static str) -> Vec<&'static str> {
        vec!["worker_name", "worker_version", "transcript_version"]
    }
    fn read(row: &Row<'_>, _: &'static str) -> rusqlite::Result<Self> {
        let name: Option<String> = row.col("worker_name")?;
        let version: Option<String> = row.col("worker_version")?;
        let transcript: Option<u32> = row.get("transcript_version")?;
        Ok(match (name, version, transcript) {
            (Some(name), Some(version), Some(transcript_version)) => Some(WorkerInfo {
                name,
                version,
                transcript_version,
            }),
            _ => None,
        })
    }
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
    /// What the parent calls it.
    pub label: String,
}

table_row! {
    /// A stored child.
    #[derive(Clone, Debug)]
    pub struct ChildRow in "children" {
        /// Id.
        pub child_id: ChildId,
        /// Workspace.
        pub scope: WorkspaceScope,
        /// Template id.
        pub template_id: String,
        /// Grant snapshot, parsed when the row is read.
        pub snapshot: StoredSnapshot => "snapshot_json",
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
        pub last_progress_at: Option<Timestamp>,
        /// Created.
        pub created_at: Timestamp,
        /// Updated.
        pub updated_at: Timestamp,
        /// Oldest retained event seq (equals `next_event_seq` when none is retained).
        pub oldest_event_seq: EventSeq,
        /// Seq the next event gets.
        pub next_event_seq: EventSeq,
        /// What the parent calls it (`None` for a child spawned before labels existed).
        pub label: Option<String>,
    }
}

/// Turns and tokens one run used, as its worker reported them: whether the tokens were
/// reported by the endpoint or estimated, and the output-token cap that cut its final
/// answer (a completed run's `cut`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RunUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub turns: u64,
    pub source: UsageSource,
    /// `maxOutputTokens` of the run when it cut the final answer.
    pub cut_max_output_tokens: Option<u64>,
    /// Prompt tokens of the run's last model request (its context use), when reported.
    pub context_tokens: Option<u64>,
}

impl Column for RunUsage {
    fn names(_: &'static str) -> Vec<&'static str> {
        vec![
            "input_tokens",
            "output_tokens",
            "turns",
            "usage_source",
            "cut_max_output_tokens",
            "context_tokens",
        ]
    }
    fn read(row: &Row<'_>, _: &'static str) -> rusqlite::Result<Self> {
        Ok(RunUsage {
            input_tokens: row.col("input_tokens")?,
            output_tokens: row.col("output_tokens")?,
            turns: row.col("turns")?,
            source: row.col("usage_source")?,
            cut_max_output_tokens: row.col("cut_max_output_tokens")?,
            context_tokens: row.col("context_tokens")?,
        })
    }
}

/// Where a run's token counts come from (`runs.usage_source`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum UsageSource {
    /// Every model request reported its usage (or none was made).
    #[default]
    Reported,
    /// At least one request reported none; its tokens were estimated from bytes.
    Estimated,
}

impl super::sql::ToText for UsageSource {
    fn to_text(&self) -> String {
        match self {
            Self::Reported => "reported",
            Self::Estimated => "estimated",
        }
        .to_owned()
    }
}

impl super::sql::SqlText for UsageSource {
    const WHAT: &'static str = "usage source";
    fn from_text(text: &str) -> Option<Self> {
        match text {
            "reported" => Some(Self::Reported),
            "estimated" => Some(Self::Estimated),
            _ => None,
        }
    }
}

/// The `details` object of an error body.
pub type ErrorDetails = serde_json::Map<String, Value>;

/// A column that holds a JSON document of `T`, or NULL.
fn json_column<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    name: &'static str,
) -> rusqlite::Result<Option<T>> {
    match row.get::<_, Option<String>>(name)? {
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| conversion(row, name, e)),
        None => Ok(None),
    }
}

impl Column for Option<BudgetReached> {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        json_column(row, name)
    }
}

impl Column for Option<ErrorDetails> {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        json_column(row, name)
    }
}

table_row! {
    /// A stored run.
    #[derive(Clone, Debug)]
    pub struct RunRow in "runs" {
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
        pub created_at: Timestamp,
        /// Started.
        pub started_at: Option<Timestamp>,
        /// Ended.
        pub ended_at: Option<Timestamp>,
        /// Bounded result preview.
        pub preview: Option<String>,
        /// Whether the preview is shorter than the result.
        pub preview_truncated: bool,
        /// Full result.
        pub artifact_id: Option<ArtifactId>,
        /// Failure code.
        pub error_code: Option<ErrorCode>,
        /// Failure message.
        pub error_message: Option<String>,
        /// Why it was interrupted, stopped or cancelled.
        pub reason: Option<String>,
        /// Turns and tokens it used (zero until it ends).
        pub usage: RunUsage,
        /// The budget a `budget_exhausted` run reached.
        pub budget: Option<BudgetReached>,
        /// Machine-readable details of a failed run's error (`lastRun.error.details`).
        pub error_details: Option<ErrorDetails>,
    }
}

impl Column for EventBody {
    fn names(_: &'static str) -> Vec<&'static str> {
        vec!["type", "run_id", "payload"]
    }
    fn read(row: &Row<'_>, _: &'static str) -> rusqlite::Result<Self> {
        let stored = subzero_core::events::StoredEvent {
            kind: row.col("type")?,
            run: row.col("run_id")?,
            payload: row.col("payload")?,
        };
        EventBody::from_stored(&stored).map_err(|e| conversion(row, "payload", e))
    }
}

table_row! {
    /// One stored event.
    #[derive(Clone, PartialEq, Debug)]
    pub struct EventRow in "events" {
        /// Child.
        pub child_id: ChildId,
        /// Sequence number (≥ 1).
        pub seq: EventSeq,
        /// Timestamp.
        pub at: Timestamp,
        /// What happened (its type, run and payload).
        pub body: EventBody,
    }
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
pub type EventGap = subzero_core::events::Gap;

table_row! {
    /// An artifact record.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct ArtifactRow in "artifacts" {
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
        pub created_at: Timestamp,
    }
}

table_row! {
    /// A stored idempotency receipt.
    #[derive(Clone, Debug)]
    pub struct ReceiptRow in "receipts" {
        /// Digest of the canonical arguments it was stored for.
        pub args_digest: String,
        /// The output to replay.
        pub receipt: Value => "receipt_json",
    }
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

/// A queued run as the follow-up queue and its run row hold it.
pub(crate) struct QueuedRow {
    pub run_id: RunId,
    pub prompt: String,
}

impl QueuedRow {
    pub(crate) fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(QueuedRow {
            run_id: row.col("run_id")?,
            prompt: row.col("prompt")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_names_the_columns_it_reads() {
        let children = ChildRow::columns();
        for column in [
            "child_id",
            "scope_ino",
            "snapshot_json",
            "model_api",
            "state",
        ] {
            assert!(children.contains(column), "{children}");
        }
        assert!(children.ends_with("oldest_event_seq, next_event_seq, label"));
        assert_eq!(
            EventRow::columns(),
            "child_id, seq, at, type, run_id, payload"
        );
        assert_eq!(
            ArtifactRow::columns_of("a"),
            "a.artifact_id AS artifact_id, a.child_id AS child_id, a.run_id AS run_id, \
             a.file_name AS file_name, a.total_bytes AS total_bytes, a.created_at AS created_at"
        );
    }
}
