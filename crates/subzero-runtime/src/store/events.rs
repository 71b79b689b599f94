//! Per-child event log: monotonic sequence, bounded retention, explicit gaps — by the
//! core's rules (`subzero_core::events`), kept in SQL.
//!
//! An event is the core's typed [`EventBody`], stored through serde as its kind, its run
//! and its payload ([`EventBody::to_stored`]); the payload is what the core's
//! `event_payload_bytes` limit and byte retention measure. `children.next_event_seq` /
//! `oldest_event_seq` / `event_bytes` are maintained in the same transaction as every
//! insert and prune, so a reader computes a gap from one snapshot: if its cursor is below
//! the oldest retained event − 1, events it never saw were pruned — also when the pruning
//! happened while it was waiting.

use std::time::Instant;

use rusqlite::{Connection, OptionalExtension, params};
use subzero_core::events::{EventBody, Retention, Window, cursor_before};
use subzero_core::{ChildId, EventSeq, LifecycleError};

use super::rows::{EventPage, EventRow};
use super::sql::{RowExt, Sql, int};
use super::{Store, StoreOptions, now};
use crate::error::{RuntimeError, RuntimeResult};
use crate::scope::WorkspaceScope;

/// The log counters of one child, as its row keeps them.
struct Counters {
    next: u64,
    oldest: u64,
    bytes: u64,
}

fn counters(conn: &Connection, child: ChildId) -> RuntimeResult<Counters> {
    Ok(conn.query_row(
        "SELECT next_event_seq, oldest_event_seq, event_bytes FROM children WHERE child_id = ?1",
        params![Sql(child)],
        |r| {
            Ok(Counters {
                next: r.col("next_event_seq")?,
                oldest: r.col("oldest_event_seq")?,
                bytes: r.col("event_bytes")?,
            })
        },
    )?)
}

/// Payload bytes of the events of `child` with a seq in `from..to`.
fn payload_bytes(conn: &Connection, child: ChildId, from: u64, to: u64) -> RuntimeResult<u64> {
    Ok(conn.query_row(
        "SELECT COALESCE(SUM(length(CAST(payload AS BLOB))), 0) AS bytes FROM events \
         WHERE child_id = ?1 AND seq >= ?2 AND seq < ?3",
        params![Sql(child), int(from), int(to)],
        |r| r.col("bytes"),
    )?)
}

/// Append `body` to `child`'s log, then prune to the retention bounds. Must run inside
/// the caller's write transaction. A payload over `event_payload_bytes` is
/// `limit_exceeded` and takes no number.
pub(crate) fn append(
    conn: &Connection,
    options: &StoreOptions,
    child: ChildId,
    body: &EventBody,
) -> RuntimeResult<EventSeq> {
    let stored = body.to_stored();
    options
        .limits()
        .check_event_payload(stored.payload.len())
        .map_err(LifecycleError::from)?;
    let Counters {
        next: seq,
        mut oldest,
        mut bytes,
    } = counters(conn, child)?;
    let at = now(conn)?;
    conn.execute(
        "INSERT INTO events (child_id, seq, at, run_id, type, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            Sql(child),
            int(seq),
            Sql(&at),
            stored.run.map(Sql),
            Sql(stored.kind),
            stored.payload
        ],
    )?;
    bytes += stored.payload.len() as u64;
    let next = seq + 1;
    let retention = options.retention();
    // Count bound: the oldest events past `max_events` go at once.
    let excess = retention.excess(next - oldest);
    if excess > 0 {
        let keep_from = oldest + excess;
        bytes -= payload_bytes(conn, child, oldest, keep_from)?;
        conn.execute(
            "DELETE FROM events WHERE child_id = ?1 AND seq < ?2",
            params![Sql(child), int(keep_from)],
        )?;
        oldest = keep_from;
    }
    // Byte bound: the oldest go one by one until under it; the newest always stays.
    while retention.over_bytes(next - oldest, bytes) {
        bytes -= payload_bytes(conn, child, oldest, oldest + 1)?;
        conn.execute(
            "DELETE FROM events WHERE child_id = ?1 AND seq = ?2",
            params![Sql(child), int(oldest)],
        )?;
        oldest += 1;
    }
    conn.execute(
        "UPDATE children SET next_event_seq = ?2, oldest_event_seq = ?3, event_bytes = ?4 WHERE child_id = ?1",
        params![Sql(child), int(next), int(oldest), int(bytes)],
    )?;
    Ok(EventSeq::new(seq))
}

/// Read up to `limit` events after `after` for a child in `scope`. A cursor past the
/// last event reads from the last one (nothing): refusing it is the caller's choice.
pub(crate) fn page(
    conn: &Connection,
    scope: &WorkspaceScope,
    child: ChildId,
    after: EventSeq,
    limit: u32,
) -> RuntimeResult<EventPage> {
    let (oldest, next): (EventSeq, EventSeq) = conn
        .query_row(
            "SELECT oldest_event_seq, next_event_seq FROM children WHERE child_id = ?1 AND scope_key = ?2",
            params![Sql(child), scope.key()],
            |r| Ok((r.col("oldest_event_seq")?, r.col("next_event_seq")?)),
        )
        .optional()?
        .ok_or_else(|| RuntimeError::not_found("child", child))?;
    let oldest_cursor = cursor_before(oldest);
    let window = Window::of(after.min(cursor_before(next)), oldest_cursor);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {} FROM events WHERE child_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        EventRow::columns()
    ))?;
    let events = stmt
        .query_map(
            params![Sql(child), int(window.from.get()), i64::from(limit.max(1))],
            EventRow::from_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(EventPage {
        next_cursor: window.next_cursor(events.last().map(|e| e.seq)),
        events,
        oldest_cursor,
        gap: window.gap,
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

impl StoreOptions {
    /// The core's retention rule for these options.
    pub fn retention(&self) -> Retention {
        Retention {
            max_events: u32::try_from(self.event_retention).unwrap_or(u32::MAX),
            max_bytes: self.event_retention_bytes,
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
