//! `subzero doctor` against broken and healthy setups: the real binary, real files,
//! a real broker where one is needed.

use std::os::unix::fs::DirBuilderExt;
use std::time::Duration;

use crate::support::cli::*;
use crate::support::mcp::*;
use crate::support::pty::{Terminal, colours_only, controls_beyond};

#[test]
fn a_malformed_config_fails_naming_the_file_and_a_fix() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[credentials.openai\nenv = \"OPENAI_API_KEY\"\n").expect("config");
    let (code, report) = doctor(&dir.path().join("state"), &config, &[], &[]);
    assert_eq!(code, 1, "{report:#?}");
    assert!(!report.ok);
    let check = checks(&report, "config");
    assert_eq!(check.len(), 1, "{report:#?}");
    assert_eq!(check[0].status, Status::Fail);
    let detail = check[0].detail.as_str();
    assert!(detail.contains(&config.display().to_string()), "{detail}");
    let fix = check[0].fix.as_deref().expect("a failing check has a fix");
    assert!(
        fix.contains(&config.display().to_string()) && fix.contains("--config"),
        "{fix}"
    );
}

#[test]
fn an_unset_credential_variable_fails_with_the_variable_and_a_fix() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[credentials.openai]\nenv = \"SUBZERO_DOCTOR_UNSET_KEY\"\norigins = [\"https://api.openai.com:443\"]\n",
    )
    .expect("config");
    let (code, report) = doctor(&dir.path().join("state"), &config, &[], &[]);
    assert_eq!(code, 1, "{report:#?}");
    let check = checks(&report, "credential openai");
    assert_eq!(check.len(), 1, "{report:#?}");
    assert_eq!(check[0].status, Status::Fail);
    assert!(
        Some(check[0].detail.as_str()).is_some_and(|d| d.contains("SUBZERO_DOCTOR_UNSET_KEY")),
        "{report:#?}"
    );
    assert!(
        check[0]
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("export SUBZERO_DOCTOR_UNSET_KEY=")),
        "{report:#?}"
    );
    // With the variable set the same reference resolves, and its value is never printed.
    let (code, report) = doctor(
        &dir.path().join("state"),
        &config,
        &[],
        &[("SUBZERO_DOCTOR_UNSET_KEY", "sk-doctor-secret-value")],
    );
    assert_eq!(code, 0, "{report:#?}");
    assert_eq!(checks(&report, "credential openai")[0].status, Status::Pass);
    assert!(!format!("{report:?}").contains("sk-doctor-secret-value"));
}

#[test]
fn a_held_child_lock_is_reported_with_its_pid_and_a_fix() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    for sub in ["locks/children", "locks/slots", "locks/owners", "artifacts"] {
        builder.create(state.join(sub)).expect("state layout");
    }
    let child = "ch_01JBBBBBBBBBBBBBBBBBBBBBBB";
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state.join(format!("locks/children/{child}.lock")))
        .expect("lock file");
    // This test process plays the orphaned tool process: it holds the child's flock.
    let _held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .expect("flock");
    let (code, report) = doctor(&state, &dir.path().join("config.toml"), &[], &[]);
    let check = checks(&report, &format!("child lock {child}"));
    assert_eq!(check.len(), 1, "{report:#?}");
    assert_eq!(check[0].status, Status::Warn, "{report:#?}");
    let pid = std::process::id().to_string();
    let detail = check[0].detail.as_str();
    assert!(
        detail.contains(&format!("pid {pid}")) && detail.contains("no broker owns it"),
        "{detail}"
    );
    let fix = check[0].fix.as_deref().expect("fix");
    assert!(fix.contains(&format!("kill {pid}")), "{fix}");
    // A held lock is a warning, not a broken setup.
    assert_eq!(code, 0, "{report:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_setup_passes_every_check_and_exits_zero() {
    let env = Env::new(vec![]);
    // A broker creates the state directory and database, as on a real first run.
    env.broker("broker").await.close().await.expect("close");
    let url = env.server.base_url();
    let (code, report) = doctor(
        &env.state_dir(),
        &env.config(),
        &[
            "--workspace",
            &env.workspace().display().to_string(),
            "--model",
            &url,
            "--credential",
            CRED,
        ],
        &[("SUBZERO_TEST_KEY", KEY)],
    );
    assert_eq!(code, 0, "{report:#?}");
    assert!(report.ok);
    for name in [
        "config",
        "state dir",
        "database",
        "lock dir",
        "child locks",
        "worker",
        "subreaper",
        "parent-death signal",
    ] {
        let found = checks(&report, name);
        assert!(
            found.iter().any(|c| c.status == Status::Pass),
            "{name} did not pass: {report:#?}"
        );
    }
    assert!(failures(&report).is_empty(), "{report:#?}");
    let model = checks(&report, "model ");
    assert_eq!(model.len(), 1, "{report:#?}");
    assert_eq!(model[0].status, Status::Pass, "{report:#?}");
    // The probe really reached the endpoint, with the key, and never printed it.
    assert_probed_with_the_key(&env.server);
    assert!(!format!("{report:?}").contains(KEY));
}

