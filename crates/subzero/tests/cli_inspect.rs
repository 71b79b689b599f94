//! `subzero ls | show | logs | output` reading the database while a real broker runs a
//! child: the human tools see the child and its events as they are written.

mod cli_support;
mod mcp_support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cli_support::*;
use mcp_support::*;
use serde_json::Value;
use subzero_testkit::Reply;

fn inspect(env: &Env, args: &[&str]) -> std::process::Output {
    subzero()
        .args(args)
        .arg("--state-dir")
        .arg(env.state_dir())
        .output()
        .expect("subzero runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn ls_and_logs_follow_see_a_running_child_and_its_events_arrive() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
        slow_reply("The README describes a small demo project.", 8000),
    ]);
    let s = env.broker("broker").await;
    let (child, run) = spawn(&s, &env, "researcher", "Summarize README.md").await;

    // `logs --follow` from the start, as a separate process reading the shared database.
    let mut logs = subzero()
        .args(["logs", &child, "--follow", "--json", "--state-dir"])
        .arg(env.state_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("logs starts");
    let stdout = logs.stdout.take().expect("logs stdout");
    let (tx, lines) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    // `ls` sees the child running (the model is still sleeping).
    let out = inspect(&env, &["ls", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = json_of(&out);
    let item = listed["children"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["childId"] == child.as_str()))
        .unwrap_or_else(|| panic!("child missing from ls: {listed:#}"));
    assert_eq!(item["state"], "running", "{listed:#}");
    assert_eq!(item["activeRunId"], run.as_str());
    assert_eq!(item["templateId"], "researcher");
    let only_ready = json_of(&inspect(&env, &["ls", "--json", "--state", "ready"]));
    assert_eq!(
        only_ready["children"].as_array().map(Vec::len),
        Some(0),
        "{only_ready:#}"
    );

    // While the child works, the doctor sees its lock held by a worker of a live broker.
    let (_, report) = doctor(&env.state_dir(), &env.config(), &[], &[]);
    let lock = checks(&report, &format!("child lock {child}"));
    assert_eq!(lock.len(), 1, "{report:#}");
    assert_eq!(lock[0]["status"], "pass", "{report:#}");
    assert!(
        lock[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("owned by running broker")),
        "{report:#}"
    );

    // The events arrive in order as the broker writes them, up to the completion.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: Vec<Value> = Vec::new();
    while !seen.iter().any(|e| e["type"] == "completed") {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no completed event; saw {seen:#?}"));
        seen.push(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON event ({e}): {line}")),
        );
    }
    let kinds: Vec<&str> = seen.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert!(kinds.contains(&"tool"), "{kinds:?}");
    let seqs: Vec<u64> = seen.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "out of order: {seqs:?}"
    );
    assert!(seen.iter().all(|e| e["childId"] == child.as_str()));

    // Ctrl-C ends the follower cleanly.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(logs.id()).expect("pid")),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let status = logs.wait().expect("logs exits");
    assert!(status.success(), "logs exited with {status}");
    reader.join().expect("reader");

    let snap = settle(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap["state"], "ready", "{snap:#}");

    // `show` is the same snapshot `subzero_get` gives, and `output` prints the result.
    let shown = json_of(&inspect(&env, &["show", &child, "--json"]));
    assert_eq!(shown["childId"], child.as_str());
    assert_eq!(shown["lastRun"]["runId"], run.as_str());
    assert_eq!(shown["lastRun"]["status"], "completed");
    let artifact = shown["lastRun"]["artifactId"]
        .as_str()
        .expect("artifact")
        .to_owned();
    let out = inspect(&env, &["output", &artifact]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "The README describes a small demo project."
    );
    let out = inspect(
        &env,
        &[
            "output", &artifact, "--offset", "4", "--length", "6", "--json",
        ],
    );
    let chunk = json_of(&out);
    assert_eq!(chunk["text"], "README");
    assert_eq!(chunk["nextOffset"], 10);
    assert_eq!(chunk["eof"], false);

    // Without --follow, logs prints what is there and ends.
    let out = inspect(&env, &["logs", &child, "--json"]);
    assert!(out.status.success());
    let printed = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(printed >= seen.len(), "{printed} < {}", seen.len());

    s.close().await.expect("close");
    assert!(env.files_containing(KEY).is_empty(), "key found on disk");
}

#[test]
fn inspection_never_creates_a_database_and_errors_name_their_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    // No database is no children yet: `ls` lists none (see cli_readonly.rs).
    let out = subzero()
        .args(["ls", "--state-dir"])
        .arg(&state)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!state.exists(), "ls created {}", state.display());
    for args in [
        vec!["show", "ch_01JBBBBBBBBBBBBBBBBBBBBBBB"],
        vec!["logs", "ch_01JBBBBBBBBBBBBBBBBBBBBBBB"],
        vec!["output", "art_01JBBBBBBBBBBBBBBBBBBBBBBB"],
    ] {
        let out = subzero()
            .args(&args)
            .arg("--state-dir")
            .arg(&state)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error[not_found]: no children yet: there is no state database at"),
            "{args:?}: {err}"
        );
        assert!(!state.exists(), "{args:?} created {}", state.display());
    }
    let out = subzero()
        .args(["show", "nonsense", "--state-dir"])
        .arg(&state)
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error[invalid_request]:"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_child_is_not_found_with_a_hint() {
    let env = Env::new(vec![]);
    env.broker("broker").await.close().await.expect("close");
    let out = inspect(&env, &["show", "ch_01JBBBBBBBBBBBBBBBBBBBBBBB"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error[not_found]: child ch_01JBBBBBBBBBBBBBBBBBBBBBBB")
            && err.contains("subzero ls"),
        "{err}"
    );
    let listed = json_of(&inspect(&env, &["ls", "--json"]));
    assert_eq!(listed["children"].as_array().map(Vec::len), Some(0));
}
