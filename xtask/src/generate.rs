//! `cargo xtask codegen` and `cargo xtask check`: write `generated/` from `schema-src/`, and
//! prove it fresh. Behind the `codegen` feature (typify, syn, jsonschema: most of xtask's
//! build), so `cargo xtask test` builds without them; `main` re-runs itself with the feature
//! for these two.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::check::{check, error_code_files, schema_files, stale_files};
use crate::codegen::{GeneratedFile, generate_rust};
use crate::source::SourceSet;

/// `cargo xtask codegen`: every generated file, from `schema-src/`.
pub fn codegen(root: &Path) -> Result<(), Vec<String>> {
    let set = SourceSet::load(root).map_err(|e| vec![e])?;
    let rust = generate_rust(&set).map_err(|e| vec![e])?;
    write_dir(root, "generated/rust", &rust)?;
    let bundles = crate::bundle::bundle_files(&set).map_err(|e| vec![e])?;
    write_dir(root, "generated/bundle", &bundles)?;
    let (core, docs) = error_code_files(root, &set).map_err(|e| vec![e])?;
    write_dir(root, "generated/core", std::slice::from_ref(&core))?;
    for doc in &docs {
        write_file(root, doc)?;
    }
    // The exported schemas come from the freshly generated types, so compile them first.
    let exported = exported_schemas(root)?;
    write_dir(
        root,
        "generated/schemas",
        &schema_files(&exported).map_err(|e| vec![e])?,
    )?;
    eprintln!(
        "wrote {} Rust files and {} schemas",
        rust.len(),
        exported.len()
    );
    Ok(())
}

/// `cargo xtask check`: generated/ is fresh, the exports agree with `schema-src/`, and the
/// fixtures are judged as committed.
pub fn run_check(root: &Path) -> Result<(), Vec<String>> {
    let set = SourceSet::load(root).map_err(|e| vec![e])?;
    // Stale Rust makes the export meaningless: report that first.
    let mut stale = stale_files(root, &generate_rust(&set).map_err(|e| vec![e])?);
    let (core, _) = error_code_files(root, &set).map_err(|e| vec![e])?;
    stale.extend(stale_files(root, &[core]));
    if !stale.is_empty() {
        return Err(stale);
    }
    let exported = exported_schemas(root)?;
    let summary = check(root, &exported)?;
    eprintln!(
        "ok: {} schema files, {} exports agree with schema-src, checked {} valid and {} invalid fixtures",
        summary.schemas, summary.compared, summary.fixtures.valid, summary.fixtures.invalid
    );
    Ok(())
}

/// Write `files` into `dir`, removing files there that are no longer generated.
fn write_dir(root: &Path, dir: &str, files: &[GeneratedFile]) -> Result<(), Vec<String>> {
    let abs = root.join(dir);
    fs::create_dir_all(&abs).map_err(|e| vec![format!("cannot create {dir}: {e}")])?;
    if let Ok(entries) = fs::read_dir(&abs) {
        for entry in entries.filter_map(Result::ok) {
            let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if !files.iter().any(|f| f.rel_path == rel) {
                fs::remove_file(entry.path())
                    .map_err(|e| vec![format!("cannot remove {rel}: {e}")])?;
            }
        }
    }
    for file in files {
        write_file(root, file)?;
    }
    Ok(())
}

/// Write one file unless it already holds `file.text`.
fn write_file(root: &Path, file: &GeneratedFile) -> Result<(), Vec<String>> {
    let path = root.join(&file.rel_path);
    let unchanged = fs::read_to_string(&path).is_ok_and(|t| t == file.text);
    if !unchanged {
        fs::write(&path, &file.text)
            .map_err(|e| vec![format!("cannot write {}: {e}", file.rel_path)])?;
    }
    Ok(())
}

/// Build and run `subzero-protocol`'s `export_schemas` example: the schemas the compiled
/// Rust types produce.
fn exported_schemas(root: &Path) -> Result<BTreeMap<String, Value>, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .current_dir(root)
        .args([
            "run",
            "--quiet",
            "--package",
            "subzero-protocol",
            "--example",
            "export_schemas",
        ])
        .output()
        .map_err(|e| vec![format!("cannot run cargo: {e}")])?;
    if !output.status.success() {
        return Err(vec![format!(
            "building the generated types failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )]);
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| vec![format!("export_schemas printed no JSON map: {e}")])
}
