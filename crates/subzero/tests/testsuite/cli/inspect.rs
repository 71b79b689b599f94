//! `subzero ls | show | logs | output` reading the database while a real broker runs a
//! child: the human tools see the child and its events as they are written.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::cli::*;
use crate::support::mcp::*;
use crate::support::pty::{Terminal, colours_only, controls_beyond};
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::McpSession;

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
    let listed: Listing = parsed_of(&out);
    let item = listed
        .children
        .iter()
        .find(|c| c.child_id.as_str() == child)
        .unwrap_or_else(|| panic!("child missing from ls: {listed:#?}"));
    assert_eq!(item.state, p::ChildState::Running, "{listed:#?}");
    assert_eq!(item.active_run_id.as_deref(), Some(&run));
    assert_eq!(item.template_id.as_str(), "researcher");
    let only_ready: Listing = parsed_of(&inspect(&env, &["ls", "--json", "--state", "ready"]));
    assert!(only_ready.children.is_empty(), "{only_ready:#?}");

    // While the child works, the doctor sees its lock held by a worker of a live broker.
    let (_, report) = doctor(&env.state_dir(), &env.config(), &[], &[]);
    let lock = checks(&report, &format!("child lock {child}"));
    assert_eq!(lock.len(), 1, "{report:#?}");
    assert_eq!(lock[0].status, Status::Pass, "{report:#?}");
    assert!(
        lock[0].detail.contains("owned by running broker"),
        "{report:#?}"
    );

    // The events arrive in order as the broker writes them, up to the completion.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: Vec<p::ChildEvent> = Vec::new();
    while !seen.iter().any(|e| kind(e) == "completed") {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no completed event; saw {seen:#?}"));
        seen.push(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON event ({e}): {line}")),
        );
    }
    let kinds: Vec<&str> = seen.iter().map(kind).collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert!(kinds.contains(&"tool"), "{kinds:?}");
    let seqs: Vec<u64> = seen.iter().map(seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "out of order: {seqs:?}"
    );
    assert!(seen.iter().all(|e| event_child(e) == child));

    // Ctrl-C ends the follower cleanly.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(logs.id()).expect("pid")),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let status = logs.wait().expect("logs exits");
    assert!(status.success(), "logs exited with {status}");
    reader.join().expect("reader");

    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");

    // `show` is the same snapshot `subzero_get` gives, and `output` prints the result.
    let shown: p::ChildSnapshot = parsed_of(&inspect(&env, &["show", &child, "--json"]));
    assert_eq!(shown.child_id.as_str(), child);
    assert_eq!(last(&shown).run_id.as_str(), run.as_str());
    assert_eq!(last_status(&shown), Some(p::TerminalRunStatus::Completed));
    let artifact = last(&shown)
        .artifact_id
        .as_deref()
        .expect("artifact")
        .to_string();
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
    let chunk: p::ArtifactChunk = parsed_of(&out);
    assert_eq!(chunk.text.as_str(), "README");
    assert_eq!(chunk.next_offset, 10);
    assert!(!chunk.eof);

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
    // No database is no children yet: `ls` lists none (see cli/readonly.rs).
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
    let listed: Listing = parsed_of(&inspect(&env, &["ls", "--json"]));
    assert!(listed.children.is_empty());
}

/// What a prompt-injected child writes to make a terminal act instead of show: OSC 52 sets
/// the clipboard, OSC 0 retitles the window, CSI `2J` clears the screen, CSI `8m` hides what
/// follows, a bare CR overwrites the line, U+202E shows the rest reversed.
const HOSTILE: &str =
    "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\x1b[8mhidden\rover\u{202e}gnp.exe";
/// Each of those as the human views show it on a terminal.
const ESCAPED: [&str; 6] = [
    "\\x1b]52;c;cHduZWQ=\\x07",
    "\\x1b]0;owned\\x07",
    "\\x1b[2J",
    "\\x1b[8mhidden",
    "hidden\\rover",
    "\\u{202e}gnp.exe",
];
/// HOSTILE as a pipe has always got it from the one-line views: each control a space.
const FLATTENED: &str = " ]52;c;cHduZWQ=  ]0;owned  [2J [8mhidden over\u{202e}gnp.exe";

/// A broker in a workspace whose directory is named with HOSTILE, and two of its children
/// on a model named with it: one answered with it (multi-line, a tab, UTF-8 text), the other
/// failed on an endpoint that refused with it as the error body.
struct HostileChildren {
    env: Env,
    workspace: PathBuf,
    answer: String,
    answered: String,
    artifact: String,
    failed: String,
}

async fn hostile_children() -> HostileChildren {
    let answer = format!("{HOSTILE}\nline two:\tünïcødé 日本 ✓\n");
    let env = Env::new(vec![Reply::text(&answer), Reply::status(400, HOSTILE)]);
    let workspace = env.dir.path().join(format!("ws {HOSTILE}"));
    std::fs::create_dir(&workspace).expect("hostile workspace");
    let mut command = env.command("broker");
    command.workspace = workspace.clone();
    let s = McpSession::start(&command).await.expect("broker starts");
    let model = json!({"url": env.server.base_url(), "model": format!("scripted{HOSTILE}"), "credentialRef": CRED});
    let mut children = Vec::new();
    for prompt in ["Answer", "Answer again"] {
        let out = typed::<p::SpawnOutput>(
            &s,
            "subzero_spawn",
            json!({"prompt": prompt, "templateId": "researcher", "model": model}),
        )
        .await;
        let child = out.child_id.as_str().to_owned();
        settled(&s, &child, Duration::from_secs(30)).await;
        children.push(child);
    }
    s.close().await.expect("close");
    let failed = children.pop().expect("second child");
    let answered = children.pop().expect("first child");
    let shown: p::ChildSnapshot = parsed_of(&inspect(&env, &["show", &answered, "--json"]));
    assert_eq!(
        last_status(&shown),
        Some(p::TerminalRunStatus::Completed),
        "{shown:#?}"
    );
    let artifact = last(&shown)
        .artifact_id
        .as_deref()
        .expect("artifact")
        .to_string();
    let shown: p::ChildSnapshot = parsed_of(&inspect(&env, &["show", &failed, "--json"]));
    assert_eq!(
        last_status(&shown),
        Some(p::TerminalRunStatus::Failed),
        "{shown:#?}"
    );
    HostileChildren {
        env,
        workspace,
        answer,
        answered,
        artifact,
        failed,
    }
}

