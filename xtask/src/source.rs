//! Loading `schema-src/v1/`: every `*.schema.json`, its `$id`, its root type and its `$defs`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::Value;

/// The URN prefix of every v1 `$id`.
pub const URN_PREFIX: &str = "urn:subzero:protocol:1:";

/// One hand-written schema file.
#[derive(Debug, Clone)]
pub struct SourceSchema {
    /// File stem without `.schema.json`, e.g. `child-event`.
    pub stem: String,
    /// Path relative to the workspace root, e.g. `schema-src/v1/child-event.schema.json`.
    pub rel_path: String,
    /// The full document.
    pub doc: Value,
}

impl SourceSchema {
    /// The Rust module name of the file (`child-event` → `child_event`).
    pub fn module(&self) -> String {
        self.stem.replace('-', "_")
    }

    /// The root type name (the document's `title`), if the file has a root type.
    pub fn root_title(&self) -> Option<&str> {
        self.doc.get("title").and_then(Value::as_str)
    }

    /// The file's `$defs`.
    pub fn defs(&self) -> BTreeMap<String, Value> {
        self.doc
            .get("$defs")
            .and_then(Value::as_object)
            .map(|defs| defs.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// The `$id` the file must carry.
    pub fn expected_id(&self) -> String {
        format!("{URN_PREFIX}{}", self.stem)
    }
}

/// Where each named type lives.
#[derive(Debug, Clone, Default)]
pub struct TypeIndex {
    /// Type name → stem of the file defining it.
    pub owners: BTreeMap<String, String>,
    /// Stem → root type name.
    pub roots: BTreeMap<String, String>,
}

impl TypeIndex {
    /// The type name a `$ref` denotes: `urn:…:<stem>#/$defs/<Name>` → `Name`,
    /// `urn:…:<stem>` → the root title of `stem`, `#/$defs/<Name>` → `Name`.
    pub fn resolve(&self, reference: &str) -> Result<String, String> {
        let (file, pointer) = reference.split_once('#').unwrap_or((reference, ""));
        if let Some(name) = pointer.strip_prefix("/$defs/") {
            // A local `#/$defs/X` may name a type that only this file knows (e.g. one
            // hoisted by codegen); a `urn:` reference must name a published type.
            return if file.is_empty() || self.owners.contains_key(name) {
                Ok(name.to_string())
            } else {
                Err(format!("$ref {reference}: no type {name}"))
            };
        }
        if !pointer.is_empty() {
            return Err(format!(
                "$ref {reference}: only #/$defs/<Name> pointers are supported"
            ));
        }
        let stem = file
            .strip_prefix(URN_PREFIX)
            .ok_or_else(|| format!("$ref {reference}: use {URN_PREFIX}<file>[#/$defs/<Name>]"))?;
        self.roots
            .get(stem)
            .cloned()
            .ok_or_else(|| format!("$ref {reference}: {stem} has no root type"))
    }
}

/// All schema files of one version directory, sorted by stem.
#[derive(Debug, Clone)]
pub struct SourceSet {
    /// The files.
    pub schemas: Vec<SourceSchema>,
}

impl SourceSet {
    /// Load `schema-src/v1/*.schema.json` under `root`.
    pub fn load(root: &Path) -> Result<Self, String> {
        let dir = root.join("schema-src").join("v1");
        let entries =
            fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let mut schemas = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".schema.json") else {
                continue;
            };
            let text = fs::read_to_string(entry.path())
                .map_err(|e| format!("cannot read {}: {e}", entry.path().display()))?;
            let doc: Value = serde_json::from_str(&text)
                .map_err(|e| format!("schema-src/v1/{name} is not JSON: {e}"))?;
            schemas.push(SourceSchema {
                stem: stem.to_string(),
                rel_path: format!("schema-src/v1/{name}"),
                doc,
            });
        }
        schemas.sort_by(|a, b| a.stem.cmp(&b.stem));
        let set = SourceSet { schemas };
        set.lint()?;
        Ok(set)
    }

    /// The file with this stem.
    pub fn get(&self, stem: &str) -> Option<&SourceSchema> {
        self.schemas.iter().find(|s| s.stem == stem)
    }

    /// Files that have a root type (the "top-level schemas").
    pub fn roots(&self) -> impl Iterator<Item = &SourceSchema> {
        self.schemas.iter().filter(|s| s.root_title().is_some())
    }

    /// Where every named type (root titles and `$defs`) is defined.
    pub fn index(&self) -> Result<TypeIndex, String> {
        let mut index = TypeIndex::default();
        for schema in &self.schemas {
            if let Some(title) = schema.root_title() {
                index.roots.insert(schema.stem.clone(), title.to_string());
            }
            let names = schema
                .root_title()
                .map(str::to_string)
                .into_iter()
                .chain(schema.defs().into_keys());
            for name in names {
                if let Some(other) = index.owners.insert(name.clone(), schema.stem.clone()) {
                    return Err(format!(
                        "type name {name} is defined by both {other} and {}: names must be unique across schema-src/v1",
                        schema.stem
                    ));
                }
            }
        }
        Ok(index)
    }

