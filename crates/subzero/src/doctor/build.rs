//! One build: `subzero-worker` and `subzero-hold` beside this `subzero` print the same
//! version line (version, commit, target; `crate::build_info`). A broker starts both from
//! beside itself, so binaries of two builds would mix a worker and a broker that were never
//! tested together.

use std::path::Path;
use std::process::Command;

use super::report::Check;
use crate::build_info::VERSION_LINE;

/// The siblings a broker starts.
const SIBLINGS: [&str; 2] = ["subzero-worker", "subzero-hold"];

pub fn check_build() -> Check {
    let own = format!("subzero {VERSION_LINE}");
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    else {
        return Check::warn(
            "build",
            format!("{own}; cannot locate this executable to compare its siblings"),
            "run subzero from where it is installed",
        );
    };
    let differ: Vec<String> = SIBLINGS
        .iter()
        .filter_map(|name| sibling_differs(&dir.join(name), name))
        .collect();
    if differ.is_empty() {
        return Check::pass(
            "build",
            format!("{own}; subzero-worker and subzero-hold beside it are the same build"),
        );
    }
    Check::warn(
        "build",
        format!("{own}, but {}", differ.join("; ")),
        format!(
            "the three binaries in {} must come from one build: install them together (`cargo install --locked --path crates/subzero`, or one release archive)",
            dir.display()
        ),
    )
}

/// What is wrong with sibling `name` at `path`, if anything.
fn sibling_differs(path: &Path, name: &str) -> Option<String> {
    let out = match Command::new(path).arg("--version").output() {
        Ok(out) => out,
        Err(e) => return Some(format!("{name} cannot run ({e})")),
    };
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && line.strip_prefix(name).map(str::trim) == Some(VERSION_LINE) {
        return None;
    }
    if !out.status.success() || line.is_empty() {
        return Some(format!("{name} does not say its version (an older build)"));
    }
    Some(line)
}
