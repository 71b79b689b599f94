//! `docs/lifecycle.md` stays true: it lists every compile-fail case with the rule its
//! comment names (and no case that does not exist), and its transition table names
//! every transition method.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn doc() -> String {
    std::fs::read_to_string(root().join("docs/lifecycle.md")).unwrap()
}

/// The `// Rule: …` comment on top of a case, continuation lines joined.
fn rule_of(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let mut rule = first
        .strip_prefix("// Rule: ")
        .unwrap_or_else(|| panic!("a case must start with `// Rule: `, found {first:?}"))
        .to_owned();
    for line in lines {
        match line.strip_prefix("// ") {
            Some(more) => {
                rule.push(' ');
                rule.push_str(more);
            }
            None => break,
        }
    }
    rule
}

#[test]
fn every_compile_fail_case_is_documented_with_its_rule() {
    let doc = doc();
    let dir = root().join("ui-tests/tests/ui");
    let mut cases = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let rule = rule_of(&std::fs::read_to_string(&path).unwrap());
            let row = format!("| `{name}` | {rule} |");
            assert!(doc.contains(&row), "docs/lifecycle.md lacks the row\n{row}");
            assert!(
                path.with_extension("stderr").exists(),
                "{name} has no committed .stderr"
            );
            cases.insert(name);
        }
    }
    assert!(cases.len() >= 10, "too few cases: {cases:?}");
    let section = doc
        .split("## Compile-fail cases")
        .nth(1)
        .expect("a compile-fail section");
    let section = section.split("\n## ").next().unwrap_or(section);
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let name = line.trim_start_matches("| `").split('`').next().unwrap();
        assert!(
            cases.contains(name),
            "docs/lifecycle.md lists `{name}`, which is not in ui-tests/tests/ui"
        );
    }
}

#[test]
fn the_transition_table_names_every_transition() {
    let doc = doc();
    let table = doc
        .split("## Transition table")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a transition table");
    for method in [
        "spawn",
        "followup",
        "start",
        "steer",
        "stop",
        "confirm_stop",
        "complete",
        "fail",
        "lose_worker",
        "compacted",
        "checkpoint",
        "resume",
        "resume_with",
        "request_stop",
        "interrupt",
        "settle",
        "start_run",
        "settle_unchanged",
        "apply",
        "discard",
        "remove",
    ] {
        assert!(
            table.contains(&format!("`{method}`")),
            "the transition table does not name `{method}`"
        );
    }
}