    /// Rules every source file must follow (ids, closed objects, descriptions).
    fn lint(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        for schema in &self.schemas {
            if schema.doc.get("$id").and_then(Value::as_str) != Some(schema.expected_id().as_str())
            {
                problems.push(format!(
                    "{}: $id must be {}",
                    schema.rel_path,
                    schema.expected_id()
                ));
            }
            if schema.doc.get("$schema").and_then(Value::as_str)
                != Some("https://json-schema.org/draft/2020-12/schema")
            {
                problems.push(format!(
                    "{}: $schema must be draft 2020-12",
                    schema.rel_path
                ));
            }
            lint_node(&schema.doc, &schema.rel_path, "#", &mut problems);
            for (name, def) in schema.defs() {
                if def.get("title").and_then(Value::as_str) != Some(name.as_str()) {
                    problems.push(format!(
                        "{} #/$defs/{name}: title must be \"{name}\" (generators name the type by it)",
                        schema.rel_path
                    ));
                }
            }
        }
        // Generators (json-schema-to-typescript, datamodel-code-generator) name a type by its
        // title; two types with one title collide when all modules are used together.
        let mut titles: BTreeMap<String, String> = BTreeMap::new();
        for schema in &self.schemas {
            let mut found = Vec::new();
            collect_titles(&schema.doc, "#", &mut found);
            for (title, at) in found {
                let here = format!("{} {at}", schema.rel_path);
                if let Some(first) = titles.insert(title.clone(), here.clone()) {
                    problems.push(format!(
                        "title {title} is used twice ({first} and {here}): titles must be unique across schema-src/v1"
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }
}

/// `#` (a file's root) or `#/$defs/<Name>`: where a rule keyword may stand.
fn at_type_level(at: &str) -> bool {
    at == "#"
        || at
            .strip_prefix("#/$defs/")
            .is_some_and(|name| !name.contains('/'))
}

/// Every `title` in `node` with where it stands.
fn collect_titles(node: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match node {
        Value::Object(map) => {
            if let Some(title) = map.get("title").and_then(Value::as_str) {
                out.push((title.to_string(), at.to_string()));
            }
            for (key, child) in map {
                if !matches!(key.as_str(), "const" | "enum" | "examples" | "default") {
                    collect_titles(child, &format!("{at}/{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_titles(item, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn lint_node(node: &Value, file: &str, at: &str, problems: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        return;
    };
    if map.get("type").and_then(Value::as_str) == Some("object")
        && !map.contains_key("additionalProperties")
    {
        problems.push(format!(
            "{file} {at}: every object must state additionalProperties"
        ));
    }
    // A rule's subschemas (`if`/`then`/`else`) only name properties the type describes.
    let in_rule = at
        .split('/')
        .any(|segment| matches!(segment, "if" | "then" | "else"));
    if let Some(props) = map
        .get("properties")
        .and_then(Value::as_object)
        .filter(|_| !in_rule)
    {
        for (name, prop) in props {
            if prop
                .get("description")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                problems.push(format!(
                    "{file} {at}/properties/{name}: missing description"
                ));
            }
        }
    }
    if map.contains_key("enum") {
        problems.push(format!(
            "{file} {at}: write an enumeration as `oneOf` of `{{const, description}}`, one per value, so every value is explained"
        ));
    }
    if let Some(variants) = map.get("oneOf").and_then(Value::as_array) {
        for (i, variant) in variants.iter().enumerate() {
            if variant.get("const").is_some() {
                // An enumeration value: explained, and untitled so that generators do not
                // make a named type of every value.
                if variant.get("title").is_some()
                    || variant
                        .get("description")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                {
                    problems.push(format!(
                        "{file} {at}/oneOf/{i}: an enumeration value needs a description and no title"
                    ));
                }
            } else if variant.get("title").is_none() {
                problems.push(format!(
                    "{file} {at}/oneOf/{i}: every oneOf variant needs a title"
                ));
            }
        }
    }
    for key in ["if", "then", "else"] {
        if map.contains_key(key) && !at_type_level(at) {
            problems.push(format!(
                "{file} {at}: `{key}` is supported only on a file's root type or a `$defs` entry"
            ));
        }
    }
    for (key, child) in map {
        let child_at = format!("{at}/{key}");
        match child {
            Value::Object(_) => lint_node(child, file, &child_at, problems),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    lint_node(item, file, &format!("{child_at}/{i}"), problems);
                }
            }
            _ => {}
        }
    }
}
