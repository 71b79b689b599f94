//! Schema and a small `user_version` migrator.
//!
//! Each migration runs in its own `BEGIN IMMEDIATE` transaction together with the
//! `user_version` bump, so a crash mid-migration leaves the previous version intact.
//! A database newer than this binary is refused rather than guessed at.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::{RuntimeError, RuntimeResult};

const MIGRATIONS: &[&str] = &[
    // 1: initial schema.
    r#"
    CREATE TABLE children (
        child_id           TEXT PRIMARY KEY,
        scope_key          TEXT NOT NULL,
        scope_uid          INTEGER NOT NULL,
        workspace_root     TEXT NOT NULL,
        scope_dev          INTEGER NOT NULL,
        scope_ino          INTEGER NOT NULL,
        template_id        TEXT NOT NULL,
        snapshot_json      TEXT NOT NULL,
        write_capable      INTEGER NOT NULL,
        model_url          TEXT NOT NULL,
        model_name         TEXT NOT NULL,
        model_api          TEXT NOT NULL,
        credential_ref     TEXT NOT NULL,
        state              TEXT NOT NULL CHECK (state IN ('ready', 'running', 'interrupted')),
        phase              TEXT NOT NULL CHECK (phase IN ('idle', 'starting', 'model', 'tool', 'stopping', 'recovery_required')),
        ownership          TEXT NOT NULL CHECK (ownership IN ('none', 'owned', 'recovery_required')),
        owner_token        TEXT,
        owner_generation   INTEGER NOT NULL DEFAULT 0,
        active_run_id      TEXT,
        last_leaf_id       TEXT,
        last_leaf_digest   TEXT,
        worker_name        TEXT,
        worker_version     TEXT,
        transcript_version INTEGER,
        interrupt_reason   TEXT,
        last_progress_at   TEXT,
        created_at         TEXT NOT NULL,
        updated_at         TEXT NOT NULL,
        next_event_seq     INTEGER NOT NULL DEFAULT 1,
        oldest_event_seq   INTEGER NOT NULL DEFAULT 1,
        event_bytes        INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX children_by_scope ON children (scope_key, child_id);

    CREATE TABLE runs (
        run_id            TEXT PRIMARY KEY,
        child_id          TEXT NOT NULL REFERENCES children (child_id),
        ordinal           INTEGER NOT NULL,
        status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'stop_requested', 'stopped', 'completed', 'failed', 'interrupted')),
        prompt            TEXT NOT NULL,
        request_id        TEXT,
        created_at        TEXT NOT NULL,
        started_at        TEXT,
        ended_at          TEXT,
        preview           TEXT,
        preview_truncated INTEGER NOT NULL DEFAULT 0,
        artifact_id       TEXT,
        error_code        TEXT,
        error_message     TEXT,
        reason            TEXT,
        UNIQUE (child_id, ordinal)
    ) STRICT;

    CREATE TABLE followups (
        child_id TEXT NOT NULL REFERENCES children (child_id),
        position INTEGER NOT NULL,
        run_id   TEXT NOT NULL UNIQUE REFERENCES runs (run_id),
        PRIMARY KEY (child_id, position)
    ) STRICT;

    CREATE TABLE events (
        child_id TEXT NOT NULL REFERENCES children (child_id),
        seq      INTEGER NOT NULL,
        at       TEXT NOT NULL,
        run_id   TEXT,
        type     TEXT NOT NULL,
        payload  TEXT NOT NULL,
        PRIMARY KEY (child_id, seq)
    ) STRICT;

    CREATE TABLE artifacts (
        artifact_id TEXT PRIMARY KEY,
        child_id    TEXT NOT NULL REFERENCES children (child_id),
        run_id      TEXT,
        file_name   TEXT NOT NULL,
        total_bytes INTEGER NOT NULL,
        created_at  TEXT NOT NULL
    ) STRICT;

    CREATE TABLE receipts (
        scope_key    TEXT NOT NULL,
        tool         TEXT NOT NULL,
        request_id   TEXT NOT NULL,
        args_digest  TEXT NOT NULL,
        receipt_json TEXT NOT NULL,
        created_at   TEXT NOT NULL,
        PRIMARY KEY (scope_key, tool, request_id)
    ) STRICT;

    CREATE TABLE slots (
        scope_key   TEXT NOT NULL,
        kind        TEXT NOT NULL CHECK (kind IN ('worker', 'writer')),
        slot_index  INTEGER NOT NULL,
        child_id    TEXT NOT NULL,
        owner_token TEXT NOT NULL,
        taken_at    TEXT NOT NULL,
        PRIMARY KEY (scope_key, kind, slot_index)
    ) STRICT;
    "#,
    // 2: a row generation for the lifecycle columns, bumped by every transition
    // (`store::write`), so a transition applies only to the row it was decided from.
    r#"
    ALTER TABLE children ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
    "#,
    // 3: runs record what they used (turns, tokens) and, for `budget_exhausted` (a new
    // status, so the CHECK changes and the table is rebuilt), the budget they reached as
    // JSON (`{"budget","limit","reached"}`).
    r#"
    CREATE TABLE runs_v3 (
        run_id            TEXT PRIMARY KEY,
        child_id          TEXT NOT NULL REFERENCES children (child_id),
        ordinal           INTEGER NOT NULL,
        status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'stop_requested', 'stopped', 'completed', 'budget_exhausted', 'failed', 'interrupted')),
        prompt            TEXT NOT NULL,
        request_id        TEXT,
        created_at        TEXT NOT NULL,
        started_at        TEXT,
        ended_at          TEXT,
        preview           TEXT,
        preview_truncated INTEGER NOT NULL DEFAULT 0,
        artifact_id       TEXT,
        error_code        TEXT,
        error_message     TEXT,
        reason            TEXT,
        input_tokens      INTEGER NOT NULL DEFAULT 0,
        output_tokens     INTEGER NOT NULL DEFAULT 0,
        turns             INTEGER NOT NULL DEFAULT 0,
        budget            TEXT,
        UNIQUE (child_id, ordinal)
    ) STRICT;
    INSERT INTO runs_v3 (run_id, child_id, ordinal, status, prompt, request_id, created_at,
        started_at, ended_at, preview, preview_truncated, artifact_id, error_code,
        error_message, reason)
    SELECT run_id, child_id, ordinal, status, prompt, request_id, created_at, started_at,
        ended_at, preview, preview_truncated, artifact_id, error_code, error_message, reason
    FROM runs;
    DROP TABLE runs;
    ALTER TABLE runs_v3 RENAME TO runs;
    "#,
    // 4: whether a run's tokens were reported by the endpoint or estimated from bytes
    // (a run stored before is `reported`: only reported usage was counted then), and the
    // `maxOutputTokens` value that cut a completed run's final answer (NULL: not cut).
    r#"
    ALTER TABLE runs ADD COLUMN usage_source TEXT NOT NULL DEFAULT 'reported'
        CHECK (usage_source IN ('reported', 'estimated'));
    ALTER TABLE runs ADD COLUMN cut_max_output_tokens INTEGER
        CHECK (cut_max_output_tokens IS NULL OR cut_max_output_tokens >= 1);
    "#,
    // 5: a failed run keeps the machine-readable details of its error as a JSON object
    // (`{"status": 503, …}`, `{"limit": "maxOutputTokens"}`), shown as `lastRun.error.details`.
    r#"
    ALTER TABLE runs ADD COLUMN error_details TEXT;
    "#,
    // 6: how full a child's context window is: the prompt tokens of a run's last model
    // request (NULL: not reported), and the window the child's model was given (NULL:
    // unknown).
    r#"
    ALTER TABLE runs ADD COLUMN context_tokens INTEGER
        CHECK (context_tokens IS NULL OR context_tokens >= 0);
    ALTER TABLE children ADD COLUMN model_context_window INTEGER
        CHECK (model_context_window IS NULL OR model_context_window >= 1);
    "#,
    // 7: the ledger of isolated checkouts (`store::ledger`), one per child: where it is,
    // what it was made from, its state (written only from the core's `CheckoutDecided`)
    // and the change it recorded. `generation` is the row version a decision was made
    // from (`UPDATE … WHERE state = ? AND generation = ?`), so of two brokers deciding
    // from the same row exactly one write lands.
    r#"
    CREATE TABLE checkouts (
        child_id       TEXT PRIMARY KEY REFERENCES children (child_id),
        scope_key      TEXT NOT NULL,
        path           TEXT NOT NULL,
        base_commit    TEXT NOT NULL,
        head_commit    TEXT,
        workspace_head TEXT NOT NULL,
        dirty          INTEGER NOT NULL CHECK (dirty IN (0, 1)),
        carried        INTEGER NOT NULL CHECK (carried IN (0, 1) AND carried <= dirty),
        state          TEXT NOT NULL CHECK (state IN ('prepared', 'in_use', 'settled_changed', 'settled_unchanged', 'applied', 'discarded', 'removed')),
        files_changed  INTEGER CHECK (files_changed IS NULL OR files_changed >= 0),
        insertions     INTEGER CHECK (insertions IS NULL OR insertions >= 0),
        deletions      INTEGER CHECK (deletions IS NULL OR deletions >= 0),
        diff_artifact  TEXT CHECK (diff_artifact IS NULL OR head_commit IS NOT NULL),
        size_bytes     INTEGER NOT NULL CHECK (size_bytes >= 0),
        generation     INTEGER NOT NULL CHECK (generation >= 1),
        created_at     TEXT NOT NULL,
        updated_at     TEXT NOT NULL,
        CHECK ((head_commit IS NULL) = (files_changed IS NULL)
            AND (head_commit IS NULL) = (insertions IS NULL)
            AND (head_commit IS NULL) = (deletions IS NULL))
    ) STRICT;
    CREATE INDEX checkouts_by_scope ON checkouts (scope_key, state);
    CREATE INDEX checkouts_by_state ON checkouts (state, updated_at);
    "#,
    // 8: a child's label, what a parent recognises it by (NULL for a child spawned before
    // labels existed).
    r#"
    ALTER TABLE children ADD COLUMN label TEXT
        CHECK (label IS NULL OR length(label) BETWEEN 1 AND 64);
    "#,
    // 9: the MCP tasks handed out (`store::ops::tasks`): a task is its run (same id), so
    // only the handle is kept — which call made it and the answer that call would have
    // given — never a status of its own.
    r#"
    CREATE TABLE tasks (
        task_id    TEXT PRIMARY KEY REFERENCES runs (run_id),
        child_id   TEXT NOT NULL REFERENCES children (child_id),
        call       TEXT NOT NULL CHECK (call IN ('subzero_spawn', 'subzero_send', 'subzero_resume')),
        answer     TEXT NOT NULL CHECK (json_valid(answer)),
        created_at TEXT NOT NULL
    ) STRICT;
    "#,
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Bring the database up to [`SCHEMA_VERSION`].
pub(crate) fn migrate(conn: &mut Connection) -> RuntimeResult<()> {
    // A step may rebuild a table others reference (SQLite's way to change a CHECK):
    // foreign keys are off while it runs, checked before it commits, and on again after.
    conn.pragma_update(None, "foreign_keys", false)?;
    let migrated = migrate_steps(conn);
    conn.pragma_update(None, "foreign_keys", true)?;
    migrated
}

