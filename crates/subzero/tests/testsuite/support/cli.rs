//! Running the real `subzero` binary as a human would, for the CLI tests.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

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
pub fn doctor(state: &Path, config: &Path, extra: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
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
    (out.status.code().unwrap_or(-1), json_of(&out))
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

/// The checks of a doctor report whose name starts with `prefix`.
pub fn checks<'a>(report: &'a Value, prefix: &str) -> Vec<&'a Value> {
    report["checks"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks with status `fail`.
pub fn failures(report: &Value) -> Vec<&Value> {
    report["checks"]
        .as_array()
        .map(|c| c.iter().filter(|c| c["status"] == "fail").collect())
        .unwrap_or_default()
}