/// `subzero ARGS --state-dir …` in a 240×60 pseudo-terminal: every byte it wrote there, and
/// the screen a person then sees.
fn in_a_terminal(env: &Env, args: &[&str]) -> (Vec<u8>, String) {
    let mut command = subzero();
    command
        .args(args)
        .arg("--state-dir")
        .arg(env.state_dir())
        .env("TERM", "xterm-256color");
    let mut term = Terminal::spawn(command, 240, 60);
    let status = term.finish(Duration::from_secs(30));
    assert!(status.success(), "{args:?}: {status}\n{}", term.text());
    (term.bytes(), term.text())
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_every_view_shows_a_hostile_childs_controls_escaped() {
    let h = hostile_children().await;
    for args in [
        vec!["output", h.artifact.as_str()],
        vec!["show", h.answered.as_str()],
        vec!["show", h.failed.as_str()],
        vec!["logs", h.answered.as_str()],
        vec!["logs", h.failed.as_str()],
        vec!["ls"],
    ] {
        let (bytes, screen) = in_a_terminal(&h.env, &args);
        let acting = controls_beyond(&bytes, colours_only);
        assert!(
            acting.is_empty(),
            "{args:?} let these reach the terminal: {acting:?}\n{}",
            String::from_utf8_lossy(&bytes)
        );
        for shown in ESCAPED {
            assert!(
                screen.contains(shown),
                "{args:?} does not show {shown}:\n{screen}"
            );
        }
    }
    // The artifact keeps its lines, its tab and its UTF-8 text.
    let (_, screen) = in_a_terminal(&h.env, &["output", &h.artifact]);
    let lines: Vec<&str> = screen.lines().collect();
    let two = lines
        .iter()
        .position(|l| l.starts_with("line two:"))
        .unwrap_or_else(|| panic!("no second line:\n{screen}"));
    assert!(two > 0 && lines[two - 1].ends_with("gnp.exe"), "{screen}");
    assert!(
        lines[two].ends_with("ünïcødé 日本 ✓") && !lines[two].contains("\\t"),
        "{screen}"
    );
    // `--json` on a terminal: the same document, with what JSON leaves raw escaped too.
    for args in [
        vec!["show", h.answered.as_str(), "--json"],
        vec!["ls", "--json"],
    ] {
        let (bytes, _) = in_a_terminal(&h.env, &args);
        let acting = controls_beyond(&bytes, |_| false);
        assert!(acting.is_empty(), "{args:?}: {acting:?}");
        let text = String::from_utf8(bytes)
            .expect("utf-8")
            .replace("\r\n", "\n");
        let doc: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(doc, json_of(&inspect(&h.env, &args)), "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_or_with_raw_the_views_print_a_hostile_childs_bytes_as_they_are() {
    let h = hostile_children().await;
    // Piped, the artifact is its bytes.
    let out = inspect(&h.env, &["output", &h.artifact]);
    assert_eq!(out.stdout, h.answer.as_bytes());
    // Piped, the one-line views keep what they always printed: each control a space.
    for args in [
        vec!["show", h.answered.as_str()],
        vec!["show", h.failed.as_str()],
        vec!["logs", h.answered.as_str()],
        vec!["logs", h.failed.as_str()],
        vec!["ls"],
    ] {
        let out = inspect(&h.env, &args);
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).expect("utf-8");
        assert!(text.contains(FLATTENED), "{args:?}:\n{text:?}");
        assert!(
            !text.contains(['\x1b', '\x07', '\r']),
            "{args:?}:\n{text:?}"
        );
    }
    // --raw on a terminal: the bytes as they are (the pty writes each newline as CR LF).
    for args in [
        vec!["output", h.artifact.as_str(), "--raw"],
        vec!["show", h.answered.as_str(), "--raw"],
        vec!["show", h.failed.as_str(), "--raw"],
        vec!["logs", h.answered.as_str(), "--raw"],
        vec!["logs", h.failed.as_str(), "--raw"],
        vec!["ls", "--raw"],
    ] {
        let (bytes, _) = in_a_terminal(&h.env, &args);
        assert!(
            contains(&bytes, HOSTILE),
            "{args:?}:\n{}",
            String::from_utf8_lossy(&bytes)
        );
    }
    let (bytes, _) = in_a_terminal(&h.env, &["output", &h.artifact, "--raw"]);
    assert_eq!(bytes, h.answer.replace('\n', "\r\n").as_bytes());
    let (bytes, _) = in_a_terminal(&h.env, &["ls", "--raw"]);
    assert!(
        contains(&bytes, &h.workspace.display().to_string()),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
}
