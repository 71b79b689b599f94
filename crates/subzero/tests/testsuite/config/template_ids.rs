//! One `TemplateId` rule everywhere: a `[templates.<id>]` the wire cannot carry is left out
//! when the real `subzero mcp` loads its config — logged (and listed by `subzero_info`,
//! `config/broken_entries.rs`) as `invalid_request` naming the template and the rule — while
//! the broker serves the rest, instead of a broker that later answers `internal` from
//! `subzero_info`.

use std::io::Write;
use std::process::Stdio;

use crate::support::cli::subzero;

/// `subzero mcp` with `config` as its configuration: (exit code, stderr).
fn start_with(config: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).expect("config");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let mut child = subzero()
        .arg("mcp")
        .arg("--workspace")
        .arg(&workspace)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&path)
        // The control case below reads the startup line, logged at `info`.
        .env("SUBZERO_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("subzero mcp starts");
    // A broker that did start would wait for a client; closing stdin ends it cleanly.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.flush();
    }
    let out = child.wait_with_output().expect("subzero mcp exits");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TEMPLATE_BODY: &str = "description = \"Reviews code\"\ninstructions = \"Review the change.\"\ntools = [\"read\", \"grep\"]\n";

#[test]
fn a_template_id_with_capitals_or_a_dot_is_left_out_when_the_config_is_loaded() {
    let (_, stderr) = start_with(&format!("[templates.\"Review.v2\"]\n{TEMPLATE_BODY}"));
    assert!(
        stderr.contains("subzero mcp ready")
            && stderr.contains("configuration entry left out")
            && stderr.contains("invalid_request")
            && stderr.contains("[templates.Review.v2]")
            && stderr.contains("^[a-z0-9][a-z0-9_-]{0,63}$"),
        "{stderr}"
    );
    assert!(!stderr.contains("internal"), "{stderr}");
}

#[test]
fn a_template_named_like_a_built_in_is_left_out_when_the_config_is_loaded() {
    let (_, stderr) = start_with(&format!("[templates.coder]\n{TEMPLATE_BODY}"));
    assert!(
        stderr.contains("subzero mcp ready")
            && stderr.contains("configuration entry left out")
            && stderr.contains("[templates.coder]")
            && stderr.contains("reuses a built-in id"),
        "{stderr}"
    );
}

#[test]
fn a_template_id_the_wire_carries_starts_the_broker() {
    // Control: the same body under a lowercase id loads, so the refusals above are about
    // the id alone. The broker gets ready, then ends when stdin closes before `initialize`.
    let (_, stderr) = start_with(&format!("[templates.review-v2]\n{TEMPLATE_BODY}"));
    assert!(
        stderr.contains("subzero mcp ready") && !stderr.contains("configuration file"),
        "{stderr}"
    );
}
