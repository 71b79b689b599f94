//! Stored event rows as wire `ChildEvent`s.

use serde_json::{Map, Value};
use subzero_core::ChildId;

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

/// The explicit gap marker of a subscription stream, placed where the pruned events
/// would have been.
pub(super) fn gap_marker(child: ChildId, gap: EventGap, at: &str) -> Value {
    serde_json::json!({
        "seq": gap.oldest.get().max(1),
        "at": at,
        "childId": child.to_string(),
        "type": "gap",
        "requested": gap.requested.get(),
        "oldest": gap.oldest.get(),
    })
}

/// Now as a wire timestamp.
pub(super) fn timestamp_now() -> String {
    subzero_protocol::timestamp::now()
}
