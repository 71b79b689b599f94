//! Conformance fixtures: `fixtures/v1/<stem>/{valid,invalid}/*.json`, judged by the
//! `jsonschema` crate against both the source schema and the exported one.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use jsonschema::{Registry, Resource, Validator};
use serde_json::Value;

use crate::source::SourceSet;

/// One fixture document.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// Stem of the schema it belongs to.
    pub stem: String,
    /// True under `valid/`, false under `invalid/`.
    pub valid: bool,
    /// Path relative to the workspace root.
    pub rel_path: String,
    /// The document.
    pub doc: Value,
}

/// Load every fixture under `fixtures/v1/` (scenarios live elsewhere and are not read).
pub fn load(root: &Path) -> Result<Vec<Fixture>, String> {
    let base = root.join("fixtures").join("v1");
    let mut out = Vec::new();
    let mut stems: Vec<_> = fs::read_dir(&base)
        .map_err(|e| format!("cannot read {}: {e}", base.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    stems.sort();
    for stem in stems {
        for (kind, valid) in [("valid", true), ("invalid", false)] {
            let dir = base.join(&stem).join(kind);
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json"))
                .collect();
            names.sort();
            for name in names {
                let rel_path = format!("fixtures/v1/{stem}/{kind}/{name}");
                let text = fs::read_to_string(root.join(&rel_path))
                    .map_err(|e| format!("cannot read {rel_path}: {e}"))?;
                let doc = serde_json::from_str(&text)
                    .map_err(|e| format!("{rel_path} is not JSON: {e}"))?;
                out.push(Fixture {
                    stem: stem.clone(),
                    valid,
                    rel_path,
                    doc,
                });
            }
        }
    }
    Ok(out)
}

/// Validators for every top-level schema, source and exported.
pub struct Judges {
    source: BTreeMap<String, Validator>,
    exported: BTreeMap<String, Validator>,
}

impl std::fmt::Debug for Judges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judges")
            .field("stems", &self.source.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Judges {
    /// Compile validators for `set` (cross-file `$ref`s resolve through a registry of all
    /// source files) and for the exported schemas.
    pub fn new(set: &SourceSet, exported: &BTreeMap<String, Value>) -> Result<Self, String> {
        let resources = set
            .schemas
            .iter()
            .map(|s| (s.expected_id(), Resource::from_contents(s.doc.clone())));
        let registry = Registry::new()
            .extend(resources)
            .and_then(|b| b.prepare())
            .map_err(|e| format!("cannot register schema-src: {e}"))?;
        let mut source = BTreeMap::new();
        for schema in set.roots() {
            let validator = jsonschema::options()
                .with_registry(&registry)
                .build(&schema.doc)
                .map_err(|e| format!("{}: not a valid schema: {e}", schema.rel_path))?;
            source.insert(schema.stem.clone(), validator);
        }
        let mut compiled = BTreeMap::new();
        for (stem, schema) in exported {
            let validator = jsonschema::validator_for(schema)
                .map_err(|e| format!("exported {stem}: not a valid schema: {e}"))?;
            compiled.insert(stem.clone(), validator);
        }
        Ok(Self {
            source,
            exported: compiled,
        })
    }

    /// (accepted by the source schema, accepted by the exported schema).
    pub fn judge(&self, stem: &str, doc: &Value) -> Result<(bool, bool), String> {
        let source = self
            .source
            .get(stem)
            .ok_or_else(|| format!("no source schema {stem}"))?;
        let exported = self
            .exported
            .get(stem)
            .ok_or_else(|| format!("no exported schema {stem}"))?;
        Ok((source.is_valid(doc), exported.is_valid(doc)))
    }

    /// The first error the source schema reports, for messages.
    pub fn explain(&self, stem: &str, doc: &Value) -> String {
        self.source
            .get(stem)
            .and_then(|v| {
                v.iter_errors(doc)
                    .next()
                    .map(|e| format!("{} at {}", e, e.instance_path()))
            })
            .unwrap_or_default()
    }
}

/// Minimum fixtures per top-level schema and kind.
pub const MIN_PER_KIND: usize = 3;

/// Counts of a fixture run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Valid fixtures checked.
    pub valid: usize,
    /// Invalid fixtures checked.
    pub invalid: usize,
}

/// Judge every fixture by both schemas; valid ones must pass both, invalid ones fail both.
pub fn judge_all(set: &SourceSet, judges: &Judges, fixtures: &[Fixture]) -> (Counts, Vec<String>) {
    let mut counts = Counts::default();
    let mut problems = Vec::new();
    for fixture in fixtures {
        let (by_source, by_export) = match judges.judge(&fixture.stem, &fixture.doc) {
            Ok(verdicts) => verdicts,
            Err(e) => {
                problems.push(format!("{}: {e}", fixture.rel_path));
                continue;
            }
        };
        if fixture.valid {
            counts.valid += 1;
            if !by_source {
                problems.push(format!(
                    "{}: rejected by schema-src: {}",
                    fixture.rel_path,
                    judges.explain(&fixture.stem, &fixture.doc)
                ));
            }
            if !by_export {
                problems.push(format!(
                    "{}: rejected by the exported schema",
                    fixture.rel_path
                ));
            }
        } else {
            counts.invalid += 1;
            if by_source {
                problems.push(format!("{}: accepted by schema-src", fixture.rel_path));
            }
            if by_export {
                problems.push(format!(
                    "{}: accepted by the exported schema",
                    fixture.rel_path
                ));
            }
        }
    }
    for schema in set.roots() {
        for valid in [true, false] {
            let n = fixtures
                .iter()
                .filter(|f| f.stem == schema.stem && f.valid == valid)
                .count();
            if n < MIN_PER_KIND {
                let kind = if valid { "valid" } else { "invalid" };
                problems.push(format!(
                    "fixtures/v1/{}/{kind}/ has {n} documents; at least {MIN_PER_KIND} are required",
                    schema.stem
                ));
            }
        }
    }
    (counts, problems)
}

/// "From the future" fixtures: `fixtures/v1-future/<stem>/*.json`, documents a later v1
/// minor may send (a new event type, a new optional property, a new error code).
pub fn load_future(root: &Path) -> Result<Vec<Fixture>, String> {
    let base = root.join("fixtures").join("v1-future");
    let mut out = Vec::new();
    let mut stems: Vec<_> = fs::read_dir(&base)
        .map_err(|e| format!("cannot read {}: {e}", base.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    stems.sort();
    for stem in stems {
        let mut names: Vec<String> = fs::read_dir(base.join(&stem))
            .map_err(|e| format!("cannot read fixtures/v1-future/{stem}: {e}"))?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        for name in names {
            let rel_path = format!("fixtures/v1-future/{stem}/{name}");
            let text = fs::read_to_string(root.join(&rel_path))
                .map_err(|e| format!("cannot read {rel_path}: {e}"))?;
            let doc =
                serde_json::from_str(&text).map_err(|e| format!("{rel_path} is not JSON: {e}"))?;
            out.push(Fixture {
                stem: stem.clone(),
                valid: true,
                rel_path,
                doc,
            });
        }
    }
    Ok(out)
}

/// The versioning policy, checked: every future fixture is refused by the closed v1
/// schema (so it really holds something v1.0 does not define) and accepted by the
/// consumer bundle's type of the same name (so a v1.0 consumer reads it).
pub fn judge_future(set: &SourceSet, future: &[Fixture]) -> Vec<String> {
    let mut problems = Vec::new();
    let normative = match Judges::new(set, &BTreeMap::new()) {
        Ok(judges) => judges,
        Err(e) => return vec![e],
    };
    let consumer = match crate::bundle::bundle(set, crate::bundle::Flavor::Consumer) {
        Ok(doc) => doc,
        Err(e) => return vec![e],
    };
    for fixture in future {
        let Some(title) = set.get(&fixture.stem).and_then(|s| s.root_title()) else {
            problems.push(format!("{}: no schema {}", fixture.rel_path, fixture.stem));
            continue;
        };
        match normative.source.get(&fixture.stem) {
            Some(v) if v.is_valid(&fixture.doc) => problems.push(format!(
                "{}: the v1 schema already accepts it, so it is not from the future",
                fixture.rel_path
            )),
            Some(_) => {}
            None => problems.push(format!("{}: no schema {}", fixture.rel_path, fixture.stem)),
        }
        let mut root = consumer.clone();
        if let Some(map) = root.as_object_mut() {
            map.insert(
                "$ref".to_string(),
                Value::String(format!("#/$defs/{title}")),
            );
        }
        match jsonschema::validator_for(&root) {
            Ok(v) => {
                if let Some(error) = v.iter_errors(&fixture.doc).next() {
                    problems.push(format!(
                        "{}: a v1.0 consumer refuses it: {error} at {}",
                        fixture.rel_path,
                        error.instance_path()
                    ));
                }
            }
            Err(e) => problems.push(format!("the consumer bundle is not a valid schema: {e}")),
        }
    }
    if future.len() < 3 {
        problems.push(format!(
            "fixtures/v1-future/ has {} documents; a new event type, a new optional property and a new error code are required",
            future.len()
        ));
    }
    problems
}
