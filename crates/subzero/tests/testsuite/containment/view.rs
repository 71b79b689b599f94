//! A tool does not see Subzero's state or configuration: in every tool process's mount
//! namespace the state directory (database, locks, transcripts, artifacts, other workers'
//! scratch), the configuration directory and every `file =` credential are covered, while
//! the workspace and the worker's scratch (its `TMPDIR`) stay as they were.
//!
//! A coder's `bash` probes each path as a prompt-injected tool would — reads, listings,
//! another child's lock, the worker's `/proc/1/root`, an `umount` of the cover — and the
//! test checks each answer, and that the secret in the key file reached neither the tool's
//! output nor the model. Tried as root and as `nobody` (a user namespace per tool process).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::containment::{Case, Path_, chown_tree};
use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

/// A key only the `file =` credential holds; it must never reach a tool or the model.
const FILE_SECRET: &str = "sk-file-credential-5b1e0c7d93a2f468";

/// Runs each probe and writes `name=ok:<output>` or `name=fail:<output>` to `probes.txt`.
fn probe_script(config: &Path, key: &Path, state: &Path, other_child: &str) -> String {
    let config_dir = config.parent().expect("config dir");
    let state = state.display();
    let probes = [
        ("config", format!("cat {}", config.display())),
        ("config_dir", format!("ls -A {}", config_dir.display())),
        ("key", format!("cat {}", key.display())),
        ("state", format!("ls -A {state}")),
        ("db", format!("cat {state}/subzero.db")),
        ("locks", format!("ls {state}/locks")),
        ("transcripts", format!("ls {state}/transcripts")),
        ("artifacts", format!("ls {state}/artifacts")),
        (
            "other_lock",
            format!(
                "python3 -c \"import fcntl; f = open('{state}/locks/children/{other_child}.lock'); fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\""
            ),
        ),
        ("proc_root", format!("ls /proc/1/root{state}")),
        ("proc_cwd", "ls /proc/1/cwd/".to_owned()),
        ("umount", format!("umount {state}")),
        (
            "tmpdir",
            "sh -c 'echo scratch-ok > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"'".to_owned(),
        ),
        ("workspace", "cat README.md".to_owned()),
        (
            "workspace_write",
            "sh -c 'echo w > written.txt && cat written.txt'".to_owned(),
        ),
    ];
    let mut script = String::from(
        "probe() { name=$1; shift; if out=$(\"$@\" 2>&1); then r=ok; else r=fail; fi; printf '%s=%s:%s\\n' \"$name\" \"$r\" \"$(printf '%s' \"$out\" | head -c 300 | tr '\\n' ' ')\" >> probes.txt; }\n",
    );
    for (name, command) in probes {
        script.push_str(&format!("probe {name} sh -c {}\n", shell_quote(&command)));
    }
    script.push_str("cat probes.txt\n");
    script
}

