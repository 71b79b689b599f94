//! A single pass over a JSON text that never recurses: its nesting depth, the `id` member of
//! its top-level object (also in a frame too deep or too broken for a parser), and lone
//! UTF-16 surrogate escapes rewritten as U+FFFD.

use serde_json::Value;

/// What one pass found.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// Deepest nesting of arrays and objects (a top-level object is depth 1).
    pub depth: usize,
    /// The raw text of the top-level object's `id` value, when it is a number or string.
    id: Option<(usize, usize)>,
    /// Byte ranges of lone surrogate escapes (`\uD800`..`\uDFFF` without its partner).
    lone_surrogates: Vec<(usize, usize)>,
}

impl Scan {
    /// The top-level `id` as JSON (`null` when there is none or it cannot be read).
    pub fn id(&self, text: &[u8]) -> Value {
        self.id
            .and_then(|(start, end)| serde_json::from_slice::<Value>(&text[start..end]).ok())
            .filter(|v| v.is_number() || v.is_string())
            .unwrap_or(Value::Null)
    }

    /// `text` with every lone surrogate escape replaced by `\uFFFD`; `None` when it has none.
    pub fn repaired(&self, text: &str) -> Option<String> {
        if self.lone_surrogates.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for &(start, end) in &self.lone_surrogates {
            out.push_str(&text[at..start]);
            out.push_str("\\uFFFD");
            at = end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }
}

/// Scans `text` (which may be cut short or invalid: the scan reports what it saw).
pub(super) fn scan(text: &[u8]) -> Scan {
    let mut found = Scan::default();
    let mut depth = 0usize;
    // At depth 1 inside an object: whether the next string is a key, and the last key.
    let mut expect_key = false;
    let mut last_key_is_id = false;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'{' => {
                depth += 1;
                found.depth = found.depth.max(depth);
                expect_key = depth == 1;
            }
            b'[' => {
                depth += 1;
                found.depth = found.depth.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect_key = true,
            b':' if depth == 1 => {
                if last_key_is_id && found.id.is_none() {
                    found.id = value_span(text, i + 1);
                }
                last_key_is_id = false;
            }
            b'"' => {
                let end = string_end(text, i, &mut found.lone_surrogates);
                if depth == 1 && expect_key {
                    last_key_is_id = &text[i..end.min(text.len())] == b"\"id\"";
                    expect_key = false;
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// Index just past the string that starts at `start` (a `"`), noting lone surrogates.
fn string_end(text: &[u8], start: usize, lone: &mut Vec<(usize, usize)>) -> usize {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'"' => return i + 1,
            b'\\' if text.get(i + 1) == Some(&b'u') => {
                match (hex4(text, i + 2), hex4(text, i + 8)) {
                    (Some(0xD800..=0xDBFF), Some(0xDC00..=0xDFFF))
                        if text.get(i + 6) == Some(&b'\\') && text.get(i + 7) == Some(&b'u') =>
                    {
                        i += 12;
                    }
                    (Some(0xD800..=0xDFFF), _) => {
                        lone.push((i, i + 6));
                        i += 6;
                    }
                    _ => i += 2,
                }
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    text.len()
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 4)?;
    let digits = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// The span of a number or string value starting after `from` (whitespace skipped).
fn value_span(text: &[u8], from: usize) -> Option<(usize, usize)> {
    let start = from
        + text
            .get(from..)?
            .iter()
            .position(|b| !b.is_ascii_whitespace())?;
    match text[start] {
        b'"' => {
            let end = string_end(text, start, &mut Vec::new());
            (end <= text.len() && text[end - 1] == b'"' && end > start + 1).then_some((start, end))
        }
        b'-' | b'0'..=b'9' => {
            let len = text[start..]
                .iter()
                .position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                .unwrap_or(text.len() - start);
            Some((start, start + len))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_and_id_of_a_well_formed_request() {
        let text = br#"{"jsonrpc":"2.0","params":{"id":"inner","a":[[1]]},"id":42,"method":"x"}"#;
        let found = scan(text);
        assert_eq!(found.depth, 4);
        assert_eq!(found.id(text), json!(42));
    }

    #[test]
    fn the_id_is_found_in_a_cut_or_too_deep_frame() {
        let text = br#"{"jsonrpc":"2.0","id":"req-7","params":{"x":[[[[[[["#;
        let found = scan(text);
        assert_eq!(found.id(text), json!("req-7"));
        assert_eq!(found.depth, 9);
        assert_eq!(scan(b"[1,2]").id(b"[1,2]"), Value::Null);
    }

    #[test]
    fn keys_and_strings_containing_braces_do_not_confuse_it() {
        let text = br#"{"a":"{\"id\":1}","b\"id":2,"id":3}"#;
        assert_eq!(scan(text).id(text), json!(3));
        assert_eq!(scan(text).depth, 1);
    }

    #[test]
    fn lone_surrogates_become_replacement_characters_and_pairs_stay() {
        let text = r#"{"a":"x\ud800y","b":"\ud83d\ude00","c":"\udc00","d":"\\ud800"}"#;
        let found = scan(text.as_bytes());
        let repaired = found.repaired(text).expect("repaired");
        let value: Value = serde_json::from_str(&repaired).expect("parses");
        assert_eq!(value["a"], "x\u{FFFD}y");
        assert_eq!(value["b"], "😀");
        assert_eq!(value["c"], "\u{FFFD}");
        assert_eq!(value["d"], "\\ud800");
        assert!(scan(br#"{"a":"\ud83d\ude00"}"#).repaired("").is_none());
    }
}
