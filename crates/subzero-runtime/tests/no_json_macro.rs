//! The broker and the supervisor build the generated protocol types directly, so a
//! misspelt field is a compile error rather than a run-time `internal`: no `json!`
//! document (later deserialized into a wire type) may appear in `src/broker/` or
//! `src/supervisor/` outside their unit tests.

use std::path::{Path, PathBuf};

/// The directories whose non-test code must not use `json!`.
const TYPED_ONLY: [&str; 2] = ["src/broker", "src/supervisor"];

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

#[test]
fn broker_and_supervisor_code_builds_wire_types_without_json_macros() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in TYPED_ONLY {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 10,
        "the scan found too few files to be looking in the right place: {files:?}"
    );
    let mut found = Vec::new();
    for path in files.iter().filter(|p| !is_test_file(p)) {
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
fn the_scan_sees_a_json_macro_and_ignores_tests_and_comments() {
    let text = "let a = 1; // json!({})\nlet b = serde_json::json ! ({});\n#[cfg(test)]\nmod tests { fn t() { json!({}); } }\n";
    let flagged: Vec<usize> = non_test_code(text)
        .into_iter()
        .filter(|(_, code)| uses_json_macro(code))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(flagged, vec![2]);
}
