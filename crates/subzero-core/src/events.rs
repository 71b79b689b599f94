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

use crate::error_code::{Coded, ErrorCode};
use crate::ids::{ArtifactId, ChildId, EventSeq, RunId};
use crate::limits::{LimitExceeded, Limits};

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

impl EventBody {
    /// Serialized size in bytes, the measure of the payload limit and byte retention.
    pub fn payload_bytes(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len())
    }
}

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
    /// The retention that goes with `limits`: `event_retention` events, and as many bytes
    /// as that many full-size payloads.
    pub fn from_limits(limits: &Limits) -> Self {
        Self {
            max_events: limits.event_retention.max(1),
            max_bytes: u64::from(limits.event_retention.max(1))
                * u64::from(limits.event_payload_bytes),
        }
    }
}

impl Default for Retention {
    fn default() -> Self {
        Self::from_limits(&Limits::default())
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
        while self.events.len() > 1
            && (self.events.len() > self.retention.max_events as usize
                || self.bytes > self.retention.max_bytes)
        {
            if let Some((_, size)) = self.events.pop_front() {
                self.bytes = self.bytes.saturating_sub(size as u64);
            }
        }
    }

    /// The newest sequence number (`0` before any event).
    pub fn last_seq(&self) -> EventSeq {
        self.last
    }

    /// The oldest cursor that still yields every later event.
    pub fn oldest_cursor(&self) -> EventSeq {
        match self.events.front() {
            Some((e, _)) => EventSeq::new(e.seq.get().saturating_sub(1)),
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
        let (from, gap) = if cursor < oldest {
            (
                oldest,
                Some(Gap {
                    requested: cursor,
                    oldest,
                }),
            )
        } else {
            (cursor, None)
        };
        let events: Vec<Event> = self
            .retained()
            .filter(|e| e.seq > from)
            .take(limit)
            .cloned()
            .collect();
        let next_cursor = events.last().map_or(from, |e| e.seq);
        Ok(EventPage {
            events,
            next_cursor,
            oldest_cursor: oldest,
            gap,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started() -> EventBody {
        EventBody::RunStarted {
            run_id: RunId::generate(),
        }
    }

    #[test]
    fn sequence_numbers_start_at_one_and_increase() {
        let mut log = EventLog::new(ChildId::generate(), Retention::default());
        let l = Limits::default();
        assert_eq!(log.append(1, started(), &l).unwrap(), EventSeq::new(1));
        assert_eq!(log.append(2, started(), &l).unwrap(), EventSeq::new(2));
        let page = log.read(EventSeq::START, 10).unwrap();
        assert_eq!(page.events.len(), 2);
        assert_eq!(page.next_cursor, EventSeq::new(2));
        assert_eq!(page.gap, None);
    }

    #[test]
    fn a_pruned_cursor_reports_an_explicit_gap() {
        let retention = Retention {
            max_events: 3,
            max_bytes: u64::MAX,
        };
        let mut log = EventLog::new(ChildId::generate(), retention);
        let l = Limits::default();
        for i in 0..5 {
            log.append(i, started(), &l).unwrap();
        }
        let page = log.read(EventSeq::new(1), 10).unwrap();
        assert_eq!(
            page.gap,
            Some(Gap {
                requested: EventSeq::new(1),
                oldest: EventSeq::new(2)
            })
        );
        assert_eq!(page.events.first().map(|e| e.seq), Some(EventSeq::new(3)));
        assert_eq!(page.next_cursor, EventSeq::new(5));
        assert!(log.read(EventSeq::new(2), 10).unwrap().gap.is_none());
    }

    #[test]
    fn a_cursor_from_the_future_is_refused() {
        let log = EventLog::new(ChildId::generate(), Retention::default());
        let err = log.read(EventSeq::new(3), 10).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
    }

    #[test]
    fn an_oversized_payload_is_refused_and_takes_no_number() {
        let mut log = EventLog::new(ChildId::generate(), Retention::default());
        let body = EventBody::Text {
            run_id: RunId::generate(),
            text: "x".repeat(9000),
            truncated: false,
        };
        assert!(log.append(1, body, &Limits::default()).is_err());
        assert_eq!(log.last_seq(), EventSeq::START);
    }

    #[test]
    fn byte_retention_prunes_but_keeps_the_newest() {
        let retention = Retention {
            max_events: 100,
            max_bytes: 10,
        };
        let mut log = EventLog::new(ChildId::generate(), retention);
        let l = Limits::default();
        log.append(1, started(), &l).unwrap();
        log.append(2, started(), &l).unwrap();
        assert_eq!(log.retained().count(), 1);
        assert_eq!(log.oldest_cursor(), EventSeq::new(1));
    }

    #[test]
    fn events_serialize_with_wire_names() {
        let run = RunId::generate();
        let e = Event {
            seq: EventSeq::new(4),
            at_ms: 9,
            body: EventBody::StopRequested {
                run_id: run,
                cleared_queued: 2,
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "stop_requested");
        assert_eq!(v["clearedQueued"], 2);
        assert_eq!(v["runId"], run.to_string());
    }
}
