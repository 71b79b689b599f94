//! Running the real `subzero` binary as a human would, for the CLI tests.

use std::path::Path;
use std::process::{Command, Output};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// `subzero ls --json`: the children as `subzero_list` summarizes them, without paging.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listing {
    pub children: Vec<subzero_protocol::ChildSummary>,
}

/// `subzero doctor --json`: `{"ok": bool, "checks": [{name, status, detail, fix?}]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoctorReport {
    /// Whether no check failed.
    pub ok: bool,
    /// Every finding, in the order the checks ran.
    pub checks: Vec<Check>,
}

/// One finding of `subzero doctor`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    /// Set on every warning and failure.
    pub fix: Option<String>,
}

/// How a doctor check came out.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

/// The binary under test.
pub fn subzero() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_subzero"));
    // Nothing from the developer's own setup may leak into a test.
    for var in [
        "SUBZERO_STATE_DIR",
        "SUBZERO_CONFIG",
        "SUBZERO_LOG",
        "SUBZERO_TEST_KEY",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Run `subzero doctor --json` with these flags and extra environment.
pub fn doctor(
    state: &Path,
    config: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (i32, DoctorReport) {
    let mut cmd = subzero();
    cmd.arg("doctor")
        .arg("--json")
        .arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config);
    cmd.args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("doctor runs");
    (out.status.code().unwrap_or(-1), parsed_of(&out))
}

/// stdout parsed as one JSON document (panics with both streams when it is not).
pub fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// stdout read as one JSON document of type `T` (panics with both streams when it is not).
pub fn parsed_of<T: DeserializeOwned>(out: &Output) -> T {
    let value = json_of(out);
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("stdout is not the expected document ({e}):\n{value:#?}"))
}

/// The checks of a doctor report whose name starts with `prefix`.
pub fn checks<'a>(report: &'a DoctorReport, prefix: &str) -> Vec<&'a Check> {
    report
        .checks
        .iter()
        .filter(|c| c.name.starts_with(prefix))
        .collect()
}

/// Checks with status `fail`.
pub fn failures(report: &DoctorReport) -> Vec<&Check> {
    report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .collect()
}
