//! The advertised input schemas (`subzero_protocol::advertised`) against the contract: each
//! is valid JSON Schema, accepts every valid fixture of its tool (recorded live traces
//! among them), and names every field, choice and required field the full schema does.

use std::collections::BTreeSet;

use serde_json::Value;
use subzero_protocol::advertised::{BRIEFS, advertised_input};

/// The exported input schemas of the tools: (stem, full schema).
fn inputs() -> Vec<(String, Value)> {
    let inputs: Vec<_> = subzero_protocol::export::exported_schemas()
        .into_iter()
        .filter(|(stem, _)| stem.starts_with("tool-") && stem.ends_with("-input"))
        .collect();
    assert_eq!(inputs.len(), 9, "one input schema per tool");
    inputs
}

#[test]
fn every_valid_input_fixture_is_accepted_by_the_advertised_schema() {
    let fixtures =
        xtask::fixtures::load(&xtask::workspace_root()).unwrap_or_else(|e| panic!("{e}"));
    let mut checked = 0;
    let mut problems = Vec::new();
    for (stem, full) in inputs() {
        let advertised = advertised_input(&stem, &full);
        let validator = jsonschema::validator_for(&advertised)
            .unwrap_or_else(|e| panic!("{stem}: the advertised schema is not a schema: {e}"));
        for fixture in fixtures.iter().filter(|f| f.stem == stem && f.valid) {
            checked += 1;
            if let Err(e) = validator.validate(&fixture.doc) {
                problems.push(format!(
                    "{}: refused by the advertised schema: {e}",
                    fixture.rel_path
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 9 * 2, "only {checked} valid input fixtures");
}

#[test]
fn the_advertised_schemas_are_valid_under_the_draft_2020_12_meta_schema() {
    for (stem, full) in inputs() {
        let advertised = advertised_input(&stem, &full);
        assert!(
            jsonschema::meta::is_valid(&advertised),
            "{stem}: {advertised}"
        );
        assert!(advertised.get("$defs").is_none() && !advertised.to_string().contains("$ref"));
    }
}

#[test]
fn the_advertised_schemas_name_every_field_choice_and_requirement() {
    for (stem, full) in inputs() {
        let advertised = advertised_input(&stem, &full);
        let defs = full["$defs"].clone();
        let mut want = BTreeSet::new();
        shape(&full, &defs, "", &mut want);
        let mut got = BTreeSet::new();
        shape(&advertised, &Value::Null, "", &mut got);
        assert_eq!(got, want, "{stem}");
    }
}

#[test]
fn every_brief_names_a_property_that_exists() {
    for (stem, path, _) in BRIEFS {
        let full = &inputs()
            .into_iter()
            .find(|(s, _)| s == stem)
            .expect("a tool input")
            .1;
        let advertised = advertised_input(stem, full);
        let mut node = &advertised;
        for name in path.split('.') {
            node = &node["properties"][name];
        }
        assert!(node.get("description").is_some(), "{stem} {path}");
    }
}

/// The facts a schema states, one string each: properties, their types, choices and the
/// required ones, by path (`$ref`s into `defs` followed).
fn shape(node: &Value, defs: &Value, path: &str, out: &mut BTreeSet<String>) {
    if let Some(target) = node.get("$ref").and_then(Value::as_str) {
        let name = target.rsplit('/').next().unwrap_or(target);
        return shape(&defs[name], defs, path, out);
    }
    if let Some(kind) = node.get("type") {
        out.insert(format!("{path}: type {kind}"));
    }
    let constants: Vec<String> = node["oneOf"]
        .as_array()
        .map(|v| v.iter().map(|c| c["const"].to_string()).collect())
        .or_else(|| {
            node["enum"]
                .as_array()
                .map(|v| v.iter().map(Value::to_string).collect())
        })
        .unwrap_or_default();
    if !constants.is_empty() {
        out.insert(format!("{path}: one of {}", constants.join(",")));
        if node.get("type").is_none() {
            // `{type, enum}` in the advertised schema; the variants carry it in the full one.
            if let Some(kind) = node["oneOf"][0].get("type") {
                out.insert(format!("{path}: type {kind}"));
            }
        }
    }
    for required in node["required"].as_array().into_iter().flatten() {
        out.insert(format!("{path}: requires {required}"));
    }
    for (name, schema) in node["properties"].as_object().into_iter().flatten() {
        shape(schema, defs, &format!("{path}.{name}"), out);
    }
    if let Some(items) = node.get("items") {
        shape(items, defs, &format!("{path}[]"), out);
    }
}
