//! What typify cannot carry: the bounds and byte limits patched back onto the generated
//! types, their `Validate` impls, and the `if`/`then` rules kept aside from typify.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use typify::{TypeDetails, TypeEnum, TypeEnumVariant, TypeId, TypeSpace, TypeStruct};

use crate::source::SourceSchema;

use super::*;

/// Keywords of a rule between an object's properties.
pub(super) const RULE_KEYWORDS: [&str; 3] = ["if", "then", "else"];

/// Remove and return the rule keywords of one object schema.
pub(super) fn strip_rules(map: &mut Map<String, Value>) -> Option<Map<String, Value>> {
    let mut rule = Map::new();
    for key in RULE_KEYWORDS {
        if let Some(value) = map.remove(key) {
            rule.insert(key.to_string(), value);
        }
    }
    (!rule.is_empty()).then_some(rule)
}

/// `#[schemars(extend("if" = …, "then" = …, "else" = …))]`: the export states the rule as
/// the source does. A rule names properties and constants only (no `$ref`), so the JSON
/// is the same in both.
pub(super) fn rule_patch(rule: &Map<String, Value>) -> String {
    let parts: Vec<String> = rule
        .iter()
        .map(|(key, value)| format!("{key:?} = {value}"))
        .collect();
    format!("#[schemars(extend({}))]", parts.join(", "))
}

/// `#[schemars(extend(...))]` restoring the bounds of a bounded string or integer def.
pub(super) fn bounds_patch(def: &Value) -> Option<String> {
    let map = def.as_object()?;
    let kind = map.get("type").and_then(Value::as_str)?;
    if !matches!(kind, "string" | "integer" | "array") || map.contains_key("enum") {
        return None;
    }
    let mut parts = Vec::new();
    for keyword in PATCHED_KEYWORDS {
        if let Some(value) = map.get(keyword) {
            // typify already maps `minimum: 0` and `minimum: 1` to u64 / NonZeroU64, whose
            // schemas say so; restating them is harmless and keeps the patch uniform.
            parts.push(format!("{keyword:?} = {}", json_literal(value)));
        }
    }
    (!parts.is_empty()).then(|| format!("#[schemars(extend({}))]", parts.join(", ")))
}

/// `value` as a literal of schemars' `extend` (a `json!` expression): an integer past
/// `i32` gets an `i64` suffix, which an unsuffixed literal would overflow (a 1 TiB bound).
fn json_literal(value: &Value) -> String {
    match value.as_i64() {
        Some(n) if i32::try_from(n).is_err() => format!("{n}_i64"),
        _ => value.to_string(),
    }
}

/// `impl Validate` for every type generated in this module, as Rust source, plus the
/// names of those types (sorted).
pub(super) fn validate_impls(
    space: &TypeSpace,
    schema: &SourceSchema,
    own_defs: &BTreeMap<String, Value>,
    rules: &BTreeMap<String, Map<String, Value>>,
) -> Result<(String, Vec<String>), String> {
    let json_names = JsonNames(json_property_names(&schema.doc));
    let mut impls = BTreeMap::new();
    for ty in space.iter_types() {
        let name = ty.name();
        let body = match ty.details() {
            TypeDetails::Struct(details) => struct_checks(&details, rules.get(&name), &json_names)
                .map_err(|e| format!("{}: rule of {name}: {e}", schema.rel_path))?,
            TypeDetails::Enum(details) => enum_checks(&details, &json_names),
            TypeDetails::Newtype(_) => newtype_checks(own_defs.get(&name)),
            _ => continue,
        };
        impls.insert(name.clone(), validate_impl(&name, &body));
    }
    every_rule_has_a_struct(space, schema, rules)?;
    let names = impls.keys().cloned().collect();
    Ok((impls.into_values().collect(), names))
}

/// Rust field names to the JSON property names the schema spells them with.
struct JsonNames(BTreeMap<String, String>);

impl JsonNames {
    /// The JSON name of `field`; the field name itself when no property maps to it.
    fn of(&self, field: &str) -> String {
        self.0
            .get(field)
            .cloned()
            .unwrap_or_else(|| field.to_string())
    }
}

