//! One write path: the lifecycle columns of children and runs are written only by
//! `store/write.rs`, from what the core decided, and no SQL text anywhere spells a
//! state, status, phase or ownership value (they are bound from the typed enums).
//! The schema's CHECK constraints (`store/schema.rs`) are the one place that lists them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

const WRITE_MODULE: &str = "crates/subzero-runtime/src/store/write.rs";
const LEDGER_WRITE_MODULE: &str = "crates/subzero-runtime/src/store/ledger/write.rs";
const SCHEMA_MODULE: &str = "crates/subzero-runtime/src/store/schema.rs";
/// The migrations' own tests (a unit-test module of `schema.rs`): like `tests/`, they set
/// up rows of older schema versions by hand on purpose.
const SCHEMA_TESTS: &str = "crates/subzero-runtime/src/store/schema_tests.rs";

/// Whether `path` is the schema or its migration tests, which spell stored values.
fn is_schema(path: &str) -> bool {
    path == SCHEMA_MODULE || path == SCHEMA_TESTS
}

/// Columns whose values come from a core transition.
const LIFECYCLE_COLUMNS: &[&str] = &[
    "state",
    "phase",
    "ownership",
    "owner_token",
    "owner_generation",
    "active_run_id",
    "interrupt_reason",
    "last_leaf_id",
    "last_leaf_digest",
    "generation",
];

/// Columns of a checkout whose values come from a core checkout decision.
const CHECKOUT_LIFECYCLE_COLUMNS: &[&str] = &[
    "state",
    "head_commit",
    "files_changed",
    "insertions",
    "deletions",
    "generation",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sources() -> Vec<(String, String)> {
    let root = workspace();
    let mut out = Vec::new();
    let mut stack = vec![root.join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                // Sources only: tests may set up odd rows on purpose.
                if name != "tests" && name != "node_modules" && name != "target" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, fs::read_to_string(&path).unwrap()));
            }
        }
    }
    assert!(
        out.iter().any(|(p, _)| p == WRITE_MODULE),
        "the walk must see the write module"
    );
    out
}

