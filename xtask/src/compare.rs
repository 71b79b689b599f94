//! Normalized comparison of a source schema with the schema exported from the Rust types.
//!
//! The two differ structurally (schemars inlines, names and nests differently), so both
//! are flattened into facts per JSON path — property names, required sets, types, enum
//! and const values, bounds, additionalProperties — after resolving `$ref`s. An optional
//! property that the export also allows to be `null` is not a difference (serde skips
//! `None` when writing and reads `null` as `None`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::source::{SourceSet, TypeIndex};

/// Keywords compared verbatim where present.
const BOUNDS: [&str; 8] = [
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "const",
];

type Facts = BTreeMap<String, BTreeMap<String, Value>>;

/// Resolves `$ref`s in one of the two worlds.
trait Resolver {
    fn resolve<'a>(&'a self, node: &'a Value) -> Result<&'a Value, String>;
}

struct SourceResolver<'a> {
    set: &'a SourceSet,
    index: TypeIndex,
    /// Stem of the file whose local `#/$defs/…` references are being followed.
    local: String,
}

impl Resolver for SourceResolver<'_> {
    fn resolve<'a>(&'a self, node: &'a Value) -> Result<&'a Value, String> {
        let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
            return Ok(node);
        };
        let name = self.index.resolve(reference)?;
        let stem = if reference.starts_with('#') {
            self.local.clone()
        } else {
            self.index.owners.get(&name).cloned().unwrap_or_default()
        };
        let schema = self
            .set
            .get(&stem)
            .ok_or_else(|| format!("no file {stem}"))?;
        if schema.root_title() == Some(name.as_str()) && !reference.contains('#') {
            return Ok(&schema.doc);
        }
        schema
            .doc
            .get("$defs")
            .and_then(|d| d.get(&name))
            .ok_or_else(|| format!("{reference} not found"))
    }
}

struct ExportResolver<'a> {
    doc: &'a Value,
}

impl Resolver for ExportResolver<'_> {
    fn resolve<'a>(&'a self, node: &'a Value) -> Result<&'a Value, String> {
        let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
            return Ok(node);
        };
        let name = reference
            .strip_prefix("#/$defs/")
            .ok_or_else(|| format!("exported $ref {reference} is not local"))?;
        self.doc
            .get("$defs")
            .and_then(|d| d.get(name))
            .ok_or_else(|| format!("exported {reference} not found"))
    }
}

