//! Stored event rows as wire `ChildEvent`s.

use serde_json::{Map, Value};
use subzero_core::ChildId;
use subzero_protocol as p;

use super::BrokerError;
use crate::store::{EventGap, EventRow};

/// Event types a `subzero_get` wait with `waitFor: settled` also ends on: receipts of
/// a stop or a steer the caller is waiting for.
pub(super) const RECEIPTS: [&str; 3] = ["stop_confirmed", "steer_applied", "steer_discarded"];

/// The wire form of a stored event: its envelope plus its stored payload.
pub(super) fn to_wire(row: &EventRow) -> Value {
    let mut event = Map::new();
    event.insert("seq".into(), Value::from(row.seq.get()));
    event.insert("at".into(), Value::String(row.at.clone()));
    event.insert("childId".into(), Value::String(row.child_id.to_string()));
    if let Some(run) = row.run_id {
        event.insert("runId".into(), Value::String(run.to_string()));
    }
    event.insert("type".into(), Value::String(row.kind.clone()));
    if let Value::Object(payload) = &row.payload {
        for (key, value) in payload {
            if !value.is_null() {
                event.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(event)
}

/// A stored event as the typed `ChildEvent` a snapshot carries. The payload is what the
/// store holds (written by this or another broker), so it is parsed like any stored
/// document; one the contract refuses is `internal`, naming the event.
impl TryFrom<&EventRow> for p::ChildEvent {
    type Error = BrokerError;
    fn try_from(row: &EventRow) -> Result<Self, BrokerError> {
        serde_json::from_value(to_wire(row)).map_err(|e| {
            BrokerError::internal(format!(
                "stored event {} ({}) of child {} breaks the contract: {e}",
                row.seq.get(),
                row.kind,
                row.child_id
            ))
        })
    }
}

/// The explicit gap marker of a subscription stream, placed where the pruned events
/// would have been. Its keys come in the order of [`to_wire`]'s envelope.
pub(super) fn gap_marker(child: ChildId, gap: EventGap, at: &str) -> Value {
    let mut event = Map::new();
    event.insert("seq".into(), Value::from(gap.oldest.get().max(1)));
    event.insert("at".into(), Value::String(at.to_owned()));
    event.insert("childId".into(), Value::String(child.to_string()));
    event.insert("type".into(), Value::String("gap".into()));
    event.insert("requested".into(), Value::from(gap.requested.get()));
    event.insert("oldest".into(), Value::from(gap.oldest.get()));
    Value::Object(event)
}

/// The event type and stored payload of a worker event: the worker event's own fields,
/// which are the fields of the `ChildEvent` of the same type (the store adds the envelope:
/// `seq`, `at`, `childId`, `runId`). Model text is stored whole (`truncated: false`).
pub(super) fn stored(event: &p::WorkerEvent) -> Result<(&'static str, Value), serde_json::Error> {
    let kind = match event {
        p::WorkerEvent::TurnStarted { .. } => "turn_started",
        p::WorkerEvent::Text { .. } => "text",
        p::WorkerEvent::Tool { .. } => "tool",
        p::WorkerEvent::SteerApplied { .. } => "steer_applied",
        p::WorkerEvent::SteerDiscarded { .. } => "steer_discarded",
    };
    let mut payload = serde_json::to_value(event)?;
    if let Value::Object(fields) = &mut payload {
        // The worker event's discriminator; the stored event's type is its own column.
        fields.remove("kind");
        if matches!(event, p::WorkerEvent::Text { .. }) {
            fields.insert("truncated".into(), Value::Bool(false));
        }
    }
    Ok((kind, payload))
}

/// Now as a wire timestamp.
pub(super) fn timestamp_now() -> String {
    subzero_protocol::timestamp::now()
}

#[cfg(test)]
mod tests {
    use subzero_core::{EventSeq, RunId};

    use super::*;

    fn row(kind: &str, payload: Value) -> EventRow {
        EventRow {
            child_id: ChildId::generate(),
            seq: EventSeq::new(7),
            at: "2026-01-02T03:04:05.678Z".into(),
            run_id: Some(RunId::generate()),
            kind: kind.into(),
            payload,
        }
    }

    #[test]
    fn every_recorded_worker_event_reads_back_as_the_child_event_of_its_type() {
        let worker_events = [
            r#"{"kind":"text","text":"reading"}"#,
            r#"{"kind":"tool","name":"grep","state":"started"}"#,
            r#"{"kind":"steer_applied","steerId":"st_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D"}"#,
            r#"{"kind":"steer_applied","steerId":"st_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D","requestId":"r-1"}"#,
            r#"{"kind":"steer_discarded","steerId":"st_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D","reason":"stopped"}"#,
        ];
        for line in worker_events {
            let event: p::WorkerEvent = serde_json::from_str(line).expect("a worker event");
            let (kind, payload) = stored(&event).expect("encodes");
            let read = p::ChildEvent::try_from(&row(kind, payload))
                .unwrap_or_else(|e| panic!("{line}: {e}"));
            let wire = serde_json::to_value(&read).expect("encodes");
            assert_eq!(wire["type"], kind, "{line}");
        }
    }

    #[test]
    fn the_gap_marker_is_a_wire_gap_event() {
        let gap = EventGap {
            requested: EventSeq::new(2),
            oldest: EventSeq::new(9),
        };
        let marker = gap_marker(ChildId::generate(), gap, "2026-01-02T03:04:05.678Z");
        let parsed: p::ChildEvent = serde_json::from_value(marker).expect("a child event");
        assert!(
            matches!(
                parsed,
                p::ChildEvent::Gap {
                    oldest: 9,
                    requested: 2,
                    ..
                }
            ),
            "{parsed:?}"
        );
    }
}