/// The Rust string literals of `text` (their raw contents, continuation lines joined).
fn string_literals(text: &str) -> Vec<String> {
    let literal = Regex::new(r#"(?s)"((?:[^"\\]|\\.)*)""#).unwrap();
    literal
        .captures_iter(text)
        .map(|c| c[1].replace("\\\n", " "))
        .collect()
}

#[test]
fn no_sql_text_spells_a_state_status_phase_or_ownership_value() {
    let compared = Regex::new(
        r"(?i)\b(state|status|phase|ownership)\s*(=|!=|<>|\bnot\s+in\b|\bin\b)\s*\(?\s*'[a-z_]+'",
    )
    .unwrap();
    let assigned = Regex::new(r"(?i)\bset\b[^;]*\b(state|status|phase|ownership)\s*=\s*'").unwrap();
    let mut found = Vec::new();
    for (path, text) in sources() {
        if is_schema(&path) {
            continue;
        }
        for lit in string_literals(&text) {
            if compared.is_match(&lit) || assigned.is_match(&lit) {
                found.push(format!("{path}: {lit}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "bind the typed value instead of spelling it in SQL:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_write_module_writes_lifecycle_columns() {
    let update_children = Regex::new(r"(?is)\bupdate\s+children\s+set\s+(.*)").unwrap();
    let assignment = Regex::new(r"(?i)\b([a-z_]+)\s*=").unwrap();
    let other_writes =
        Regex::new(r"(?i)\b(update\s+runs\s+set|insert\s+(or\s+\w+\s+)?into\s+(children|runs)\b)")
            .unwrap();
    let mut found = Vec::new();
    for (path, text) in sources() {
        if path == WRITE_MODULE || is_schema(&path) {
            continue;
        }
        for lit in string_literals(&text) {
            if other_writes.is_match(&lit) {
                found.push(format!("{path}: {lit}"));
            }
            if let Some(c) = update_children.captures(&lit) {
                let set = c[1].split_once(" WHERE ").map_or(&c[1], |(s, _)| s);
                for a in assignment.captures_iter(set) {
                    if LIFECYCLE_COLUMNS.contains(&a[1].to_ascii_lowercase().as_str()) {
                        found.push(format!("{path}: sets {}: {lit}", &a[1]));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "lifecycle columns are written by store/write.rs from a core transition only:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_ledger_write_module_writes_a_checkouts_lifecycle_columns() {
    let update = Regex::new(r"(?is)\bupdate\s+checkouts\s+set\s+(.*)").unwrap();
    let insert = Regex::new(r"(?i)\binsert\s+(or\s+\w+\s+)?into\s+checkouts\b").unwrap();
    let assignment = Regex::new(r"(?i)\b([a-z_]+)\s*=").unwrap();
    let mut found = Vec::new();
    for (path, text) in sources() {
        if path == LEDGER_WRITE_MODULE || is_schema(&path) {
            continue;
        }
        for lit in string_literals(&text) {
            if insert.is_match(&lit) {
                found.push(format!("{path}: {lit}"));
            }
            if let Some(c) = update.captures(&lit) {
                let set = c[1].split_once(" WHERE ").map_or(&c[1], |(s, _)| s);
                for a in assignment.captures_iter(set) {
                    if CHECKOUT_LIFECYCLE_COLUMNS.contains(&a[1].to_ascii_lowercase().as_str()) {
                        found.push(format!("{path}: sets {}: {lit}", &a[1]));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a checkout's lifecycle columns are written by store/ledger/write.rs from a core decision only:\n{}",
        found.join("\n")
    );
    let write = fs::read_to_string(workspace().join(LEDGER_WRITE_MODULE)).unwrap();
    let lits = string_literals(&write).join("\n");
    assert!(insert.is_match(&lits), "ledger/write.rs inserts checkouts");
    for column in CHECKOUT_LIFECYCLE_COLUMNS {
        assert!(
            lits.contains(&format!("{column} = ")),
            "ledger/write.rs writes {column}"
        );
    }
}

/// A row column read by its position (`row.get(3)`, `r.get::<_, i64>(0)`).
fn positional_get() -> Regex {
    Regex::new(r"\.get(::<[^>]*>)?\(\s*[0-9]+\s*\)").unwrap()
}

#[test]
fn the_store_and_the_broker_read_columns_by_name() {
    let positional = positional_get();
    let mut found = Vec::new();
    for (path, text) in sources() {
        let scanned = path.starts_with("crates/subzero-runtime/src/store/")
            || path.starts_with("crates/subzero-runtime/src/broker/");
        if !scanned {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if positional.is_match(code) {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "read each column by its name (`row.get(\"state\")`, `row.col::<T>(\"state\")`):\n{}",
        found.join("\n")
    );
    assert!(positional.is_match("|r| r.get::<_, i64>(0)"));
    assert!(!positional.is_match("r.get(\"state\")"));
}

#[test]
fn the_checks_see_what_they_police() {
    // The write module itself writes every lifecycle column and spells no value.
    let write = fs::read_to_string(workspace().join(WRITE_MODULE)).unwrap();
    let lits = string_literals(&write).join("\n");
    for column in LIFECYCLE_COLUMNS {
        assert!(
            lits.contains(&format!("{column} = ")),
            "write.rs writes {column}"
        );
    }
    // A literal of the old kind is caught.
    let sample = r#"let q = "UPDATE runs SET status = 'stop_requested' WHERE run_id = ?1";"#;
    let compared = Regex::new(r"(?i)\bset\b[^;]*\b(state|status|phase|ownership)\s*=\s*'").unwrap();
    assert!(string_literals(sample).iter().any(|l| compared.is_match(l)));
}
