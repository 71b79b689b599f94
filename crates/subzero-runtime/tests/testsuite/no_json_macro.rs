//! The broker and the supervisor build the generated protocol types directly, and the
//! store keeps the core's typed values (events are `EventBody`, rows are typed structs), so
//! a misspelt field is a compile error rather than a run-time `internal`: no `json!`
//! document may appear in `src/broker/`, `src/supervisor/` or `src/store/` outside their
//! unit tests, and no event type is spelt as a string there (an event's type is its
//! `EventKind`).

use std::path::{Path, PathBuf};

/// The directories whose non-test code must not use `json!`.
const TYPED_ONLY: [&str; 3] = ["src/broker", "src/supervisor", "src/store"];

/// The directories whose non-test code names events only by their typed kind.
const TYPED_EVENTS: [&str; 2] = ["src/broker", "src/store"];

/// Every event type (`EventKind` and the wire's `gap`), as its string would be spelt.
const EVENT_KINDS: [&str; 13] = [
    "run_queued",
    "run_started",
    "text",
    "tool",
    "steer_applied",
    "steer_discarded",
    "stop_requested",
    "stop_confirmed",
    "completed",
    "budget_exhausted",
    "failed",
    "interrupted",
    "gap",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The file's code before its unit tests (`#[cfg(test)]` items close a module), without
/// comments.
fn non_test_code(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .map(|(i, line)| (i + 1, line.split("//").next().unwrap_or_default()))
        .collect()
}

/// Whether a line of code invokes `json!` (however it is spelled or spaced).
fn uses_json_macro(code: &str) -> bool {
    let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed.contains("json!") || squeezed.contains("serde_json::json")
}

fn is_test_file(path: &Path) -> bool {
    path.file_stem().is_some_and(|stem| stem == "tests")
        || path.components().any(|c| c.as_os_str() == "tests")
}

fn non_test_files(dirs: &[&str]) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in dirs {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    files.retain(|p| !is_test_file(p));
    files
}

/// The string literals of a line of code that spell an event type, except a field name
/// given to the contract-error helpers (`wire(value, what, "text")`).
fn event_kind_literals(code: &str) -> Vec<&'static str> {
    if code.contains("wire(") || code.contains("broken(") {
        return Vec::new();
    }
    EVENT_KINDS
        .iter()
        .copied()
        .filter(|kind| code.contains(&format!("\"{kind}\"")))
        .collect()
}

#[test]
fn broker_and_store_code_name_events_by_their_typed_kind() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = non_test_files(&TYPED_EVENTS);
    assert!(files.len() > 10, "the scan found too few files: {files:?}");
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable source");
        for (number, code) in non_test_code(&text) {
            for kind in event_kind_literals(code) {
                let shown = path.strip_prefix(root).unwrap_or(path);
                found.push(format!("{}:{number}: \"{kind}\"", shown.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "name an event by its `EventKind` / `EventBody` variant, not a string:\n{}",
        found.join("\n")
    );
}

#[test]
fn broker_and_supervisor_code_builds_wire_types_without_json_macros() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = non_test_files(&TYPED_ONLY);
    assert!(
        files.len() > 10,
        "the scan found too few files to be looking in the right place: {files:?}"
    );
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable source");
        for (number, code) in non_test_code(&text) {
            if uses_json_macro(code) {
                let shown = path.strip_prefix(root).unwrap_or(path);
                found.push(format!("{}:{number}: {}", shown.display(), code.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "construct the generated protocol types (`subzero_protocol::…`) instead of `json!` documents:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_kind_scan_sees_a_kind_string_but_not_a_field_name() {
    assert_eq!(
        event_kind_literals("if kind == \"stop_confirmed\" {"),
        vec!["stop_confirmed"]
    );
    assert!(event_kind_literals("text: wire(text, what, \"text\")?,").is_empty());
    assert!(event_kind_literals("let texts = \"context\";").is_empty());
}

#[test]
fn the_scan_sees_a_json_macro_and_ignores_tests_and_comments() {
    let text = "let a = 1; // json!({})\nlet b = serde_json::json ! ({});\n#[cfg(test)]\nmod tests { fn t() { json!({}); } }\n";
    let flagged: Vec<usize> = non_test_code(text)
        .into_iter()
        .filter(|(_, code)| uses_json_macro(code))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(flagged, vec![2]);
}