/// `impl Validate for <name>` whose `validate_at` runs `body`.
fn validate_impl(name: &str, body: &str) -> String {
    format!(
        "impl crate::validate::Validate for {name} {{\n\
         #[allow(unused_variables)]\nfn validate_at(&self, path: &str) -> ::std::result::Result<(), crate::validate::InvalidRequest> {{\n{body}\n}}\n}}\n"
    )
}

/// A struct validates each field at its JSON path, then its rule (`if`/`then`/`else`), if
/// it has one; `Err` when the rule cannot be written as JSON.
fn struct_checks(
    details: &TypeStruct,
    rule: Option<&Map<String, Value>>,
    json_names: &JsonNames,
) -> Result<String, serde_json::Error> {
    let mut body = String::new();
    for prop in details.properties_info() {
        body += &format!(
            "crate::validate::Validate::validate_at(&self.{field}, &crate::validate::join(path, {json:?}))?;\n",
            field = prop.name,
            json = json_names.of(prop.name),
        );
    }
    if let Some(rule) = rule {
        let json = serde_json::to_string(&Value::Object(rule.clone()))?;
        body += &format!("crate::validate::check_rule(path, self, {json:?})?;\n");
    }
    Ok(body + "Ok(())")
}

/// An enum validates what its variant holds: a tuple's items at the enum's path, a struct
/// variant's fields at their JSON paths.
fn enum_checks(details: &TypeEnum, json_names: &JsonNames) -> String {
    let mut arms = String::new();
    for (variant, shape) in details.variants() {
        arms += &match shape {
            TypeEnumVariant::Simple => format!("Self::{variant} => Ok(()),\n"),
            TypeEnumVariant::Tuple(items) => tuple_variant_arm(variant, items.len()),
            TypeEnumVariant::Struct(fields) => struct_variant_arm(variant, &fields, json_names),
        };
    }
    format!("match self {{ {arms} }}")
}

fn tuple_variant_arm(variant: &str, arity: usize) -> String {
    let bindings: Vec<String> = (0..arity).map(|i| format!("item{i}")).collect();
    let checks: String = bindings
        .iter()
        .map(|b| format!("crate::validate::Validate::validate_at({b}, path)?;"))
        .collect();
    format!(
        "Self::{variant}({}) => {{ {checks} Ok(()) }}\n",
        bindings.join(", ")
    )
}

fn struct_variant_arm(variant: &str, fields: &[(&str, TypeId)], json_names: &JsonNames) -> String {
    let names: Vec<&str> = fields.iter().map(|(field, _)| *field).collect();
    let checks: String = names
        .iter()
        .map(|field| {
            format!(
                "crate::validate::Validate::validate_at({field}, &crate::validate::join(path, {json:?}))?;",
                json = json_names.of(field)
            )
        })
        .collect();
    format!(
        "Self::{variant} {{ {} }} => {{ {checks} Ok(()) }}\n",
        names.join(", ")
    )
}

/// A newtype validates its inner value, then the bounds of its own `$defs` entry, if any.
fn newtype_checks(def: Option<&Value>) -> String {
    let mut body = String::from("crate::validate::Validate::validate_at(&self.0, path)?;\n");
    if let Some(def) = def {
        body += &newtype_bounds(def);
    }
    body + "Ok(())"
}

/// Only a struct's `Validate` checks a rule: a rule on any other type would go unchecked.
fn every_rule_has_a_struct(
    space: &TypeSpace,
    schema: &SourceSchema,
    rules: &BTreeMap<String, Map<String, Value>>,
) -> Result<(), String> {
    if let Some(name) = rules.keys().find(|name| {
        !space
            .iter_types()
            .any(|ty| &ty.name() == *name && matches!(ty.details(), TypeDetails::Struct(_)))
    }) {
        return Err(format!(
            "{}: {name} has a rule (`if`/`then`/`else`) but is not generated as a struct, so nothing would check it",
            schema.rel_path
        ));
    }
    Ok(())
}

