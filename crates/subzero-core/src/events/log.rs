//! The per-child event log: monotonic sequence numbers, bounded retention, and reads
//! from a cursor that report an explicit gap instead of silently skipping.
//!
//! Sequence numbers start at 1 and strictly increase per child, also across pruning.
//! Retention is bounded by count and by bytes; the newest event is always kept. A
//! reader passes the cursor it last saw (`0` at first); when events after it were
//! pruned, the page carries `Gap { requested, oldest }` and continues from the oldest
//! retained event, so the reader knows exactly what it missed.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::EventBody;
use crate::error_code::{Coded, ErrorCode};
use crate::ids::{ChildId, EventSeq};
use crate::limits::{LimitExceeded, Limits};

/// One retained event.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Per-child sequence number, ≥ 1.
    pub seq: EventSeq,
    /// When it was appended, milliseconds since the Unix epoch (the caller's clock).
    pub at_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub body: EventBody,
}

/// How much history a child keeps.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// Most events kept (≥ 1; seed: 1000).
    pub max_events: u32,
    /// Most payload bytes kept (the newest event is kept regardless).
    pub max_bytes: u64,
}

impl Retention {
    /// Payload bytes a child keeps by default (`event_retention_bytes`, 1 MiB).
    pub const DEFAULT_BYTES: u64 = 1024 * 1024;

    /// The retention that goes with `limits`: `event_retention` events, and
    /// [`Retention::DEFAULT_BYTES`] payload bytes.
    pub fn from_limits(limits: &Limits) -> Self {
        Self {
            max_events: limits.event_retention.max(1),
            max_bytes: Self::DEFAULT_BYTES,
        }
    }

    /// How many of the oldest of `retained` events the count bound drops.
    pub fn excess(&self, retained: u64) -> u64 {
        retained.saturating_sub(u64::from(self.max_events.max(1)))
    }

    /// Whether `retained` events holding `bytes` payload bytes are over the byte bound;
    /// the newest event is always kept, however large.
    pub fn over_bytes(&self, retained: u64, bytes: u64) -> bool {
        retained > 1 && bytes > self.max_bytes
    }
}

impl Default for Retention {
    fn default() -> Self {
        Self::from_limits(&Limits::default())
    }
}

/// The cursor just before `seq`: the oldest cursor of a log whose oldest retained event
/// is `seq` (or, with nothing retained, whose next event will be `seq`).
pub fn cursor_before(seq: EventSeq) -> EventSeq {
    EventSeq::new(seq.get().saturating_sub(1))
}

/// Where a read from a cursor begins: at the cursor, or — when events after it were
/// pruned — at the oldest cursor still available, with the explicit [`Gap`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Window {
    /// The events read are those with a larger seq.
    pub from: EventSeq,
    /// Set when the cursor was older than retained history.
    pub gap: Option<Gap>,
}

impl Window {
    /// The window of a read from `cursor` in a log whose oldest available cursor is
    /// `oldest`.
    pub fn of(cursor: EventSeq, oldest: EventSeq) -> Window {
        if cursor < oldest {
            Window {
                from: oldest,
                gap: Some(Gap {
                    requested: cursor,
                    oldest,
                }),
            }
        } else {
            Window {
                from: cursor,
                gap: None,
            }
        }
    }

    /// The cursor to pass next: the last event read, else where the read began.
    pub fn next_cursor(&self, last_read: Option<EventSeq>) -> EventSeq {
        last_read.unwrap_or(self.from)
    }
}

/// Events after the requested cursor were pruned.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Gap {
    /// The cursor the reader asked from.
    pub requested: EventSeq,
    /// The oldest cursor still available (oldest retained seq − 1).
    pub oldest: EventSeq,
}

/// One page of events read from a cursor.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EventPage {
    /// Events with `seq` > the effective cursor, oldest first.
    pub events: Vec<Event>,
    /// The cursor to pass next time.
    pub next_cursor: EventSeq,
    /// The oldest cursor still available.
    pub oldest_cursor: EventSeq,
    /// Set when the requested cursor was older than retained history.
    pub gap: Option<Gap>,
}

/// A cursor from the future: the reader has a cursor this log never issued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid_request: cursor {requested} is ahead of the newest event {newest} of child {child}; pass a cursor returned by get() (or 0)"
)]
pub struct CursorAhead {
    /// The child.
    pub child: ChildId,
    /// The cursor asked for.
    pub requested: EventSeq,
    /// The newest sequence number.
    pub newest: EventSeq,
}

