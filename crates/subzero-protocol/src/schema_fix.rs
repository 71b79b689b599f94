//! Schema transforms the generated code attaches where schemars 1 and typify disagree.

use schemars::Schema;

/// Adds `keys` to the schema's `required`. typify reads a required, nullable property as
/// `Option<T>` with `Option::deserialize` (the key must be present, `null` allowed);
/// schemars would otherwise advertise it as optional.
pub fn require_keys(schema: &mut Schema, keys: &[&str]) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let required = object
        .entry("required")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = required.as_array_mut() {
        for key in keys {
            let key = serde_json::Value::String((*key).to_string());
            if !list.contains(&key) {
                list.push(key);
            }
        }
    }
}

/// The `format` values JSON Schema draft 2020-12 defines (format-annotation vocabulary),
/// which every validator knows. Nothing else is published.
pub const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keeps one schema node to the standard vocabulary. schemars writes the Rust width of
/// every number as `format` (`uint64`, `int64`, `uint32`, `double`, …), which JSON Schema
/// does not define: validators print `unknown format "uint64" ignored` for each (hosts do
/// on every start) or, in Ajv's strict mode, refuse the schema. The format goes; what it
/// meant for the value stays as a bound (`minimum: 0` for an unsigned integer). Apply it
/// to every subschema with [`schemars::transform::RecursiveTransform`].
pub fn standard_vocabulary(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let Some(format) = object.get("format").and_then(serde_json::Value::as_str) else {
        return;
    };
    if STANDARD_FORMATS.contains(&format) {
        return;
    }
    let unsigned = format.starts_with("uint");
    object.remove("format");
    if unsigned && !object.contains_key("minimum") && !object.contains_key("exclusiveMinimum") {
        object.insert("minimum".to_string(), serde_json::Value::from(0));
    }
}

/// Optional properties are absent, never `null` (`docs/protocol.md`), as schema-src says:
/// schemars renders an `Option` property as "this or null" whether or not it is required,
/// which would advertise `budget: null` as valid input the broker refuses. For each property
/// an object does not require, the `null` alternative goes (`anyOf: [X, {type: null}]` → X,
/// `type: [T, "null"]` → T); a required one that may be `null` keeps it.
pub fn absent_not_null(schema: &mut Schema) {
    use serde_json::Value;
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let required: Vec<String> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.contains(name) {
            continue;
        }
        let Some(property) = property.as_object_mut() else {
            continue;
        };
        if let Some(Value::Array(types)) = property.get_mut("type") {
            types.retain(|t| t != "null");
            if types.len() == 1 {
                let only = types[0].clone();
                property.insert("type".to_owned(), only);
            }
        }
        let single = match property.get_mut("anyOf") {
            Some(Value::Array(alternatives)) => {
                alternatives.retain(|a| a.get("type").and_then(Value::as_str) != Some("null"));
                (alternatives.len() == 1).then(|| alternatives[0].clone())
            }
            _ => None,
        };
        if let Some(Value::Object(only)) = single {
            property.remove("anyOf");
            for (key, value) in only {
                property.entry(key).or_insert(value);
            }
        }
    }
}

/// Where `schema` leaves the standard draft 2020-12 vocabulary: every keyword starting with
/// `x-` and every `format` not in [`STANDARD_FORMATS`], as JSON pointers. Property names
/// (the keys of `properties`, `$defs`, …) are not keywords and are not reported.
pub fn nonstandard_vocabulary(schema: &serde_json::Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_vocabulary(schema, "#", &mut found);
    found
}

/// Keywords whose value maps names to subschemas.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Keywords whose value is data, not a schema.
const DATA_KEYWORDS: [&str; 5] = ["const", "enum", "default", "examples", "required"];

fn walk_vocabulary(node: &serde_json::Value, at: &str, found: &mut Vec<String>) {
    use serde_json::Value;
    match node {
        Value::Object(map) => {
            for (key, value) in map {
                let here = format!("{at}/{key}");
                if key.starts_with("x-") {
                    found.push(here.clone());
                }
                if key == "format"
                    && value
                        .as_str()
                        .is_none_or(|f| !STANDARD_FORMATS.contains(&f))
                {
                    found.push(format!("{here} ({value})"));
                }
                if DATA_KEYWORDS.contains(&key.as_str()) {
                    continue;
                }
                match (SCHEMA_MAPS.contains(&key.as_str()), value) {
                    (true, Value::Object(entries)) => {
                        for (name, schema) in entries {
                            walk_vocabulary(schema, &format!("{here}/{name}"), found);
                        }
                    }
                    _ => walk_vocabulary(value, &here, found),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_vocabulary(item, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `schema` after [`standard_vocabulary`].
    fn standardized(schema: serde_json::Value) -> serde_json::Value {
        let mut schema = Schema::try_from(schema).expect("an object schema");
        standard_vocabulary(&mut schema);
        schema.to_value()
    }

    #[test]
    fn an_unsigned_width_becomes_a_minimum_and_a_signed_one_goes() {
        assert_eq!(
            standardized(json!({"type": "integer", "format": "uint32"})),
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            standardized(json!({"type": "integer", "format": "uint64", "minimum": 1})),
            json!({"type": "integer", "minimum": 1})
        );
        assert_eq!(
            standardized(json!({"type": "integer", "format": "int64"})),
            json!({"type": "integer"})
        );
        assert_eq!(
            standardized(json!({"type": "string", "format": "uri"})),
            json!({"type": "string", "format": "uri"})
        );
    }

    #[test]
    fn nonstandard_keywords_are_found_but_property_names_are_not() {
        let schema = json!({
            "type": "object",
            "properties": {
                "format": {"type": "string", "x-maxBytes": 4},
                "x-name": {"type": "integer", "format": "uint64"},
                "when": {"type": "string", "format": "date-time", "const": {"format": "int8"}}
            }
        });
        assert_eq!(
            nonstandard_vocabulary(&schema),
            vec![
                "#/properties/format/x-maxBytes".to_string(),
                "#/properties/x-name/format (\"uint64\")".to_string(),
            ]
        );
    }
}
