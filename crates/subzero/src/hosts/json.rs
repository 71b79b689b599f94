//! JSON host files (Claude Code, OpenCode, Pi): parse with key order kept, upsert the `subzero`
//! entry, and write back with the file's own indentation so untouched entries keep their bytes
//! when the file was pretty-printed the usual way (one key per line).
//!
//! Limits, stated rather than hidden: compact or hand-aligned JSON is re-indented; numbers are
//! re-printed by `serde_json` (`1e3` becomes `1000.0`); comments and trailing commas (JSONC) are
//! refused with [`HostsError::JsoncNotSupported`] instead of being dropped.

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Field, HostsError};

/// A parsed JSON object document and how it was laid out.
#[derive(Debug)]
pub(super) struct JsonDoc {
    root: Map<String, Value>,
    indent: String,
    trailing_newline: bool,
}

/// What [`JsonDoc::upsert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Unchanged,
    Changed,
}

impl JsonDoc {
    /// Parses `text` (`None`: the file does not exist; blank text counts as an empty object).
    pub(super) fn parse(
        path: &Path,
        text: Option<&str>,
        host: &'static str,
    ) -> Result<Self, HostsError> {
        let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
            return Ok(JsonDoc {
                root: Map::new(),
                indent: "  ".to_owned(),
                trailing_newline: true,
            });
        };
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(err) => {
                return Err(match find_jsonc_feature(text) {
                    Some((line, what)) => HostsError::JsoncNotSupported {
                        path: path.to_path_buf(),
                        line,
                        what,
                        host,
                    },
                    None => HostsError::InvalidJson {
                        path: path.to_path_buf(),
                        message: err.to_string(),
                    },
                });
            }
        };
        let Value::Object(root) = value else {
            return Err(HostsError::UnexpectedShape {
                path: path.to_path_buf(),
                key: "(top level)".to_owned(),
                found: type_name(&value),
                expected: "an object",
            });
        };
        Ok(JsonDoc {
            root,
            indent: detect_indent(text),
            trailing_newline: text.ends_with('\n'),
        })
    }

    /// True when the document has no keys (a new or blank file).
    pub(super) fn is_empty(&self) -> bool {
        self.root.is_empty()
    }

    /// The value at `path` (object keys), if every step exists.
    pub(super) fn get(&self, path: &[&str]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        rest.iter()
            .try_fold(self.root.get(*first)?, |value, key| value.get(key))
    }

    /// Inserts `key: value` at the top level when absent (e.g. OpenCode's `$schema`).
    pub(super) fn insert_if_absent(&mut self, key: &str, value: Value) {
        if !self.root.contains_key(key) {
            self.root.insert(key.to_owned(), value);
        }
    }

    /// Makes `container.name` an object holding `fields`.
    ///
    /// Fields subzero does not manage are left alone. An existing entry whose managed fields
    /// differ is refused unless `force`, which then replaces only those fields.
    pub(super) fn upsert(
        &mut self,
        path: &Path,
        container: &[&str],
        name: &str,
        fields: &[(&'static str, Field)],
        force: bool,
    ) -> Result<Change, HostsError> {
        let mut map = &mut self.root;
        for (depth, key) in container.iter().enumerate() {
            let slot = map
                .entry((*key).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            let found = type_name(slot);
            map = slot
                .as_object_mut()
                .ok_or_else(|| HostsError::UnexpectedShape {
                    path: path.to_path_buf(),
                    key: container[..=depth].join("."),
                    found,
                    expected: "an object",
                })?;
        }
        let Some(existing) = map.get_mut(name) else {
            let entry = fields
                .iter()
                .map(|(key, field)| ((*key).to_owned(), to_json(field)))
                .collect();
            map.insert(name.to_owned(), Value::Object(entry));
            return Ok(Change::Changed);
        };
        let wanted = || {
            pretty(&Value::Object(
                fields
                    .iter()
                    .map(|(k, f)| ((*k).to_owned(), to_json(f)))
                    .collect(),
            ))
        };
        let Some(entry) = existing.as_object_mut() else {
            return Err(HostsError::ConflictingEntry {
                path: path.to_path_buf(),
                existing: pretty(existing),
                wanted: wanted(),
            });
        };
        let stale: Vec<_> = fields
            .iter()
            .filter(|(key, field)| !matches(field, entry.get(*key)))
            .collect();
        if stale.is_empty() {
            return Ok(Change::Unchanged);
        }
        if !force {
            return Err(HostsError::ConflictingEntry {
                path: path.to_path_buf(),
                existing: pretty(&Value::Object(entry.clone())),
                wanted: wanted(),
            });
        }
        for (key, field) in stale {
            entry.insert((*key).to_owned(), to_json(field));
        }
        Ok(Change::Changed)
    }

    /// Makes the array at `container.name` hold `item` (appended when absent), creating the
    /// objects on the way and the array itself. Other items are kept as they are.
    pub(super) fn append_unique(
        &mut self,
        path: &Path,
        container: &[&str],
        name: &str,
        item: &str,
    ) -> Result<Change, HostsError> {
        let mut map = &mut self.root;
        for (depth, key) in container.iter().enumerate() {
            let slot = map
                .entry((*key).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            let found = type_name(slot);
            map = slot
                .as_object_mut()
                .ok_or_else(|| HostsError::UnexpectedShape {
                    path: path.to_path_buf(),
                    key: container[..=depth].join("."),
                    found,
                    expected: "an object",
                })?;
        }
        let slot = map
            .entry(name.to_owned())
            .or_insert_with(|| Value::Array(Vec::new()));
        let found = type_name(slot);
        let Some(items) = slot.as_array_mut() else {
            return Err(HostsError::UnexpectedShape {
                path: path.to_path_buf(),
                key: [container, &[name]].concat().join("."),
                found,
                expected: "an array",
            });
        };
        if items.iter().any(|v| v.as_str() == Some(item)) {
            return Ok(Change::Unchanged);
        }
        items.push(Value::String(item.to_owned()));
        Ok(Change::Changed)
    }

    /// The document as text, indented like the original.
    pub(super) fn render(&self) -> String {
        let mut bytes = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(self.indent.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut bytes, formatter);
        // Serializing a `Map` of `Value`s into a `Vec` cannot fail: every key is a string.
        let _ = self.root.serialize(&mut ser);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if self.trailing_newline {
            text.push('\n');
        }
        text
    }
}

fn to_json(field: &Field) -> Value {
    match field {
        Field::Str(s) => Value::String(s.clone()),
        Field::Strings(items) => Value::Array(items.iter().cloned().map(Value::String).collect()),
        Field::Int(n) => Value::from(*n),
        Field::Bool(b) => Value::Bool(*b),
        Field::ObjectPresent => Value::Object(Map::new()),
    }
}

fn matches(field: &Field, value: Option<&Value>) -> bool {
    match (field, value) {
        (Field::Str(want), Some(Value::String(have))) => want == have,
        (Field::Strings(want), Some(Value::Array(have))) => {
            want.len() == have.len()
                && want
                    .iter()
                    .zip(have)
                    .all(|(w, h)| h.as_str() == Some(w.as_str()))
        }
        (Field::Int(want), Some(have)) => have.as_i64() == Some(*want),
        (Field::Bool(want), Some(Value::Bool(have))) => want == have,
        (Field::ObjectPresent, Some(have)) => have.is_object(),
        _ => false,
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The indentation of the first indented line (`"  "` when there is none).
fn detect_indent(text: &str) -> String {
    text.lines()
        .skip(1)
        .find_map(|line| {
            let trimmed = line.trim_start_matches([' ', '\t']);
            let indent = &line[..line.len() - trimmed.len()];
            (!indent.is_empty() && !trimmed.is_empty()).then(|| indent.to_owned())
        })
        .unwrap_or_else(|| "  ".to_owned())
}

/// The first comment or trailing comma outside strings, as (1-based line, what it is).
fn find_jsonc_feature(text: &str) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let mut line = 1;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            line += 1;
        }
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'/' if matches!(bytes.get(i + 1), Some(b'/' | b'*')) => {
                return Some((line, "comments"));
            }
            b',' => {
                let next = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                if matches!(next, Some(b'}' | b']')) {
                    return Some((line, "trailing commas"));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_are_found_outside_strings_only() {
        assert_eq!(find_jsonc_feature("{\"a\": \"http://x\"}"), None);
        assert_eq!(find_jsonc_feature("{\"a\": \"x,}\"}"), None);
        assert_eq!(find_jsonc_feature("{\n  // hi\n}"), Some((2, "comments")));
        assert_eq!(find_jsonc_feature("{\n /* a */ }"), Some((2, "comments")));
        assert_eq!(
            find_jsonc_feature("{\"a\": [1,\n 2,\n ],\n}"),
            Some((2, "trailing commas"))
        );
        assert_eq!(find_jsonc_feature("{\"a\\\"//\": 1}"), None);
    }

    #[test]
    fn indentation_is_taken_from_the_file() {
        assert_eq!(detect_indent("{\n    \"a\": 1\n}"), "    ");
        assert_eq!(detect_indent("{\n\t\"a\": 1\n}"), "\t");
        assert_eq!(detect_indent("{\"a\": 1}"), "  ");
    }

    #[test]
    fn a_top_level_array_is_refused() {
        let err = JsonDoc::parse(Path::new("x.json"), Some("[1]"), "pi").expect_err("refused");
        assert_eq!(err.code(), "hosts_unexpected_shape");
    }

    #[test]
    fn a_container_of_the_wrong_type_is_refused_with_its_key() {
        let mut doc = JsonDoc::parse(Path::new("x.json"), Some("{\"mcpServers\": []}"), "pi")
            .expect("parses");
        let err = doc
            .upsert(Path::new("x.json"), &["mcpServers"], "subzero", &[], false)
            .expect_err("refused");
        assert!(err.to_string().contains("`mcpServers`"), "{err}");
        assert!(err.to_string().contains("an array"), "{err}");
    }
}
