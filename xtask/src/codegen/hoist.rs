//! Bounded inline schemas hoisted into named `$defs`, so typify generates a newtype that
//! can carry their bounds.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::source::SourceSchema;

use super::*;

/// Whether typify would drop a bound of this inline schema from its derived schema:
/// constrained strings, and integers with a maximum or a minimum other than 0 or 1.
pub(super) fn needs_named_type(node: &Value) -> bool {
    let Some(map) = node.as_object() else {
        return false;
    };
    if map.contains_key("enum") || map.contains_key("const") || map.contains_key("$ref") {
        return false;
    }
    match map.get("type").and_then(Value::as_str) {
        Some("string") => {
            ["pattern", "minLength", "maxLength"]
                .iter()
                .any(|k| map.contains_key(*k))
                || max_bytes(node).is_some()
        }
        Some("array") => map.contains_key("minItems") || map.contains_key("maxItems"),
        Some("integer") => {
            map.contains_key("maximum")
                || map
                    .get("minimum")
                    .and_then(Value::as_i64)
                    .is_some_and(|min| min != 0 && min != 1)
        }
        _ => false,
    }
}

/// The file's root (without `$defs`) and its `$defs` plus a named def for every inline
/// bounded string or integer (named as typify would: `<Owner><Property>[Item|Value]`),
/// so that every bounded type can be patched and validated.
pub(super) fn hoist_bounded(schema: &SourceSchema) -> Result<(Map<String, Value>, Defs), String> {
    let mut defs = schema.defs();
    let mut hoisted = BTreeMap::new();
    let mut root = schema.doc.as_object().cloned().unwrap_or_default();
    root.remove("$defs");
    let root_owner = schema.root_title().unwrap_or_default().to_string();
    let mut root_value = Value::Object(root);
    hoist_in(&mut root_value, &root_owner, &mut hoisted);
    for (name, def) in defs.iter_mut() {
        hoist_in(def, name, &mut hoisted);
    }
    for (name, def) in hoisted {
        if defs.insert(name.clone(), def).is_some() {
            return Err(format!(
                "{}: inline type {name} collides with a $defs name",
                schema.rel_path
            ));
        }
    }
    let root = match root_value {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    Ok((root, defs))
}

pub(super) fn hoist_in(node: &mut Value, owner: &str, out: &mut BTreeMap<String, Value>) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(variants)) = map.get_mut(key) {
            for variant in variants {
                let variant_owner = variant
                    .get("title")
                    .and_then(Value::as_str)
                    .map_or_else(|| owner.to_string(), str::to_string);
                hoist_in(variant, &variant_owner, out);
            }
        }
    }
    let Some(Value::Object(props)) = map.get_mut("properties") else {
        return;
    };
    for (prop, schema) in props.iter_mut() {
        let base = format!("{owner}{}", pascal_case(prop));
        hoist_one(schema, &base, out);
        if let Some(values) = schema.get_mut("additionalProperties") {
            hoist_one(values, &format!("{base}Value"), out);
        }
        if let Some(Value::Array(members)) = schema.get_mut("anyOf") {
            for member in members {
                hoist_one(member, &base, out);
            }
        }
    }
}

pub(super) fn hoist_one(schema: &mut Value, name: &str, out: &mut BTreeMap<String, Value>) {
    if let Some(items) = schema.get_mut("items") {
        hoist_one(items, &format!("{name}Item"), out);
    }
    if !needs_named_type(schema) {
        return;
    }
    let mut def = schema.clone();
    let description = def
        .as_object_mut()
        .and_then(|m| m.remove("description"))
        .unwrap_or_else(|| Value::String(format!("Bounded value of {name}.")));
    if let Some(m) = def.as_object_mut() {
        m.insert("description".to_string(), description.clone());
    }
    out.insert(name.to_string(), def);
    let mut reference = Map::new();
    reference.insert("$ref".to_string(), Value::String(format!("#/$defs/{name}")));
    reference.insert("description".to_string(), description);
    *schema = Value::Object(reference);
}

pub(super) fn pascal_case(name: &str) -> String {
    let mut out = String::new();
    let mut upper = true;
    for c in name.chars() {
        if c == '_' || c == '-' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}
