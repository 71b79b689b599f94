//! Per-child event log: monotonic sequence, bounded retention, explicit gaps.
//!
//! `children.next_event_seq` / `oldest_event_seq` / `event_bytes` are maintained in the
//! same transaction as every insert and prune, so a reader computes a gap from one
//! snapshot: if its cursor is below the oldest retained event − 1, events it never saw
//! were pruned — also when the pruning happened while it was waiting.

use std::time::Instant;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use subzero_core::{ChildId, EventSeq, RunId};

use super::rows::{EVENT_COLUMNS, EventGap, EventPage, event_from_row};
use super::{Store, StoreOptions, now};
use crate::error::{RuntimeError, RuntimeResult};
use crate::scope::WorkspaceScope;

/// Largest event payload the store accepts; bigger content belongs in an artifact.
pub const MAX_EVENT_PAYLOAD_BYTES: usize = 8 * 1024;

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Append one event, then prune to the retention bounds. Must run inside the caller's
/// write transaction.
pub(crate) fn append(
    conn: &Connection,
    options: &StoreOptions,
    child: ChildId,
    run: Option<RunId>,
    kind: &str,
    payload: &Value,
) -> RuntimeResult<EventSeq> {
    if !payload.is_object() {
        return Err(RuntimeError::Internal(format!(
            "event {kind} payload must be a JSON object"
        )));
    }
    let text = serde_json::to_string(payload)
        .map_err(|e| RuntimeError::Internal(format!("event payload: {e}")))?;
    if text.len() > MAX_EVENT_PAYLOAD_BYTES {
        return Err(RuntimeError::LimitExceeded(format!(
            "event {kind} payload is {} bytes, over the {MAX_EVENT_PAYLOAD_BYTES}-byte limit; store the content as an artifact and reference it",
            text.len()
        )));
    }
    let (seq, mut oldest, mut bytes): (i64, i64, i64) = conn.query_row(
        "SELECT next_event_seq, oldest_event_seq, event_bytes FROM children WHERE child_id = ?1",
        params![child.to_string()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let at = now(conn)?;
    conn.execute(
        "INSERT INTO events (child_id, seq, at, run_id, type, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            child.to_string(),
            seq,
            at,
            run.map(|r| r.to_string()),
            kind,
            text
        ],
    )?;
    bytes += to_i64(text.len() as u64);
    let next = seq + 1;

    // Count bound: keep the newest `event_retention` events.
    let keep_from = next - to_i64(options.event_retention.max(1));
    if keep_from > oldest {
        let freed: i64 = conn.query_row(
            "SELECT COALESCE(SUM(length(CAST(payload AS BLOB))), 0) FROM events WHERE child_id = ?1 AND seq < ?2",
            params![child.to_string(), keep_from],
            |r| r.get(0),
        )?;
        conn.execute(
            "DELETE FROM events WHERE child_id = ?1 AND seq < ?2",
            params![child.to_string(), keep_from],
        )?;
        bytes -= freed;
        oldest = keep_from;
    }
    // Byte bound: drop oldest events until under the cap, always keeping the newest.
    while bytes > to_i64(options.event_retention_bytes) && oldest < seq {
        let freed: Option<i64> = conn
            .query_row(
                "SELECT length(CAST(payload AS BLOB)) FROM events WHERE child_id = ?1 AND seq = ?2",
                params![child.to_string(), oldest],
                |r| r.get(0),
            )
            .optional()?;
        conn.execute(
            "DELETE FROM events WHERE child_id = ?1 AND seq = ?2",
            params![child.to_string(), oldest],
        )?;
        bytes -= freed.unwrap_or(0);
        oldest += 1;
    }
    conn.execute(
        "UPDATE children SET next_event_seq = ?2, oldest_event_seq = ?3, event_bytes = ?4 WHERE child_id = ?1",
        params![child.to_string(), next, oldest, bytes],
    )?;
    Ok(EventSeq::new(to_u64(seq)))
}

/// Read up to `limit` events after `after` for a child in `scope`.
pub(crate) fn page(
    conn: &Connection,
    scope: &WorkspaceScope,
    child: ChildId,
    after: EventSeq,
    limit: u32,
) -> RuntimeResult<EventPage> {
    let (oldest, next): (i64, i64) = conn
        .query_row(
            "SELECT oldest_event_seq, next_event_seq FROM children WHERE child_id = ?1 AND scope_key = ?2",
            params![child.to_string(), scope.key()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?
        .ok_or_else(|| RuntimeError::not_found("child", child))?;
    let (oldest, next) = (to_u64(oldest), to_u64(next));
    let oldest_cursor = EventSeq::new(oldest.saturating_sub(1));
    let gap = (after < oldest_cursor).then_some(EventGap {
        requested: after,
        oldest: oldest_cursor,
    });
    let from = after.get().max(oldest_cursor.get());
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM events WHERE child_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
    ))?;
    let events = stmt
        .query_map(
            params![child.to_string(), to_i64(from), i64::from(limit.max(1))],
            event_from_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let next_cursor = match events.last() {
        Some(last) => last.seq,
        None => EventSeq::new(from.min(next.saturating_sub(1))),
    };
    Ok(EventPage {
        events,
        next_cursor,
        oldest_cursor,
        gap,
    })
}

impl Store {
    /// Events after `after` (at most `limit`), with an explicit gap when some of them
    /// were pruned. A child of another scope is `not_found`.
    pub async fn events(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        after: EventSeq,
        limit: u32,
    ) -> RuntimeResult<EventPage> {
        let scope = scope.clone();
        self.read(move |c| page(c, &scope, child, after, limit))
            .await
    }

    /// Like [`Store::events`], but waits up to `timeout` for at least one event (or a
    /// gap). Local commits wake it at once; other brokers' commits are seen within
    /// [`StoreOptions::poll_interval`]. The gap is computed on the final read, so
    /// pruning that happened during the wait is reported.
    pub async fn wait_events(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        after: EventSeq,
        limit: u32,
        timeout: std::time::Duration,
    ) -> RuntimeResult<EventPage> {
        let deadline = Instant::now() + timeout;
        let mut commits = self.commits();
        loop {
            commits.borrow_and_update();
            let page = self.events(scope, child, after, limit).await?;
            let now = Instant::now();
            if !page.events.is_empty() || page.gap.is_some() || now >= deadline {
                return Ok(page);
            }
            let nap = (deadline - now).min(self.options().poll_interval);
            let _ = tokio::time::timeout(nap, commits.changed()).await;
        }
    }
}

/// Bytes of an event's short text (`ShortText` in the contract: a failure message, an
/// interruption reason). The full message stays on the run.
const SHORT_TEXT_BYTES: usize = 512;

/// `text` cut to fit an event's short text, ending in `…` when it was cut.
pub(crate) fn short_text(text: &str) -> String {
    if text.len() <= SHORT_TEXT_BYTES {
        return text.to_owned();
    }
    let cut = text.floor_char_boundary(SHORT_TEXT_BYTES - '…'.len_utf8());
    format!("{}…", &text[..cut])
}