#[test]
fn an_unreachable_model_fails_with_a_fix() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    // Port 9 (discard) on loopback: nothing listens there in a test sandbox.
    std::fs::write(
        &config,
        "[credentials.local]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"http://127.0.0.1:9\"]\n",
    )
    .expect("config");
    let (code, report) = doctor(
        &dir.path().join("state"),
        &config,
        &["--model", "http://127.0.0.1:9/v1", "--credential", "local"],
        &[("SUBZERO_TEST_KEY", KEY)],
    );
    assert_eq!(code, 1, "{report:#?}");
    let model = checks(&report, "model ");
    assert_eq!(model[0].status, Status::Fail, "{report:#?}");
    assert!(
        model[0].fix.as_deref().is_some_and(|f| f.contains("curl")),
        "{report:#?}"
    );
    assert!(!format!("{report:?}").contains(KEY));
}

/// The probe finds `localhost` through `/etc/hosts`, as a user's `http://localhost:8080/v1`
/// endpoint is found (it held while the broker was linked statically, through static glibc).
#[test]
fn the_model_probe_finds_its_host_by_name() {
    let server = subzero_testkit::ScriptedServer::start(Vec::new()).expect("model server");
    let port = server
        .base_url()
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next().map(str::to_owned))
        .expect("port");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[credentials.local]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"http://localhost:{port}\"]\n"
        ),
    )
    .expect("config");
    let url = format!("http://localhost:{port}/v1");
    let (_, report) = doctor(
        &dir.path().join("state"),
        &config,
        &["--model", &url, "--credential", "local"],
        &[("SUBZERO_TEST_KEY", KEY)],
    );
    let model = checks(&report, "model ");
    assert_eq!(model[0].status, Status::Pass, "{report:#?}");
    assert_probed_with_the_key(&server);
}

/// The doctor's probe (`GET …/models`) reached `server`, carrying the key.
fn assert_probed_with_the_key(server: &subzero_testkit::ScriptedServer) {
    let probe = server
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/models"))
        .expect("probe request");
    assert_eq!(
        probe.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

/// `doctor --workspace DIR` with `containment` appended to an empty config: the report.
fn doctor_with_containment(containment: &str) -> DoctorReport {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, format!("[containment]\n{containment}")).expect("config");
    let workspace = dir.path().to_string_lossy().into_owned();
    let (_, report) = doctor(
        &dir.path().join("state"),
        &config,
        &["--workspace", &workspace],
        &[],
    );
    report
}

fn the_check<'a>(report: &'a DoctorReport, name: &str) -> &'a Check {
    let found = checks(report, name);
    assert_eq!(found.len(), 1, "one {name} check: {report:#?}");
    found[0]
}

#[test]
fn doctor_names_what_tools_cannot_see_and_how_their_tree_is_bounded() {
    let report = doctor_with_containment("");
    let view = the_check(&report, "tool view");
    assert_eq!(view.status, Status::Pass, "{view:#?}");
    let detail = view.detail.as_str();
    assert!(
        detail.contains("mount namespace per tool process") && detail.contains("config.toml"),
        "{detail}"
    );
    let bounds = the_check(&report, "tool bounds");
    let detail = bounds.detail.as_str();
    for resource in ["processes:", "memory:", "file size:", "open files:"] {
        assert!(detail.contains(resource), "{detail}");
    }
    assert!(detail.contains("RLIMIT_FSIZE"), "{detail}");
}

#[test]
fn doctor_reports_landlock_off_by_configuration_not_as_in_force() {
    let report = doctor_with_containment("filesystem = \"off\"\n");
    let landlock = the_check(&report, "landlock");
    assert_eq!(landlock.status, Status::Warn, "{landlock:#?}");
    let detail = landlock.detail.as_str();
    assert!(
        detail.starts_with("off by configuration ([containment] filesystem = \"off\""),
        "{detail}"
    );
    assert!(
        landlock
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("filesystem = \"off\"")),
        "{landlock:#?}"
    );
}

