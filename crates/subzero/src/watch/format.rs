//! Short renderings for narrow columns: durations, token counts, times, ids.

use crate::terminal_text::Printing;

/// Milliseconds since the Unix epoch of a wire timestamp (`2026-11-29T20:05:36.123Z`, the
/// contract's RFC 3339 UTC form); `None` for anything else.
pub fn epoch_ms(at: &str) -> Option<i64> {
    let b = at.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !at.ends_with('Z') {
        return None;
    }
    let num = |range: std::ops::Range<usize>| at.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let millis = match at.get(19..at.len() - 1) {
        Some("") => 0,
        Some(frac) if frac.starts_with('.') && frac.len() > 1 => {
            let digits: String = frac[1..].chars().chain("00".chars()).take(3).collect();
            digits.parse::<i64>().ok()?
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm; the
/// inverse of `subzero_protocol::timestamp::civil_from_days`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A duration as at most three or four significant characters plus units:
/// `0s`, `42s`, `3m04s`, `1h02m`, `3d04h`.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A token count in four characters or fewer: `812`, `4.5k`, `12k`, `1.2M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..9950 => format!("{:.1}k", n as f64 / 1000.0),
        9950..999_500 => format!("{}k", (n + 500) / 1000),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// `HH:MM:SS` of a wire timestamp (UTC, as stored), or the text itself when it is not one.
pub fn clock(at: &str) -> String {
    at.get(11..19)
        .filter(|_| epoch_ms(at).is_some())
        .unwrap_or(at)
        .to_owned()
}

/// The tail of an id that tells children apart in a list: `…` and the last `n` characters
/// (the random part of the ULID).
pub fn short_id(id: &str, n: usize) -> String {
    let count = id.chars().count();
    if count <= n + 1 {
        return id.to_owned();
    }
    let tail: String = id.chars().skip(count - n).collect();
    format!("…{tail}")
}

/// `text` as a one-line field of `printing` (escaped in the terminal view, control
/// characters as spaces in the piped board, so a cell can neither break the layout nor act
/// on the terminal), cut to `width` characters, ending in `…` when cut.
pub fn fit(text: &str, width: usize, printing: Printing) -> String {
    let clean = printing.field(text);
    if clean.chars().count() <= width {
        return clean.into_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut cut: String = clean.chars().take(width - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_timestamps_parse_to_epoch_milliseconds() {
        assert_eq!(epoch_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            epoch_ms("2026-11-29T20:25:36.123Z"),
            Some(1_795_983_936_123)
        );
        assert_eq!(epoch_ms("2026-11-29T20:25:36Z"), Some(1_795_983_936_000));
        assert_eq!(epoch_ms("2000-02-29T00:00:00.5Z"), Some(951_782_400_500));
        assert_eq!(epoch_ms("yesterday"), None);
        assert_eq!(epoch_ms("2026-11-29 20:25:36.123Z"), None);
    }

    #[test]
    fn durations_fit_six_characters() {
        assert_eq!(duration(-5), "0s");
        assert_eq!(duration(42_900), "42s");
        assert_eq!(duration(184_000), "3m04s");
        assert_eq!(duration(3_720_000), "1h02m");
        assert_eq!(duration(273_600_000), "3d04h");
    }

    #[test]
    fn token_counts_fit_four_characters() {
        assert_eq!(tokens(812), "812");
        assert_eq!(tokens(4_520), "4.5k");
        assert_eq!(tokens(12_400), "12k");
        assert_eq!(tokens(1_230_000), "1.2M");
    }

    #[test]
    fn ids_and_cells_are_cut_with_an_ellipsis() {
        assert_eq!(short_id("ch_01JH8Z6Q2V3W4X5Y6Z7A8B9C0D", 6), "…8B9C0D");
        assert_eq!(short_id("ch_1", 6), "ch_1");
        assert_eq!(fit("researcher", 10, Printing::Escaped), "researcher");
        assert_eq!(fit("researchers", 10, Printing::Escaped), "researche…");
        assert_eq!(fit("a\tb\nc", 10, Printing::Piped), "a b c");
        assert_eq!(fit("a\tb\nc", 10, Printing::Escaped), "a\\tb\\nc");
        assert_eq!(
            fit("x\x1b]0;t\x07\u{202e}y", 40, Printing::Escaped),
            "x\\x1b]0;t\\x07\\u{202e}y"
        );
        assert_eq!(fit("\x1b[2J clear", 6, Printing::Escaped), "\\x1b[…");
        assert_eq!(clock("2026-11-29T20:25:36.123Z"), "20:25:36");
    }
}
