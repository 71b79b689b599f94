//! The input schemas a host puts before its model: the contract's schemas with what only an
//! implementer needs taken out.
//!
//! A host sends every tool's name, description and input schema on every model turn, so
//! those bytes are paid again and again by the parent's context. The exported schemas
//! (`schema-src/v1/tool-*-input.schema.json`) are written for implementers: each type behind
//! a `$ref` with its description twice, every bound spelled out. What a tool advertises is
//! derived from them mechanically ([`advertised_input`]):
//! - every `$ref` is inlined, so there are no `$defs`;
//! - a choice of constants (`oneOf` of `const`s) becomes an `enum`;
//! - kept: `type`, `properties`, `required`, `items`, `enum`, `const`, and the top level's
//!   `additionalProperties: false`; dropped: descriptions, titles, ids, bounds and patterns
//!   (the server checks every one of them and answers the same typed errors);
//! - a property gets a description only where [`BRIEFS`] gives it one line.
//!
//! The result accepts every input the server accepts (the valid fixtures prove it) and
//! names every field, type, choice and required field the full schema does.

use serde_json::{Map, Value};

/// One-line descriptions of the properties a model would otherwise misuse: (input schema
/// stem, dotted property path, text). Everything else is named well enough by its name,
/// type and choices, and the tool's own description.
pub const BRIEFS: &[(&str, &str, &str)] = &[
    (
        "tool-spawn-input",
        "templateId",
        "researcher, coder, or a template from subzero_info",
    ),
    (
        "tool-spawn-input",
        "prompt",
        "The whole task: the child does not see your conversation",
    ),
    (
        "tool-spawn-input",
        "label",
        "Short name for list and get; default: the prompt's first line",
    ),
    (
        "tool-spawn-input",
        "model.credentialRef",
        "A credential name from subzero_info",
    ),
    (
        "tool-spawn-input",
        "isolation",
        "checkout: its own git checkout (land with subzero_apply)",
    ),
    (
        "tool-spawn-input",
        "baseRevision",
        "With checkout: the git revision to start from",
    ),
    (
        "tool-spawn-input",
        "budget",
        "Per-run limits; absent: the defaults in subzero_info",
    ),
    ("tool-spawn-input", "requestId", "Idempotency key"),
    (
        "tool-get-input",
        "waitMs",
        "Wait up to this long (max 30000) for waitFor",
    ),
    (
        "tool-get-input",
        "cursor",
        "nextCursor of the previous get: only newer events",
    ),
    ("tool-list-input", "label", "Only labels containing this"),
    ("tool-list-input", "after", "nextAfter of the previous page"),
    (
        "tool-send-input",
        "compact",
        "followup only: compact the transcript first",
    ),
    ("tool-send-input", "requestId", "Idempotency key"),
    (
        "tool-stop-input",
        "expectedRunId",
        "The active run (activeRunId from subzero_get)",
    ),
    (
        "tool-stop-input",
        "waitMs",
        "Wait up to this long (max 30000) for the confirmation",
    ),
    (
        "tool-resume-input",
        "message",
        "Starts a new run; absent: the child is only reopened",
    ),
    (
        "tool-resume-input",
        "compact",
        "With message only: compact the transcript first",
    ),
    ("tool-resume-input", "requestId", "Idempotency key"),
    (
        "tool-apply-input",
        "commitMessage",
        "Land as one commit; absent: as uncommitted edits",
    ),
    (
        "tool-apply-input",
        "discard",
        "Throw the change away instead",
    ),
];

/// The input schema a tool advertises, from its exported schema `full` (file stem `stem`).
pub fn advertised_input(stem: &str, full: &Value) -> Value {
    let empty = Map::new();
    let defs = full
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut out = compact(full, &Context { stem, defs }, "");
    if let (Some(map), Some(false)) = (
        out.as_object_mut(),
        full.get("additionalProperties").and_then(Value::as_bool),
    ) {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    out
}

/// The schema being compacted: its stem (for [`BRIEFS`]) and its `$defs`.
struct Context<'a> {
    stem: &'a str,
    defs: &'a Map<String, Value>,
}