/// Differences between `stem`'s source schema and its export; empty when they agree.
pub fn compare(set: &SourceSet, stem: &str, exported: &Value) -> Result<Vec<String>, String> {
    let source = set
        .get(stem)
        .ok_or_else(|| format!("no source schema {stem}"))?;
    let source_resolver = SourceResolver {
        set,
        index: set.index()?,
        local: stem.to_string(),
    };
    let mut left = Facts::new();
    flatten(&source_resolver, &source.doc, "$", true, &mut left, 0)?;
    let mut right = Facts::new();
    flatten(
        &ExportResolver { doc: exported },
        exported,
        "$",
        true,
        &mut right,
        0,
    )?;
    let mut diffs = Vec::new();
    for path in left
        .keys()
        .chain(right.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (a, b) = (left.get(path), right.get(path));
        match (a, b) {
            (Some(a), Some(b)) => {
                for key in a
                    .keys()
                    .chain(b.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                {
                    if a.get(key) != b.get(key) {
                        diffs.push(format!(
                            "{stem} {path}: {key} is {} in schema-src but {} in the export",
                            show(a.get(key)),
                            show(b.get(key))
                        ));
                    }
                }
            }
            (Some(_), None) => diffs.push(format!("{stem} {path}: only in schema-src")),
            (None, Some(_)) => diffs.push(format!("{stem} {path}: only in the export")),
            (None, None) => {}
        }
    }
    Ok(diffs)
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".to_string(), Value::to_string)
}

/// Strip a `null` alternative: `anyOf: [X, {type: null}]`, `type: [t, "null"]`.
/// Returns the non-null schema and whether `null` was allowed.
fn strip_null<R: Resolver>(resolver: &R, node: &Value) -> Result<(Value, bool), String> {
    let node = resolver.resolve(node)?.clone();
    if let Some(members) = node.get("anyOf").and_then(Value::as_array) {
        let non_null: Vec<&Value> = members
            .iter()
            .filter(|m| m.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if non_null.len() == 1 && members.len() == 2 {
            let inner = resolver.resolve(non_null[0])?.clone();
            return Ok((inner, true));
        }
    }
    if let Some(types) = node.get("type").and_then(Value::as_array) {
        let non_null: Vec<&Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .collect();
        if non_null.len() == 1 {
            let mut inner = node.clone();
            if let Some(map) = inner.as_object_mut() {
                map.insert("type".to_string(), non_null[0].clone());
            }
            return Ok((inner, types.len() == 2));
        }
    }
    Ok((node, false))
}

fn flatten<R: Resolver>(
    resolver: &R,
    node: &Value,
    path: &str,
    required: bool,
    out: &mut Facts,
    depth: usize,
) -> Result<(), String> {
    if depth > 32 {
        return Err(format!("{path}: schema nests too deeply (recursive $ref?)"));
    }
    let (node, nullable) = strip_null(resolver, node)?;
    let mut facts = BTreeMap::new();
    // Optional properties may be `null` in the export; only compare nullability where required.
    if required {
        facts.insert("nullable".to_string(), Value::Bool(nullable));
    }
    if let Some(kind) = node.get("type") {
        facts.insert("type".to_string(), kind.clone());
    }
    for key in BOUNDS {
        if let Some(value) = node.get(key) {
            facts.insert(key.to_string(), value.clone());
        }
    }
    if let Some(Value::Array(values)) = node.get("enum") {
        let mut values: Vec<String> = values.iter().map(Value::to_string).collect();
        values.sort();
        facts.insert("enum".to_string(), Value::from(values));
    }
    let map = node.as_object().cloned().unwrap_or_default();
    for key in RULES {
        if let Some(rule) = map.get(key) {
            facts.insert(key.to_string(), rule.clone());
        }
    }
    if let Some(values) = described_values(&map) {
        // `oneOf` of `{const, description}`: an enumeration whose every value is explained.
        // schemars writes each variant with `type: string`; the source states it once.
        facts.insert("type".to_string(), Value::from("string"));
        facts.insert("enum".to_string(), Value::Object(values));
        out.insert(path.to_string(), facts);
        return Ok(());
    }
    if let Some(Value::Array(variants)) = map.get("oneOf").or_else(|| map.get("anyOf")) {
        for variant in variants {
            let variant = resolver.resolve(variant)?;
            let label = discriminator(variant).unwrap_or_else(|| "?".to_string());
            flatten(
                resolver,
                variant,
                &format!("{path}|{label}"),
                true,
                out,
                depth + 1,
            )?;
        }
        facts.insert("union".to_string(), Value::from(variants.len()));
    }
    if map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties") {
        object_facts(resolver, &map, path, &mut facts, out, depth)?;
    }
    if let Some(items) = map.get("items") {
        flatten(resolver, items, &format!("{path}[]"), true, out, depth + 1)?;
    }
    out.insert(path.to_string(), facts);
    Ok(())
}

fn object_facts<R: Resolver>(
    resolver: &R,
    map: &Map<String, Value>,
    path: &str,
    facts: &mut BTreeMap<String, Value>,
    out: &mut Facts,
    depth: usize,
) -> Result<(), String> {
    let props = map
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    required.sort();
    let mut names: Vec<String> = props.keys().cloned().collect();
    names.sort();
    facts.insert("properties".to_string(), Value::from(names));
    facts.insert("required".to_string(), Value::from(required.clone()));
    let map = with_typed_keys_as_property_names(resolver, map)?;
    additional_properties_facts(resolver, &map, path, facts, out, depth)?;
    if let Some(names) = map.get("propertyNames") {
        facts.insert("propertyNames".to_string(), names.clone());
    }
    for (name, prop) in &props {
        flatten(
            resolver,
            prop,
            &format!("{path}.{name}"),
            required.contains(name),
            out,
            depth + 1,
        )?;
    }
    Ok(())
}

/// A map with typed keys, said the same way on both sides. The source says
/// `propertyNames` (a `$ref` to a pattern type); schemars says
/// `patternProperties: {<pattern>: values}, additionalProperties: false`. Both become
/// `additionalProperties: values, propertyNames: {pattern}`.
fn with_typed_keys_as_property_names<R: Resolver>(
    resolver: &R,
    map: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let mut map = map.clone();
    if let Some(Value::Object(patterns)) = map.remove("patternProperties")
        && let (1, Some((pattern, values))) = (patterns.len(), patterns.iter().next())
    {
        map.insert("additionalProperties".to_string(), values.clone());
        map.insert(
            "propertyNames".to_string(),
            serde_json::json!({ "pattern": pattern }),
        );
    }
    if let Some(names) = map.get("propertyNames") {
        let names = resolver.resolve(names)?;
        let pattern = names.get("pattern").cloned().unwrap_or(Value::Null);
        map.insert(
            "propertyNames".to_string(),
            serde_json::json!({ "pattern": pattern }),
        );
    }
    Ok(map)
}

/// `additionalProperties` as a fact (`true`, `false` or `"schema"`); a schema's own facts go
/// under `<path>{*}`.
fn additional_properties_facts<R: Resolver>(
    resolver: &R,
    map: &Map<String, Value>,
    path: &str,
    facts: &mut BTreeMap<String, Value>,
    out: &mut Facts,
    depth: usize,
) -> Result<(), String> {
    match map.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            facts.insert("additionalProperties".to_string(), Value::Bool(*b));
        }
        Some(schema) => {
            facts.insert("additionalProperties".to_string(), Value::from("schema"));
            flatten(
                resolver,
                schema,
                &format!("{path}{{*}}"),
                true,
                out,
                depth + 1,
            )?;
        }
        None => {
            facts.insert("additionalProperties".to_string(), Value::Bool(true));
        }
    }
    Ok(())
}

/// Rule keywords (conditions between properties), compared verbatim: codegen copies them
/// onto the generated type's schema.
const RULES: [&str; 3] = ["if", "then", "else"];

/// For a `oneOf` whose every variant is a `{const, description}`: value → description.
pub fn described_values(map: &Map<String, Value>) -> Option<Map<String, Value>> {
    let variants = map.get("oneOf")?.as_array()?;
    let mut values = Map::new();
    for variant in variants {
        let value = variant.get("const")?.as_str()?;
        let description = variant.get("description").cloned().unwrap_or(Value::Null);
        values.insert(value.to_string(), description);
    }
    (!values.is_empty()).then_some(values)
}

/// The `const` value of a variant's `type` or `kind` property, if any.
fn discriminator(variant: &Value) -> Option<String> {
    let props = variant.get("properties")?;
    ["type", "kind"]
        .iter()
        .find_map(|k| {
            props
                .get(*k)
                .and_then(|p| p.get("const"))
                .and_then(Value::as_str)
        })
        .map(str::to_string)
}