fn migrate_steps(conn: &mut Connection) -> RuntimeResult<()> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get("user_version"))?;
        if version > SCHEMA_VERSION {
            return Err(RuntimeError::Internal(format!(
                "the state database has schema version {version}, newer than this subzero ({SCHEMA_VERSION}); upgrade subzero or use another --state-dir"
            )));
        }
        let Some(step) = usize::try_from(version)
            .ok()
            .and_then(|v| MIGRATIONS.get(v))
        else {
            return Ok(());
        };
        tx.execute_batch(step)?;
        let broken: Option<String> = tx
            .query_row("PRAGMA foreign_key_check", [], |r| r.get("table"))
            .optional()?;
        if let Some(table) = broken {
            return Err(RuntimeError::Internal(format!(
                "migrating the state database to version {} left a broken reference in table {table}; nothing was changed",
                version + 1
            )));
        }
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
        tracing::info!(version = version + 1, "migrated state database");
    }
}

/// Whether a reader that never migrates can read this database: its version must be
/// [`SCHEMA_VERSION`]. An older one is refused naming `subzero mcp`, the only program
/// that upgrades it; a newer one names the upgrade of this binary.
pub(crate) fn check_readable(conn: &Connection, path: &Path) -> RuntimeResult<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get("user_version"))?;
    let shown = path.display();
    match version.cmp(&SCHEMA_VERSION) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(RuntimeError::Internal(format!(
            "the state database {shown} has schema version {version}, older than this subzero ({SCHEMA_VERSION}); reading never migrates it — `subzero mcp` upgrades it when it starts (start your host, or run `subzero mcp` once), then retry"
        ))),
        std::cmp::Ordering::Greater => Err(RuntimeError::Internal(format!(
            "the state database {shown} has schema version {version}, newer than this subzero ({SCHEMA_VERSION}); use the subzero that wrote it or upgrade"
        ))),
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
