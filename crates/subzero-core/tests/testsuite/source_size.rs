//! Code we can read: no hand-written file of a shipped crate is over 600 lines and no
//! function over 80 (in `subzero-core`, `subzero-runtime`, `subzero-worker` and `subzero-sys`
//! their tests too, with test functions up to 100).
//! A file over the bound is split by what it holds; a function over it is two functions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 80;
const MAX_TEST_FN_LINES: usize = 100;

/// The crates the bounds hold for, sources and tests.
const CRATES: &[&str] = &[
    "crates/subzero-core",
    "crates/subzero-runtime",
    "crates/subzero-worker",
    "crates/subzero-sys",
];

/// The other shipped crates: the bounds hold for their sources (`src/`).
const SOURCES_ONLY: &[&str] = &["crates/subzero-protocol", "crates/subzero"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every Rust file the bounds hold for, relative to the workspace root.
fn sources() -> Vec<(String, String)> {
    let mut all = sources_of(CRATES, &["src", "tests"]);
    all.extend(sources_of(SOURCES_ONLY, &["src"]));
    all
}

/// Every Rust file in `dirs` of `crates`, relative to the workspace root.
fn sources_of(crates: &[&str], dirs: &[&str]) -> Vec<(String, String)> {
    let root = root();
    let mut files = Vec::new();
    for krate in crates {
        for dir in dirs {
            walk(&root.join(krate).join(dir), &mut files);
        }
    }
    assert!(files.len() > 20, "walked too few files: {files:?}");
    files
        .iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

/// `line` without its string and char literals and its `//` comment, so the braces left
/// are the code's.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A char literal ('{', '\''), or a lifetime (no closing quote soon).
                let rest: String = chars.clone().take(3).collect();
                if let Some(escaped) = rest.strip_prefix('\\') {
                    let close = escaped.find('\'').map_or(1, |i| i + 2);
                    for _ in 0..=close {
                        chars.next();
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// The name of the function a line starts, if it starts one.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    if rest.starts_with("pub(in ") {
        rest = rest.split_once(") ").map_or(rest, |(_, r)| r);
    }
    for prefix in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    Some(&name[..end])
}

/// `(name, first line, lines)` of every function with a body in `text`.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        let mut depth = 0i64;
        let mut opened = false;
        for (i, later) in lines.iter().enumerate().skip(start) {
            let code = code_of(later);
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                found.push((name.to_owned(), start + 1, i - start + 1));
                break;
            }
            if !opened && code.trim_end().ends_with(';') {
                break;
            }
        }
    }
    found
}

#[test]
fn no_file_is_over_600_lines() {
    let long: Vec<String> = sources()
        .iter()
        .map(|(rel, text)| (rel, text.lines().count()))
        .filter(|(_, n)| *n > MAX_FILE_LINES)
        .map(|(rel, n)| format!("{rel}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "split these files by what they hold (at most {MAX_FILE_LINES} lines):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_is_over_80_lines_or_100_in_tests() {
    let mut long = Vec::new();
    for (rel, text) in sources() {
        let bound = if rel.contains("/tests/") {
            MAX_TEST_FN_LINES
        } else {
            MAX_FN_LINES
        };
        for (name, line, n) in functions(&text) {
            if n > bound {
                long.push(format!("{rel}:{line}: fn {name} is {n} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "a function that needs more lines than its bound ({MAX_FN_LINES}; {MAX_TEST_FN_LINES} in tests) is two functions:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_measure_sees_functions_and_ignores_braces_in_literals() {
    let text = "fn a() {\n    let s = \"}}\";\n    let c = '{';\n    // }\n}\npub(crate) async fn b(x: u8) -> u8 {\n    x\n}\nfn c();\n";
    let found = functions(text);
    assert_eq!(
        found,
        vec![("a".to_owned(), 1, 5), ("b".to_owned(), 6, 3)],
        "{found:?}"
    );
}