/// What the workers said about the tools' view, for a failure message.
fn view_log(env: &Env) -> String {
    std::fs::read_to_string(env.log("broker"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("view"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `probes.txt` as name → (succeeded, output).
fn probes(workspace: &Path) -> BTreeMap<String, (bool, String)> {
    let bytes = std::fs::read(workspace.join("probes.txt")).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once('=')?;
            let (result, output) = rest.split_once(':')?;
            Some((name.to_owned(), (result == "ok", output.trim().to_owned())))
        })
        .collect()
}

async fn a_tool_sees_nothing_of_subzeros_state_or_configuration(path: Path_) {
    let case = Case::new(path);
    let env = &case.env;
    // The configuration where Subzero's own directory holds it, with a `file =` credential
    // outside it (both readable on disk by the broker's user).
    let config_dir = env.dir.path().join("xdg/subzero");
    std::fs::create_dir_all(&config_dir).expect("config dir");
    let key_dir = env.dir.path().join("keys");
    std::fs::create_dir_all(&key_dir).expect("key dir");
    let key = key_dir.join("model.key");
    std::fs::write(&key, FILE_SECRET).expect("key");
    let config = config_dir.join("config.toml");
    let base = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        &config,
        format!(
            "{base}\n[credentials.filekey]\nfile = \"{}\"\norigins = [\"{}\"]\n",
            key.display(),
            env.origin()
        ),
    )
    .expect("config");
    if let Some(user) = case.user {
        chown_tree(&env.dir.path().join("xdg"), user);
        chown_tree(&key_dir, user);
    }

    // A first child that completes, so another child's lock, transcript and artifact exist.
    env.server.push(Reply::text("first done"));
    let mut reaper = Reaper::new(env.dir.path());
    let mut command = case.command("broker");
    command.config = config.clone();
    let s = subzero_testkit::mcp_client::McpSession::start_as(&command, case.user)
        .await
        .expect("broker starts");
    reaper.broker(s.pid());
    let (first, _) = spawn(&s, env, "researcher", "Say done").await;
    let done = settled(&s, &first, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );

    let state = env.state_dir().canonicalize().expect("state");
    let config = config.canonicalize().expect("config");
    let key = key.canonicalize().expect("key");
    for (what, path) in [
        ("config", config.clone()),
        ("key", key.clone()),
        ("db", state.join("subzero.db")),
        (
            "other lock",
            state.join(format!("locks/children/{first}.lock")),
        ),
        ("transcripts", state.join("transcripts")),
    ] {
        assert!(path.exists(), "{what} {} is not on disk", path.display());
    }
    let script = probe_script(&config, &key, &state, &first);
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": script}).to_string(),
    ));
    env.server.push(Reply::text("probed"));
    let (child, _) = spawn(&s, env, "coder", "Probe").await;
    let snap = settled(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let seen = probes(&env.workspace());
    if seen.is_empty() {
        let tool_result = env.server.requests().last().map(|r| r.body.clone());
        panic!("the probes did not run; the model saw {tool_result:?}");
    }
    let get = |name: &str| -> (bool, String) {
        seen.get(name)
            .cloned()
            .unwrap_or_else(|| panic!("probe {name} missing: {seen:#?}"))
    };

    // Hidden: each read fails or shows nothing.
    for name in [
        "config",
        "db",
        "locks",
        "transcripts",
        "artifacts",
        "other_lock",
        "proc_root",
        "proc_cwd",
        "umount",
    ] {
        let (ok, output) = get(name);
        assert!(!ok, "probe {name} succeeded: {output}\n{}", view_log(env));
    }
    let (ok, listing) = get("config_dir");
    assert!(
        ok && listing.is_empty(),
        "the config directory shows {listing:?}"
    );
    let (_, key_read) = get("key");
    assert!(
        !key_read.contains(FILE_SECRET),
        "the tool read the key file: {key_read}"
    );
    let (ok, listing) = get("state");
    assert!(ok, "the state directory cannot be listed: {listing}");
    assert_eq!(
        listing, "scratch",
        "the state directory shows more than scratch"
    );
    // Still there: the workspace and the scratch space.
    assert_eq!(get("tmpdir"), (true, "scratch-ok".to_owned()));
    let (ok, readme) = get("workspace");
    assert!(ok && readme.contains("Demo project"), "{readme}");
    assert_eq!(get("workspace_write"), (true, "w".to_owned()));

    // Nothing of the secret left the broker's side.
    for request in env.server.requests() {
        assert!(
            !request.body.contains(FILE_SECRET),
            "the model saw the file key"
        );
    }
    let snap = receipts(&s, &child).await;
    let receipt = snap
        .containment
        .as_ref()
        .and_then(|c| c.view.as_ref())
        .unwrap_or_else(|| panic!("no view receipt: {snap:#?}"));
    assert!(receipt.hidden, "{receipt:#?}");
    let hidden: Vec<PathBuf> = receipt
        .paths
        .iter()
        .flat_map(|a| a.iter())
        .map(|p| PathBuf::from(p.as_str()))
        .collect();
    for expected in [
        &state,
        config.parent().expect("dir").to_path_buf().as_path(),
        &key,
    ] {
        assert!(
            hidden.iter().any(|h| h == expected),
            "{} not among the hidden paths {hidden:?}",
            expected.display()
        );
    }
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_pid_namespace_a_tool_sees_nothing_of_subzeros_state_or_configuration() {
    a_tool_sees_nothing_of_subzeros_state_or_configuration(Path_::Namespace).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn as_an_unprivileged_user_a_tool_sees_nothing_of_subzeros_state_or_configuration() {
    a_tool_sees_nothing_of_subzeros_state_or_configuration(Path_::NamespaceUnprivileged).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_the_subreaper_fallback_a_tool_sees_nothing_of_subzeros_state_or_configuration() {
    a_tool_sees_nothing_of_subzeros_state_or_configuration(Path_::Fallback).await;
}
