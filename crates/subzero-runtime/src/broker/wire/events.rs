//! Events typed end to end: a worker's report becomes the core's [`EventBody`], which the
//! store keeps, and a stored event becomes the wire `ChildEvent` of the same type.
//!
//! Both conversions are matches over closed enums, so an event type added on one side
//! only is a compile error here, never a wrong document on the wire; a stored value the
//! contract refuses (a text over its bound, say) is `internal`, naming the event.

use std::num::NonZeroU64;

use serde_json::Value;
use subzero_core::events::{EventBody, EventKind, SteerDiscardReason, ToolState};
use subzero_core::{ChildId, RunId};
use subzero_protocol as p;

use super::{broken, wire};
use crate::broker::BrokerError;
use crate::store::{EventGap, EventRow, Timestamp};

/// Whether an event of `kind` also ends a `subzero_get` wait with `waitFor: settled`:
/// the receipt of a stop or a steer the caller is waiting for.
pub(in crate::broker) fn is_receipt(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::StopConfirmed | EventKind::SteerApplied | EventKind::SteerDiscarded
    )
}

fn tool_state(state: p::ToolState) -> ToolState {
    match state {
        p::ToolState::Started => ToolState::Started,
        p::ToolState::Finished => ToolState::Finished,
        p::ToolState::Failed => ToolState::Failed,
    }
}

fn wire_tool_state(state: ToolState) -> p::ToolState {
    match state {
        ToolState::Started => p::ToolState::Started,
        ToolState::Finished => p::ToolState::Finished,
        ToolState::Failed => p::ToolState::Failed,
    }
}

fn discard_reason(reason: p::SteerDiscardReason) -> SteerDiscardReason {
    match reason {
        p::SteerDiscardReason::Stopped => SteerDiscardReason::Stopped,
        p::SteerDiscardReason::Failed => SteerDiscardReason::Failed,
        p::SteerDiscardReason::Limit => SteerDiscardReason::Limit,
        p::SteerDiscardReason::Interrupted => SteerDiscardReason::Interrupted,
        p::SteerDiscardReason::NotActive => SteerDiscardReason::NotActive,
    }
}

fn wire_discard_reason(reason: SteerDiscardReason) -> p::SteerDiscardReason {
    match reason {
        SteerDiscardReason::Stopped => p::SteerDiscardReason::Stopped,
        SteerDiscardReason::Failed => p::SteerDiscardReason::Failed,
        SteerDiscardReason::Limit => p::SteerDiscardReason::Limit,
        SteerDiscardReason::Interrupted => p::SteerDiscardReason::Interrupted,
        SteerDiscardReason::NotActive => p::SteerDiscardReason::NotActive,
    }
}

/// The event a worker's report about `run` records: the worker event's own fields, as
/// the `ChildEvent` of the same type has them (model text is stored whole, `truncated:
/// false`). A turn that started records none: it is a phase, not an event.
pub(in crate::broker) fn recorded(run_id: RunId, event: &p::WorkerEvent) -> Option<EventBody> {
    Some(match event {
        // Recorded through the core's decision instead (`Store::record_compaction`).
        p::WorkerEvent::TurnStarted { .. } | p::WorkerEvent::Compacted { .. } => return None,
        p::WorkerEvent::Text { text } => EventBody::Text {
            run_id,
            text: text.as_str().to_owned(),
            truncated: false,
        },
        p::WorkerEvent::Tool { name, state } => EventBody::Tool {
            run_id,
            name: name.as_str().to_owned(),
            state: tool_state(*state),
        },
        p::WorkerEvent::NetworkRefused { host, port } => EventBody::NetworkRefused {
            run_id,
            host: host.as_str().to_owned(),
            port: u16::try_from(port.get()).ok()?,
        },
        p::WorkerEvent::SteerApplied {
            request_id,
            steer_id,
        } => EventBody::SteerApplied {
            run_id,
            steer_id: steer_id.as_str().to_owned(),
            request_id: request_id.as_ref().map(|r| r.as_str().to_owned()),
        },
        p::WorkerEvent::SteerDiscarded {
            reason,
            request_id,
            steer_id,
        } => EventBody::SteerDiscarded {
            run_id,
            steer_id: steer_id.as_str().to_owned(),
            request_id: request_id.as_ref().map(|r| r.as_str().to_owned()),
            reason: discard_reason(*reason),
        },
    })
}

