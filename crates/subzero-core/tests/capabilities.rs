//! The supervisor's escape hatch stays in the supervisor.
//!
//! `Supervisor::designate_for_runtime_supervisor` is the only way to mint
//! `StopConfirmed` and `LeafRecorded`. Rust cannot limit a constructor to one module of
//! another crate, so this test does: the name may appear only in subzero-core (its
//! definition and tests), in the ui-tests, and in the runtime's supervisor module.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

const HATCH: &str = "designate_for_runtime_supervisor";

const ALLOWED: &[&str] = &[
    "crates/subzero-core/",
    "ui-tests/",
    "crates/subzero-runtime/src/supervisor/",
    "crates/subzero-runtime/src/supervisor.rs",
    "docs/",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            walk(&path, out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_supervisor_module_designates_the_supervisor() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap();
    let mut files = Vec::new();
    for top in ["crates", "xtask", "ui-tests"] {
        walk(&root.join(top), &mut files);
    }
    assert!(files.len() > 5, "walked too few files: {files:?}");
    let offenders: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let rel = f
                .strip_prefix(&root)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(f).ok()?;
            (text.contains(HATCH) && !ALLOWED.iter().any(|a| rel.starts_with(a))).then_some(rel)
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "`Supervisor::{HATCH}` may be called only from crates/subzero-runtime/src/supervisor; found in {offenders:?}"
    );
}
