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

/// Now as an RFC 3339 UTC timestamp with milliseconds (`2026-11-29T20:05:36.123Z`).
pub(super) fn timestamp_now() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_counts_map_to_calendar_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
    }

    #[test]
    fn timestamps_have_the_wire_shape() {
        let ts = timestamp_now();
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{ts}");
    }
}
