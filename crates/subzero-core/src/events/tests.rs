//! Tests of event bodies and the event log.

use super::*;
use crate::ids::{ChildId, EventSeq, RunId};
use crate::limits::Limits;

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
        // A `run_started` payload is `{}`: two of them are over three bytes.
        max_bytes: 3,
    };
    let mut log = EventLog::new(ChildId::generate(), retention);
    let l = Limits::default();
    log.append(1, started(), &l).unwrap();
    assert_eq!(log.retained().count(), 1);
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

fn every_kind_of_body() -> Vec<EventBody> {
    let run_id = RunId::generate();
    let artifact_id = crate::ids::ArtifactId::generate();
    vec![
        EventBody::RunQueued {
            run_id,
            position: 2,
        },
        EventBody::RunStarted { run_id },
        EventBody::Text {
            run_id,
            text: "reading".into(),
            truncated: false,
        },
        EventBody::Tool {
            run_id,
            name: "grep".into(),
            state: ToolState::Started,
        },
        EventBody::SteerApplied {
            run_id,
            steer_id: "st_1".into(),
            request_id: Some("r-1".into()),
        },
        EventBody::SteerDiscarded {
            run_id,
            steer_id: "st_2".into(),
            request_id: None,
            reason: SteerDiscardReason::Stopped,
        },
        EventBody::Compacted {
            run_id,
            tokens_before: 1700,
            tokens_after: 420,
            branch_from: "e_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D".into(),
        },
        EventBody::StopRequested {
            run_id,
            cleared_queued: 3,
        },
        EventBody::StopConfirmed { run_id, reaped: 1 },
        EventBody::NetworkRefused {
            run_id,
            host: "pypi.org".into(),
            port: 443,
        },
        EventBody::Completed {
            run_id,
            artifact_id,
            preview: "done".into(),
            preview_truncated: false,
        },
        EventBody::BudgetExhausted {
            run_id,
            artifact_id,
            preview: "summary".into(),
            preview_truncated: true,
            budget_reached: crate::budget::BudgetReached {
                budget: crate::budget::BudgetName::MaxTurns,
                limit: 4,
                reached: 4,
            },
        },
        EventBody::Failed {
            run_id,
            code: ErrorCode::ModelRequestFailed,
            message: "503".into(),
        },
        EventBody::Interrupted {
            run_id: None,
            reason: "broker_lost".into(),
        },
    ]
}

#[test]
fn every_body_round_trips_through_its_stored_form() {
    let bodies = every_kind_of_body();
    assert_eq!(bodies.len(), EventKind::ALL.len(), "one body per kind");
    for body in bodies {
        let stored = body.to_stored();
        assert_eq!(stored.kind, body.kind());
        assert_eq!(stored.run, body.run_id());
        assert_eq!(EventKind::parse(stored.kind.as_str()), Some(stored.kind));
        assert!(
            !stored.payload.contains("\"type\"") && !stored.payload.contains("\"runId\""),
            "the envelope is not payload: {}",
            stored.payload
        );
        assert_eq!(body.payload_bytes(), stored.payload.len());
        assert_eq!(EventBody::from_stored(&stored).unwrap(), body);
    }
}

#[test]
fn a_stored_payload_of_another_kind_is_refused() {
    let stored = StoredEvent {
        kind: EventKind::Completed,
        run: Some(RunId::generate()),
        payload: "{\"position\":1}".into(),
    };
    let err = EventBody::from_stored(&stored).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal);
    let not_object = StoredEvent {
        payload: "[1]".into(),
        ..stored
    };
    assert!(EventBody::from_stored(&not_object).is_err());
}

#[test]
fn retention_drops_by_count_then_by_bytes_and_keeps_the_newest() {
    let r = Retention {
        max_events: 3,
        max_bytes: 100,
    };
    assert_eq!(r.excess(2), 0);
    assert_eq!(r.excess(5), 2);
    assert!(!r.over_bytes(1, 10_000), "the newest event is always kept");
    assert!(r.over_bytes(2, 101));
    assert!(!r.over_bytes(2, 100));
}

#[test]
fn a_window_starts_at_the_cursor_or_reports_the_gap() {
    let w = Window::of(EventSeq::new(5), EventSeq::new(2));
    assert_eq!((w.from, w.gap), (EventSeq::new(5), None));
    assert_eq!(w.next_cursor(None), EventSeq::new(5));
    let w = Window::of(EventSeq::new(1), EventSeq::new(4));
    assert_eq!(w.from, EventSeq::new(4));
    assert_eq!(
        w.gap,
        Some(Gap {
            requested: EventSeq::new(1),
            oldest: EventSeq::new(4)
        })
    );
    assert_eq!(w.next_cursor(Some(EventSeq::new(9))), EventSeq::new(9));
    assert_eq!(cursor_before(EventSeq::new(1)), EventSeq::START);
}