/// The UTF-8 byte bound of a string schema. JSON Schema has no keyword for it (`maxLength`
/// counts characters), so the contract states it in the description, where every consumer
/// reads it, as the phrase `at most <N> UTF-8 bytes`; `None` when there is no such phrase.
pub fn max_bytes(def: &Value) -> Option<i64> {
    if def.get("type").and_then(Value::as_str) != Some("string") {
        return None;
    }
    let description = def.get("description").and_then(Value::as_str)?;
    description
        .match_indices("at most ")
        .find_map(|(at, phrase)| {
            let rest = &description[at + phrase.len()..];
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if !rest[digits..].starts_with(" UTF-8 bytes") {
                return None;
            }
            rest[..digits].parse().ok()
        })
}

/// Checks serde does not make: integer bounds and byte bounds ([`max_bytes`]).
pub(super) fn newtype_bounds(def: &Value) -> String {
    let mut checks = String::new();
    let int = |key: &str| def.get(key).and_then(Value::as_i64);
    if def.get("type").and_then(Value::as_str) == Some("integer") {
        let min = int("minimum").unwrap_or(i64::MIN);
        let max = int("maximum").unwrap_or(i64::MAX);
        checks += &format!("crate::validate::check_range(path, &self.0, {min}, {max})?;\n");
    }
    if def.get("type").and_then(Value::as_str) == Some("array") {
        let min = int("minItems").unwrap_or(0);
        let max = int("maxItems").unwrap_or(i64::MAX);
        checks += &format!("crate::validate::check_items(path, self.0.len(), {min}, {max})?;\n");
    }
    if let Some(max_bytes) = max_bytes(def) {
        checks += &format!("crate::validate::check_max_bytes(path, &self.0, {max_bytes})?;\n");
    }
    checks
}

/// Rust field name → JSON property name, for every property in a document.
pub(super) fn json_property_names(doc: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk_properties(doc, &mut out);
    out
}

pub(super) fn walk_properties(node: &Value, out: &mut BTreeMap<String, String>) {
    match node {
        Value::Object(map) => {
            if let Some(props) = map.get("properties").and_then(Value::as_object) {
                for name in props.keys() {
                    out.insert(snake_case(name), name.clone());
                }
            }
            map.values().for_each(|value| walk_properties(value, out));
        }
        Value::Array(items) => items.iter().for_each(|item| walk_properties(item, out)),
        _ => {}
    }
}

/// JSON names of the fields typify reads with `Option::deserialize` (required, nullable).
pub(super) fn required_nullable<'a>(fields: impl Iterator<Item = &'a syn::Field>) -> Vec<String> {
    use quote::ToTokens;
    let mut names = Vec::new();
    for field in fields {
        let serde: Vec<String> = field
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("serde"))
            .map(|a| a.to_token_stream().to_string())
            .collect();
        if !serde.iter().any(|t| {
            t.contains("Option :: deserialize") || t.contains("::std::option::Option::deserialize")
        }) {
            continue;
        }
        let renamed = serde.iter().find_map(|t| {
            let (_, rest) = t.split_once("rename = \"")?;
            rest.split_once('"').map(|(name, _)| name.to_string())
        });
        let ident = field
            .ident
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        names.push(renamed.unwrap_or(ident));
    }
    names
}

/// `#[schemars(transform = <fn>)]` plus that fn, when `names` is not empty.
pub(super) fn require_keys(
    owner: &str,
    names: &[String],
    extra: &mut Vec<syn::Item>,
) -> Option<syn::Attribute> {
    if names.is_empty() {
        return None;
    }
    let function = format!(
        "require_nullable_{}",
        snake_case(owner).trim_start_matches('_')
    );
    let list = names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let item = format!(
        "/// Lists the required, nullable properties of `{owner}` as required.\n\
         fn {function}(schema: &mut schemars::Schema) {{ crate::schema_fix::require_keys(schema, &[{list}]); }}"
    );
    extra.extend(syn::parse_str::<syn::Item>(&item).ok());
    let parsed: Result<syn::ItemStruct, _> =
        syn::parse_str(&format!("#[schemars(transform = {function})] struct X;"));
    parsed.ok().and_then(|d| d.attrs.into_iter().next())
}