/// A stored event as the typed `ChildEvent` a snapshot carries. The event is what the
/// store holds (written by this or another broker), so the wire's bounds are checked
/// like any stored document's; one the contract refuses is `internal`, naming the event.
impl TryFrom<&EventRow> for p::ChildEvent {
    type Error = BrokerError;
    fn try_from(row: &EventRow) -> Result<Self, BrokerError> {
        let what = format!(
            "stored event {} ({}) of child {}",
            row.seq.get(),
            row.body.kind(),
            row.child_id
        );
        let what = what.as_str();
        let seq = NonZeroU64::new(row.seq.get()).ok_or_else(|| broken(what, "seq", "is 0"))?;
        let (at, child_id) = (Some(row.at.clone()), Some(p::ChildId::from(row.child_id)));
        Ok(match &row.body {
            EventBody::RunQueued { run_id, position } => p::ChildEvent::RunQueued {
                at,
                child_id,
                position: NonZeroU64::new(u64::from(*position))
                    .ok_or_else(|| broken(what, "position", "is 0"))?,
                run_id: Some((*run_id).into()),
                seq,
            },
            EventBody::RunStarted { run_id } => p::ChildEvent::RunStarted {
                at,
                child_id,
                run_id: Some((*run_id).into()),
                seq,
            },
            EventBody::Text {
                run_id,
                text,
                truncated,
            } => p::ChildEvent::Text {
                at,
                child_id,
                run_id: Some((*run_id).into()),
                seq,
                text: wire(text.as_str(), what, "text")?,
                truncated: *truncated,
            },
            EventBody::Tool {
                run_id,
                name,
                state,
            } => p::ChildEvent::Tool {
                at,
                child_id,
                name: wire(name.as_str(), what, "name")?,
                run_id: Some((*run_id).into()),
                seq,
                state: wire_tool_state(*state),
            },
            EventBody::NetworkRefused { run_id, host, port } => p::ChildEvent::NetworkRefused {
                at,
                child_id,
                host: wire(host.as_str(), what, "host")?,
                port: NonZeroU64::new(u64::from(*port))
                    .ok_or_else(|| broken(what, "port", "is 0"))?
                    .into(),
                run_id: Some((*run_id).into()),
                seq,
            },
            EventBody::Compacted {
                run_id,
                tokens_before,
                tokens_after,
                branch_from,
            } => p::ChildEvent::Compacted {
                at,
                branch_from: wire(branch_from.as_str(), what, "branchFrom")?,
                child_id,
                run_id: Some((*run_id).into()),
                seq,
                tokens_after: *tokens_after,
                tokens_before: *tokens_before,
            },
            other => settlement_or_steer(other, what, at, child_id, seq)?,
        })
    }
}

/// The wire form of the steer, stop and settlement events (see the `TryFrom` above).
fn settlement_or_steer(
    body: &EventBody,
    what: &str,
    at: Option<Timestamp>,
    child_id: Option<p::ChildId>,
    seq: NonZeroU64,
) -> Result<p::ChildEvent, BrokerError> {
    let request = |id: &Option<String>| -> Result<Option<p::RequestId>, BrokerError> {
        id.as_deref()
            .map(|r| wire(r, what, "requestId"))
            .transpose()
    };
    Ok(match body {
        EventBody::SteerApplied {
            run_id,
            steer_id,
            request_id,
        } => p::ChildEvent::SteerApplied {
            at,
            child_id,
            request_id: request(request_id)?,
            run_id: Some((*run_id).into()),
            seq,
            steer_id: wire(steer_id.as_str(), what, "steerId")?,
        },
        EventBody::SteerDiscarded {
            run_id,
            steer_id,
            request_id,
            reason,
        } => p::ChildEvent::SteerDiscarded {
            at,
            child_id,
            reason: wire_discard_reason(*reason),
            request_id: request(request_id)?,
            run_id: Some((*run_id).into()),
            seq,
            steer_id: wire(steer_id.as_str(), what, "steerId")?,
        },
        EventBody::StopRequested {
            run_id,
            cleared_queued,
        } => p::ChildEvent::StopRequested {
            at,
            child_id,
            cleared_queued: u64::from(*cleared_queued),
            run_id: Some((*run_id).into()),
            seq,
        },
        EventBody::StopConfirmed { run_id, reaped } => p::ChildEvent::StopConfirmed {
            at,
            child_id,
            reaped: u64::from(*reaped),
            run_id: Some((*run_id).into()),
            seq,
        },
        other => terminal(other, what, at, child_id, seq)?,
    })
}

