//! `cargo xtask check`: `generated/` is fresh, the exported schemas agree with
//! `schema-src/`, and every fixture is judged the same by both.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::{Map, Value};

use crate::codegen::{GeneratedFile, generate_rust};
use crate::compare::compare;
use crate::error_table;
use crate::fixtures::{self, Counts, Judges};
use crate::source::SourceSet;

/// Sort object keys recursively (serde_json keeps insertion order in this workspace).
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                out.insert(key.clone(), canonical(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// `generated/schemas/<stem>.schema.json` for every exported schema.
pub fn schema_files(exported: &BTreeMap<String, Value>) -> Result<Vec<GeneratedFile>, String> {
    exported
        .iter()
        .map(|(stem, schema)| {
            let text = serde_json::to_string_pretty(&canonical(schema))
                .map_err(|e| format!("cannot render exported {stem}: {e}"))?;
            Ok(GeneratedFile {
                rel_path: format!("generated/schemas/{stem}.schema.json"),
                text: text + "\n",
            })
        })
        .collect()
}

/// Every generated file, in memory: the Rust types and the exported schemas.
pub fn expected_files(
    set: &SourceSet,
    exported: &BTreeMap<String, Value>,
) -> Result<Vec<GeneratedFile>, String> {
    let mut files = generate_rust(set)?;
    files.extend(schema_files(exported)?);
    Ok(files)
}

/// What the error code table produces: the core's enum (a file codegen owns, in
/// `generated/core/`) and the documents whose marked sections it owns.
pub fn error_code_files(
    root: &Path,
    set: &SourceSet,
) -> Result<(GeneratedFile, Vec<GeneratedFile>), String> {
    let rows = error_table::rows(set)?;
    Ok((
        error_table::core_enum(&rows)?,
        error_table::doc_files(root, &rows)?,
    ))
}

/// Documents whose generated sections differ from `expected` (compared file by file: the
/// rest of `docs/` is hand-written).
pub fn stale_docs(root: &Path, expected: &[GeneratedFile]) -> Vec<String> {
    expected
        .iter()
        .filter(|file| {
            fs::read_to_string(root.join(&file.rel_path)).ok().as_ref() != Some(&file.text)
        })
        .map(|file| {
            format!(
                "{}: a generated section is stale: run `cargo xtask codegen`",
                file.rel_path
            )
        })
        .collect()
}

/// Files under `generated/` that differ from `expected`, are missing, or are extra.
pub fn stale_files(root: &Path, expected: &[GeneratedFile]) -> Vec<String> {
    let mut problems = Vec::new();
    for file in expected {
        match fs::read_to_string(root.join(&file.rel_path)) {
            Ok(text) if text == file.text => {}
            _ => problems.push(format!(
                "{} is stale: run `cargo xtask codegen`",
                file.rel_path
            )),
        }
    }
    let mut dirs: Vec<&str> = expected
        .iter()
        .filter_map(|f| f.rel_path.rsplit_once('/').map(|(dir, _)| dir))
        .collect();
    dirs.dedup();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if !expected.iter().any(|f| f.rel_path == rel) {
                problems.push(format!(
                    "{rel} is stale (no longer generated): run `cargo xtask codegen`"
                ));
            }
        }
    }
    problems
}

/// What a passing check looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Source schema files.
    pub schemas: usize,
    /// Top-level schemas compared with their export.
    pub compared: usize,
    /// Fixtures judged.
    pub fixtures: Counts,
}

/// Run every check. `exported` are the schemas the compiled Rust types produce.
pub fn check(root: &Path, exported: &BTreeMap<String, Value>) -> Result<Summary, Vec<String>> {
    let set = SourceSet::load(root).map_err(|e| vec![e])?;
    let mut problems = Vec::new();
    match expected_files(&set, exported) {
        Ok(files) => problems.extend(stale_files(root, &files)),
        Err(e) => problems.push(e),
    }
    match crate::bundle::bundle_files(&set) {
        Ok(bundles) => problems.extend(stale_files(root, &bundles)),
        Err(e) => problems.push(e),
    }
    match fixtures::load_future(root) {
        Ok(future) => problems.extend(fixtures::judge_future(&set, &future)),
        Err(e) => problems.push(e),
    }
    match error_code_files(root, &set) {
        Ok((core, docs)) => {
            problems.extend(stale_files(root, &[core]));
            problems.extend(stale_docs(root, &docs));
            if let Ok(rows) = error_table::rows(&set) {
                problems.extend(error_table::troubleshooting_sections(root, &rows));
            }
        }
        Err(e) => problems.push(e),
    }
    let mut compared = 0;
    for schema in set.roots() {
        match exported.get(&schema.stem) {
            Some(export) => match compare(&set, &schema.stem, export) {
                Ok(diffs) => {
                    compared += 1;
                    problems.extend(diffs);
                }
                Err(e) => problems.push(format!("{}: {e}", schema.rel_path)),
            },
            None => problems.push(format!(
                "{}: no exported schema (is it in visit_roots?)",
                schema.rel_path
            )),
        }
    }
    let mut counts = Counts::default();
    match fixtures::load(root).and_then(|f| Judges::new(&set, exported).map(|j| (f, j))) {
        Ok((fixtures, judges)) => {
            let (c, p) = fixtures::judge_all(&set, &judges, &fixtures);
            counts = c;
            problems.extend(p);
        }
        Err(e) => problems.push(e),
    }
    if problems.is_empty() {
        Ok(Summary {
            schemas: set.schemas.len(),
            compared,
            fixtures: counts,
        })
    } else {
        Err(problems)
    }
}