/// One node, compacted; `path` is its dotted property path ("" at the top).
fn compact(node: &Value, cx: &Context<'_>, path: &str) -> Value {
    let Some(map) = node.as_object() else {
        return node.clone();
    };
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        let name = target.rsplit('/').next().unwrap_or(target);
        return match cx.defs.get(name) {
            Some(def) => compact(def, cx, path),
            // A reference outside `$defs` is kept as it is: still a valid schema.
            None => node.clone(),
        };
    }
    let mut out = Map::new();
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(variants)) = map.get(key) {
            match constants(variants) {
                Some(choice) => out.extend(choice),
                None => {
                    let variants = variants.iter().map(|v| compact(v, cx, path)).collect();
                    out.insert(key.into(), Value::Array(variants));
                }
            }
        }
    }
    for (key, value) in map {
        match key.as_str() {
            "type" | "enum" | "const" => {
                out.insert(key.clone(), value.clone());
            }
            "items" => {
                out.insert(key.clone(), compact(value, cx, path));
            }
            "required" if value.as_array().is_some_and(|r| !r.is_empty()) => {
                out.insert(key.clone(), value.clone());
            }
            "properties" => {
                out.insert(key.clone(), properties(value, cx, path));
            }
            _ => {}
        }
    }
    if let Some(brief) = brief(cx.stem, path) {
        out.insert("description".into(), Value::String(brief.into()));
    }
    Value::Object(out)
}

/// Each property compacted under its path.
fn properties(value: &Value, cx: &Context<'_>, path: &str) -> Value {
    let Some(props) = value.as_object() else {
        return value.clone();
    };
    let props = props
        .iter()
        .map(|(name, schema)| {
            let path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            (name.clone(), compact(schema, cx, &path))
        })
        .collect();
    Value::Object(props)
}

/// `oneOf` of constants of one type → `{type, enum}`; `None` when a variant is not a `const`.
fn constants(variants: &[Value]) -> Option<Map<String, Value>> {
    let values: Vec<Value> = variants
        .iter()
        .map(|v| v.get("const").cloned())
        .collect::<Option<_>>()?;
    let mut types = variants.iter().map(|v| v.get("type"));
    let first = types.next().flatten().cloned();
    let mut out = Map::new();
    if let Some(kind) = first.filter(|k| types.all(|t| t == Some(k))) {
        out.insert("type".into(), kind);
    }
    out.insert("enum".into(), Value::Array(values));
    Some(out)
}

/// The one-line description of `path` in `stem`, if it has one.
fn brief(stem: &str, path: &str) -> Option<&'static str> {
    BRIEFS
        .iter()
        .find(|(s, p, _)| *s == stem && *p == path)
        .map(|(_, _, text)| *text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::advertised_input;

    #[test]
    fn refs_are_inlined_constants_become_an_enum_and_bounds_go() {
        let full = json!({
            "type": "object", "additionalProperties": false, "title": "X",
            "description": "long", "$id": "urn:x",
            "properties": {
                "mode": {"$ref": "#/$defs/Mode", "description": "long"},
                "n": {"type": "integer", "minimum": 1, "maximum": 9, "description": "long"},
                "nested": {"type": "object", "additionalProperties": false,
                    "properties": {"s": {"type": "string", "pattern": "^a", "maxLength": 3}},
                    "required": ["s"]}
            },
            "required": ["mode"],
            "$defs": {"Mode": {"oneOf": [
                {"type": "string", "const": "a", "description": "A"},
                {"type": "string", "const": "b", "description": "B"}
            ]}}
        });
        assert_eq!(
            advertised_input("tool-stop-input", &full),
            json!({
                "type": "object", "additionalProperties": false,
                "properties": {
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "n": {"type": "integer"},
                    "nested": {"type": "object", "properties": {"s": {"type": "string"}},
                        "required": ["s"]}
                },
                "required": ["mode"]
            })
        );
    }

    #[test]
    fn a_brief_describes_its_property_by_path() {
        let full = json!({"type": "object", "properties": {
            "expectedRunId": {"type": "string", "description": "long"}}});
        let out = advertised_input("tool-stop-input", &full);
        assert_eq!(
            out["properties"]["expectedRunId"]["description"],
            "The active run (activeRunId from subzero_get)"
        );
        assert!(out.get("additionalProperties").is_none());
    }
}