/// The wire form of the events that end a run.
fn terminal(
    body: &EventBody,
    what: &str,
    at: Option<Timestamp>,
    child_id: Option<p::ChildId>,
    seq: NonZeroU64,
) -> Result<p::ChildEvent, BrokerError> {
    Ok(match body {
        EventBody::Completed {
            run_id,
            artifact_id,
            preview,
            preview_truncated,
        } => p::ChildEvent::Completed {
            artifact_id: (*artifact_id).into(),
            at,
            child_id,
            preview: Some(wire(preview.as_str(), what, "preview")?),
            preview_truncated: Some(*preview_truncated),
            run_id: Some((*run_id).into()),
            seq,
        },
        EventBody::BudgetExhausted {
            run_id,
            artifact_id,
            preview,
            preview_truncated,
            budget_reached,
        } => p::ChildEvent::BudgetExhausted {
            artifact_id: (*artifact_id).into(),
            at,
            budget_reached: budget_reached.into(),
            child_id,
            preview: Some(wire(preview.as_str(), what, "preview")?),
            preview_truncated: Some(*preview_truncated),
            run_id: Some((*run_id).into()),
            seq,
        },
        EventBody::Failed {
            run_id,
            code,
            message,
        } => p::ChildEvent::Failed {
            at,
            child_id,
            code: (*code).into(),
            message: wire(message.as_str(), what, "message")?,
            run_id: Some((*run_id).into()),
            seq,
        },
        EventBody::Interrupted { run_id, reason } => p::ChildEvent::Interrupted {
            at,
            child_id,
            reason: wire(reason.as_str(), what, "reason")?,
            run_id: run_id.map(Into::into),
            seq,
        },
        other => {
            return Err(broken(
                what,
                "type",
                format!("{} is not an event that ends a run", other.kind()),
            ));
        }
    })
}

/// The explicit gap marker, placed where the pruned events would have been: its seq is
/// the oldest cursor (the last pruned seq).
pub(in crate::broker) fn gap_marker(
    child: ChildId,
    gap: EventGap,
    at: Timestamp,
) -> Result<p::ChildEvent, BrokerError> {
    Ok(p::ChildEvent::Gap {
        at: Some(at),
        child_id: Some(child.into()),
        oldest: gap.oldest.get(),
        requested: gap.requested.get(),
        seq: NonZeroU64::new(gap.oldest.get()).unwrap_or(NonZeroU64::MIN),
    })
}

/// `event` as the JSON document a stream carries.
pub(in crate::broker) fn to_value(event: &p::ChildEvent) -> Result<Value, BrokerError> {
    serde_json::to_value(event)
        .map_err(|e| BrokerError::internal(format!("cannot encode an event: {e}")))
}

/// Now as a wire timestamp.
pub(in crate::broker) fn timestamp_now() -> Result<Timestamp, BrokerError> {
    wire(subzero_protocol::timestamp::now(), "event", "at")
}

#[cfg(test)]
mod tests {
    use subzero_core::EventSeq;

    use super::*;

    fn row(body: EventBody) -> EventRow {
        EventRow {
            child_id: ChildId::generate(),
            seq: EventSeq::new(7),
            at: Timestamp::try_from("2026-01-02T03:04:05.678Z").expect("a timestamp"),
            body,
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
            let body = recorded(RunId::generate(), &event).expect("recorded");
            let kind = body.kind();
            let read =
                p::ChildEvent::try_from(&row(body)).unwrap_or_else(|e| panic!("{line}: {e}"));
            let wire = serde_json::to_value(&read).expect("encodes");
            assert_eq!(wire["type"], kind.as_str(), "{line}");
        }
        let turn: p::WorkerEvent =
            serde_json::from_str(r#"{"kind":"turn_started","turn":1}"#).expect("a worker event");
        assert_eq!(recorded(RunId::generate(), &turn), None);
    }

    #[test]
    fn a_stored_event_the_contract_refuses_is_internal_naming_the_field() {
        let long = EventBody::Text {
            run_id: RunId::generate(),
            text: "x".repeat(5000),
            truncated: false,
        };
        let err = p::ChildEvent::try_from(&row(long)).expect_err("over the text bound");
        assert_eq!(err.code(), subzero_core::ErrorCode::Internal);
        assert!(err.message().contains("at text"), "{}", err.message());
    }

    #[test]
    fn the_gap_marker_is_a_wire_gap_event() {
        let gap = EventGap {
            requested: EventSeq::new(2),
            oldest: EventSeq::new(9),
        };
        let at = Timestamp::try_from("2026-01-02T03:04:05.678Z").expect("a timestamp");
        let marker = gap_marker(ChildId::generate(), gap, at).expect("a marker");
        assert!(
            matches!(
                marker,
                p::ChildEvent::Gap {
                    oldest: 9,
                    requested: 2,
                    ..
                }
            ),
            "{marker:?}"
        );
    }
}
