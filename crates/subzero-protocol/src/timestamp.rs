//! The contract's timestamp format (`Timestamp` in `common.schema.json`): RFC 3339 UTC
//! with milliseconds, e.g. `2026-11-29T20:05:36.123Z`, written without a date-time
//! dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// `at` as a wire timestamp. Times before 1970 are written as the epoch.
pub fn rfc3339_millis(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Now as a wire timestamp.
pub fn now() -> String {
    rfc3339_millis(SystemTime::now())
}

/// Proleptic Gregorian `(year, month, day)` of a day count since 1970-01-01 (Howard
/// Hinnant's civil-from-days algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn day_counts_map_to_calendar_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
    }

    #[test]
    fn timestamps_have_the_wire_shape() {
        let at = UNIX_EPOCH + Duration::from_millis(1_795_983_936_123);
        assert_eq!(rfc3339_millis(at), "2026-11-29T20:25:36.123Z");
        let parsed: crate::Timestamp =
            serde_json::from_value(serde_json::json!(now())).expect("a wire timestamp");
        assert_eq!(parsed.len(), 24);
    }
}