#[test]
fn doctor_reports_the_tools_network_namespace_and_says_when_it_is_off() {
    let on = doctor_with_containment("");
    let network = the_check(&on, "tool network");
    assert_eq!(network.status, Status::Pass, "{network:#?}");
    assert!(
        network.detail.contains("network namespace per worker"),
        "{network:#?}"
    );
    let off = doctor_with_containment("network = \"off\"\n");
    let network = the_check(&off, "tool network");
    assert_eq!(network.status, Status::Warn, "{network:#?}");
    assert!(network.detail.contains("network = \"off\""), "{network:#?}");
    assert!(
        network
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("network = \"open\"")),
        "{network:#?}"
    );
}

#[test]
fn doctor_reports_the_configured_process_switch_and_the_mode_it_got() {
    let report = doctor_with_containment("process = \"subreaper\"\n");
    let process = the_check(&report, "process containment");
    assert_eq!(process.status, Status::Warn, "{process:#?}");
    let detail = process.detail.as_str();
    assert!(
        detail.starts_with("subreaper only ([containment] process = \"subreaper\""),
        "{detail}"
    );

    let report = doctor_with_containment("process = \"cgroup\"\n");
    let process = the_check(&report, "process containment");
    let detail = process.detail.as_str();
    match process.status {
        // A writable cgroup v2 subtree (CI, as root): the worker ran in its cgroup.
        Status::Warn => {
            assert!(
                detail.starts_with("cgroup ([containment] process = \"cgroup\"; PID namespaces are disabled by the configuration"),
                "{detail}"
            );
            assert!(
                process
                    .fix
                    .as_deref()
                    .is_some_and(|f| f.contains("process = \"auto\"")),
                "{process:#?}"
            );
        }
        // None: the broker would refuse to start, and doctor says why.
        Status::Fail => assert!(
            detail.contains("[containment] process = \"cgroup\" needs a cgroup v2 subtree"),
            "{detail}"
        ),
        other => panic!("unexpected status {other:?}: {process:#?}"),
    }
}

/// A model URL carrying what a prompt-injected child would have a person paste: OSC 52
/// (clipboard), OSC 0 (title), CSI `2J` (clear) and `8m` (hide), a bare CR, U+202E.
const HOSTILE: &str =
    "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\x1b[8mhidden\rover\u{202e}gnp.exe";

/// `subzero doctor` probing `http://127.0.0.1:9/v1/HOSTILE` in a pseudo-terminal (with
/// `extra` flags): every byte it wrote there, and the screen.
fn doctor_in_a_terminal(extra: &[&str]) -> (Vec<u8>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[credentials.local]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"http://127.0.0.1:9\"]\n",
    )
    .expect("config");
    let url = format!("http://127.0.0.1:9/v1/{HOSTILE}");
    let mut command = subzero();
    command
        .arg("doctor")
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .arg("--workspace")
        .arg(dir.path())
        .args(["--model", &url, "--credential", "local"])
        .args(extra)
        .env("SUBZERO_TEST_KEY", KEY)
        .env("TERM", "xterm-256color");
    let mut term = Terminal::spawn(command, 300, 80);
    term.finish(Duration::from_secs(60));
    (term.bytes(), term.text())
}

#[test]
fn on_a_terminal_the_report_shows_a_hostile_model_url_escaped() {
    let (bytes, screen) = doctor_in_a_terminal(&[]);
    let acting = controls_beyond(&bytes, colours_only);
    assert!(
        acting.is_empty(),
        "doctor let these reach the terminal: {acting:?}\n{}",
        String::from_utf8_lossy(&bytes)
    );
    let row = screen
        .lines()
        .find(|l| l.contains("model http://127.0.0.1:9/v1/"))
        .unwrap_or_else(|| panic!("no model check:\n{screen}"));
    for shown in [
        "\\x1b]52;c;cHduZWQ=\\x07",
        "\\x1b]0;owned\\x07",
        "\\x1b[2J",
        "\\x1b[8mhidden\\rover",
        "\\u{202e}gnp.exe",
    ] {
        assert!(row.contains(shown), "{shown} not shown:\n{row}");
    }
    // --json on a terminal: the same findings, nothing a terminal acts on.
    let (bytes, _) = doctor_in_a_terminal(&["--json"]);
    let acting = controls_beyond(&bytes, |_| false);
    assert!(acting.is_empty(), "{acting:?}");
    let text = String::from_utf8(bytes)
        .expect("utf-8")
        .replace("\r\n", "\n");
    let report: DoctorReport = serde_json::from_str(&text).expect("JSON");
    let model = checks(&report, "model ");
    assert_eq!(
        model[0].name,
        format!("model http://127.0.0.1:9/v1/{HOSTILE}"),
        "{report:#?}"
    );
}