impl Coded for CursorAhead {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidRequest
    }
}

/// Stored events that do not form a valid log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("internal: stored events of child {child} are inconsistent: {reason}")]
pub struct EventLogCorrupt {
    /// The child.
    pub child: ChildId,
    /// What is wrong.
    pub reason: String,
}

impl Coded for EventLogCorrupt {
    fn code(&self) -> ErrorCode {
        ErrorCode::Internal
    }
}

/// One child's bounded event history.
#[derive(Clone, Debug)]
pub struct EventLog {
    child: ChildId,
    retention: Retention,
    last: EventSeq,
    events: VecDeque<(Event, usize)>,
    bytes: u64,
}

impl EventLog {
    /// An empty log.
    pub fn new(child: ChildId, retention: Retention) -> Self {
        Self {
            child,
            retention: Retention {
                max_events: retention.max_events.max(1),
                ..retention
            },
            last: EventSeq::START,
            events: VecDeque::new(),
            bytes: 0,
        }
    }

    /// Rebuild from stored rows: `events` strictly increasing and none after `last`.
    /// Retention is applied at once.
    pub fn restore(
        child: ChildId,
        retention: Retention,
        last: EventSeq,
        events: Vec<Event>,
    ) -> Result<Self, EventLogCorrupt> {
        let mut log = Self::new(child, retention);
        for event in events {
            if event.seq <= log.last || event.seq > last {
                return Err(EventLogCorrupt {
                    child,
                    reason: format!(
                        "event {} is out of order or after the last sequence {last}",
                        event.seq
                    ),
                });
            }
            log.last = event.seq;
            log.keep(event);
        }
        log.last = last;
        Ok(log)
    }

    /// Append `body`: it gets the next sequence number. A payload over the
    /// `event_payload_bytes` limit is refused (store it as an artifact instead) and
    /// consumes no number.
    pub fn append(
        &mut self,
        at_ms: u64,
        body: EventBody,
        limits: &Limits,
    ) -> Result<EventSeq, LimitExceeded> {
        limits.check_event_payload(body.payload_bytes())?;
        let seq = self.last.next();
        self.last = seq;
        self.keep(Event { seq, at_ms, body });
        Ok(seq)
    }

    fn keep(&mut self, event: Event) {
        let size = event.body.payload_bytes();
        self.bytes = self.bytes.saturating_add(size as u64);
        self.events.push_back((event, size));
        for _ in 0..self.retention.excess(self.events.len() as u64) {
            self.drop_oldest();
        }
        while self
            .retention
            .over_bytes(self.events.len() as u64, self.bytes)
        {
            self.drop_oldest();
        }
    }

    fn drop_oldest(&mut self) {
        if let Some((_, size)) = self.events.pop_front() {
            self.bytes = self.bytes.saturating_sub(size as u64);
        }
    }

    /// The newest sequence number (`0` before any event).
    pub fn last_seq(&self) -> EventSeq {
        self.last
    }

    /// The oldest cursor that still yields every later event.
    pub fn oldest_cursor(&self) -> EventSeq {
        match self.events.front() {
            Some((e, _)) => cursor_before(e.seq),
            None => self.last,
        }
    }

    /// Retained events, oldest first.
    pub fn retained(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().map(|(e, _)| e)
    }

    /// Read up to `limit` events after `cursor`. A cursor older than retained history
    /// yields a [`Gap`] and continues from the oldest retained event; a cursor newer
    /// than the newest event is [`CursorAhead`].
    pub fn read(&self, cursor: EventSeq, limit: usize) -> Result<EventPage, CursorAhead> {
        if cursor > self.last {
            return Err(CursorAhead {
                child: self.child,
                requested: cursor,
                newest: self.last,
            });
        }
        let oldest = self.oldest_cursor();
        let window = Window::of(cursor, oldest);
        let events: Vec<Event> = self
            .retained()
            .filter(|e| e.seq > window.from)
            .take(limit)
            .cloned()
            .collect();
        let next_cursor = window.next_cursor(events.last().map(|e| e.seq));
        let gap = window.gap;
        Ok(EventPage {
            events,
            next_cursor,
            oldest_cursor: oldest,
            gap,
        })
    }
}
