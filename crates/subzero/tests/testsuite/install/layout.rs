//! The three binaries are installed side by side: `subzero` (the broker, with no worker code
//! of its own), `subzero-worker` and `subzero-hold`. A broker copied somewhere without its
//! worker still answers every call, refuses a spawn with `worker_incompatible` naming the
//! fix, and `subzero doctor` fails its worker check with the same fix.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::faults::{RawBroker, Reaper};
use crate::support::mcp::Env;
use crate::support::mcp::p;
use serde_json::{Value, json};
use subzero_testkit::Reply;

/// `subzero` alone, copied into `dir/bin`.
fn lone_broker(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let exe = bin.join("subzero");
    std::fs::copy(env!("CARGO_BIN_EXE_subzero"), &exe).expect("copy subzero");
    exe
}

fn names_the_fix(message: &str) {
    assert!(
        message.contains("subzero-worker") && message.contains("cargo install"),
        "the message names the missing binary and how to install it: {message}"
    );
}

#[test]
fn a_broker_without_its_worker_binary_refuses_a_spawn_naming_the_fix() {
    let env = Env::new(vec![Reply::text("never asked")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut command = env.command("broker");
    command.exe = lone_broker(env.dir.path());
    let mut broker = RawBroker::start(&command);
    reaper.broker(Some(broker.pid()));

    let listed = broker.typed::<p::ListOutput>("subzero_list", json!({}));
    assert!(listed.children.is_empty(), "{listed:#?}");
    let err = broker.refused_with(
        "subzero_spawn",
        json!({"prompt": "go", "templateId": "researcher", "model": env.model()}),
    );
    assert_eq!(err.code, p::ErrorCode::WorkerIncompatible, "{err:#?}");
    names_the_fix(err.message.as_str());
    // Nothing was recorded for the refused spawn.
    let listed = broker.typed::<p::ListOutput>("subzero_list", json!({}));
    assert!(listed.children.is_empty(), "{listed:#?}");

    broker.close_stdin();
    assert!(
        broker.wait_exit(Duration::from_secs(10)).is_some(),
        "the broker exits at EOF"
    );
}

#[test]
fn doctor_fails_the_worker_check_when_the_worker_binary_is_missing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let exe = lone_broker(dir.path());
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").expect("config");
    let out = Command::new(&exe)
        .arg("doctor")
        .arg("--json")
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .arg("--workspace")
        .arg(&workspace)
        .env_remove("SUBZERO_LOG")
        .output()
        .expect("doctor runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor's stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(out.status.code(), Some(1), "{report:#?}");
    let worker = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "worker")
        .unwrap_or_else(|| panic!("no worker check: {report:#?}"));
    assert_eq!(worker["status"], "fail", "{worker:#?}");
    names_the_fix(worker["detail"].as_str().expect("detail"));
    assert!(
        worker["fix"]
            .as_str()
            .is_some_and(|f| f.contains("cargo install")),
        "{worker:#?}"
    );
}

#[test]
fn the_demo_runs_offline_with_the_model_it_ships() {
    // The README's first command: `subzero demo` plays a parent against the real broker,
    // with the scripted model built into `subzero` (not the test kit, which does not ship).
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("README.md"),
        "# A project\n\nSubzero's demo reads this.\n",
    )
    .expect("readme");
    let out = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .arg("demo")
        .arg("--workspace")
        .arg(dir.path())
        .output()
        .expect("subzero demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "3. subzero_spawn researcher",
        "4. subzero_send steer → delivery steered",
        "5. subzero_send followup",
        "7. a long run",
        "confirmed true, status stopped",
        "8. subzero_output",
        "the steer reached the model: yes",
    ] {
        assert!(
            stdout.contains(step),
            "the demo's output lacks {step:?}:\n{stdout}"
        );
    }
}
