//! `subzero watch` in a real pseudo-terminal (80×24, as a person's smallest terminal), reading
//! the store of a live broker whose children run against a scripted model: the test reads
//! the screen the program drew, through a VT100 emulator, and types keys as a person would.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::cli::*;
use crate::support::mcp::*;
use crate::support::pty::{Terminal, controls_beyond};
use serde_json::json;
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::McpSession;

const SCREEN: Duration = Duration::from_secs(20);
const DOWN: &str = "\x1b[B";
const END: &str = "\x1b[F";
const HOME: &str = "\x1b[H";
const ESC: &str = "\x1b";

/// `subzero watch` on `env`'s workspace and state directory, in an 80×24 pty.
fn watch(env: &Env, extra_env: &[(&str, &str)], cols: u16, rows: u16) -> Terminal {
    watch_in(env, &env.workspace(), extra_env, cols, rows)
}

/// `subzero watch` on `workspace` and `env`'s state directory, in a `cols`×`rows` pty.
fn watch_in(
    env: &Env,
    workspace: &Path,
    extra_env: &[(&str, &str)],
    cols: u16,
    rows: u16,
) -> Terminal {
    let mut command = Command::new(env!("CARGO_BIN_EXE_subzero"));
    command
        .args(["watch", "--workspace"])
        .arg(workspace)
        .arg("--state-dir")
        .arg(env.state_dir())
        .arg("--config")
        .arg(env.config())
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS")
        .env_remove("LINES");
    for (k, v) in extra_env {
        command.env(k, v);
    }
    Terminal::spawn(command, cols, rows)
}

/// The tail `watch` shows of a child id (`…` and its last 6 characters).
fn short(id: &str) -> String {
    format!("…{}", &id[id.len() - 6..])
}

/// The row of the board that shows `child`.
fn row_of<'a>(screen: &'a str, child: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(&short(child)))
        .unwrap_or_else(|| panic!("no row for {child}:\n{screen}"))
}

/// `subzero ls --json`'s summary of `child`.
fn listed(env: &Env, child: &str) -> p::ChildSummary {
    let out = subzero()
        .args(["ls", "--json", "--state-dir"])
        .arg(env.state_dir())
        .output()
        .expect("ls runs");
    let doc: Listing = parsed_of(&out);
    doc.children
        .iter()
        .find(|c| c.child_id.as_str() == child)
        .cloned()
        .unwrap_or_else(|| panic!("{child} is not listed: {doc:#?}"))
}

/// The words on the screen with the dialog's and panes' borders taken out, so a sentence a
/// dialog wrapped reads as one.
fn words(screen: &str) -> String {
    screen
        .chars()
        .map(|c| {
            if "│┌┐└┘─".contains(c) {
                ' '
            } else {
                c
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Keep the screen for the README's capture (`target/tmp/watch-*.txt`).
fn keep(name: &str, screen: &str) {
    let _ = std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("watch-{name}.txt")),
        format!("{screen}\n"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_shows_running_and_finished_children_at_80x24_and_opens_one_childs_events() {
    let env = Env::new(vec![
        Reply::tool_call("call_1", "bash", r#"{"command":"sleep 60"}"#),
        slow_reply("Still reading.", 60_000),
        Reply::text("The README describes a small demo project."),
    ]);
    let s = env.broker("broker").await;
    let (coder, _) = spawn(&s, &env, "coder", "Run the slow job").await;
    until_snap(&s, &coder, Duration::from_secs(20), |g| {
        g.phase == p::Phase::Tool
    })
    .await;
    let (reader, _) = spawn(&s, &env, "researcher", "Read slowly").await;
    until_snap(&s, &reader, Duration::from_secs(20), |g| {
        g.phase == p::Phase::Model
    })
    .await;
    let (done, _) = spawn(&s, &env, "researcher", "Summarize README.md").await;
    settled(&s, &done, Duration::from_secs(20)).await;

    let mut term = watch(&env, &[], 80, 24);
    let screen = term.wait_for("three children, two running", SCREEN, |t| {
        t.contains("3 children: 2 running") && t.contains(&short(&done))
    });
    keep("80x24", &screen);
    assert_eq!(screen.lines().count(), 24, "{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
    for title in [
        "CHILD",
        "STATE",
        "TEMPLATE",
        "TURN",
        "IN/OUT",
        "ELAPSED",
        "TOOL",
        "LAST EVENT",
    ] {
        assert!(screen.contains(title), "no {title} column:\n{screen}");
    }
    // The coder is in its bash tool, the reader waits for its model, the third is done:
    // running children first, each with its phase, tool, and the figures of settled runs.
    let coder_row = row_of(&screen, &coder);
    assert!(
        coder_row.contains("tool") && coder_row.contains("bash"),
        "{coder_row}"
    );
    assert!(coder_row.contains("coder"), "{coder_row}");
    let reader_row = row_of(&screen, &reader);
    assert!(reader_row.contains("model"), "{reader_row}");
    let done_row = row_of(&screen, &done);
    assert!(
        done_row.contains("ready") && done_row.contains("completed"),
        "{done_row}"
    );
    let rows: Vec<&str> = screen.lines().collect();
    let at = |id: &str| rows.iter().position(|l| l.contains(&short(id)));
    assert!(
        at(&done) > at(&coder) && at(&done) > at(&reader),
        "{screen}"
    );
    // The selected (first) child's details: its full id and model.
    let first = if at(&coder) < at(&reader) {
        &coder
    } else {
        &reader
    };
    assert!(screen.contains(first.as_str()), "{screen}");
    assert!(screen.contains("scripted at http://127.0.0.1:"), "{screen}");
    assert!(
        screen.contains("s stop run") && screen.contains("q quit"),
        "{screen}"
    );
    // On a terminal without NO_COLOR, a running child's state is green.
    assert_eq!(
        term.colour_of("tool "),
        Some(vt100::Color::Idx(2)),
        "{screen}"
    );

    // Down to the next child: the details follow the selection.
    let second = if first == &coder { &reader } else { &coder };
    term.send(DOWN);
    term.wait_text(second, SCREEN);
    assert!(term.text().contains("2/3"), "{}", term.text());
    // Enter: the child's event stream.
    term.send("\r");
    term.wait_text(&format!("events of {second}"), SCREEN);
    // "following" closes the frame: a screen that has it has the events drawn above it.
    let events = term.wait_text("following", SCREEN);
    assert!(events.contains(&format!("events of {second}")), "{events}");
    assert!(events.contains("run_started"), "{events}");
    keep("events", &events);
    term.send(ESC);
    term.wait_text("LAST EVENT", SCREEN);
    term.send("q");
    assert!(term.wait_exit(SCREEN).success());
}

#[test]
fn with_no_children_the_board_says_where_it_looked_and_has_no_colour_under_no_color() {
    let env = Env::new(vec![]);
    let mut term = watch(&env, &[("NO_COLOR", "1")], 80, 24);
    let screen = term.wait_text("No children in", SCREEN);
    assert!(
        screen.contains(&env.workspace().display().to_string()),
        "{screen}"
    );
    assert!(screen.contains("subzero watch --all"), "{screen}");
    assert!(
        screen.contains("no state database yet"),
        "nothing has run with this state directory:\n{screen}"
    );
    assert!(screen.contains("0 children"), "{screen}");
    assert_eq!(term.colours(), Vec::new(), "NO_COLOR is set:\n{screen}");
    term.send("q");
    assert!(term.wait_exit(SCREEN).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_children_page_through_an_80x24_terminal() {
    let env = Env::new(
        (0..50)
            .map(|i| Reply::text(&format!("answer {i}")))
            .collect(),
    );
    let s = env.broker("broker").await;
    let mut children = Vec::new();
    for i in 0..50 {
        let (child, _) = spawn(&s, &env, "researcher", &format!("question {i}")).await;
        settled(&s, &child, Duration::from_secs(20)).await;
        children.push(child);
    }
    let mut term = watch(&env, &[("NO_COLOR", "1")], 80, 24);
    term.wait_text("50 children: 0 running", SCREEN);
    // The footer is drawn after the rows: a screen that has it has the whole frame.
    let screen = term.wait_text("1/50", SCREEN);
    let shown = children
        .iter()
        .filter(|c| screen.contains(&short(c)))
        .count();
    assert!(
        (10..50).contains(&shown),
        "{shown} rows on 24 lines:\n{screen}"
    );
    // Under NO_COLOR the selection is still visible: reverse video is no colour.
    assert_eq!(term.colours(), Vec::new(), "{screen}");
    // End: the last child is selected and scrolled into view.
    term.send(END);
    let screen = term.wait_text("50/50", SCREEN);
    let order: Vec<&String> = children
        .iter()
        .filter(|c| screen.contains(&short(c)))
        .collect();
    assert!(!order.is_empty() && order.len() < 50, "{screen}");
    // Newest activity first: the first child spawned is the last row.
    assert!(screen.contains(&short(&children[0])), "{screen}");
    assert!(term.inverse_at(&short(&children[0])), "{screen}");
    term.send("\x1b[5~"); // PageUp
    term.wait_for("a page up", SCREEN, |t| !t.contains("50/50"));
    term.send("q");
    assert!(term.wait_exit(SCREEN).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_asks_first_and_then_names_the_live_broker_that_owns_the_run() {
    let env = Env::new(vec![slow_reply("Done.", 60_000)]);
    let s = env.broker("broker").await;
    let (child, run) = spawn(&s, &env, "researcher", "Read slowly").await;
    until_snap(&s, &child, Duration::from_secs(20), |g| {
        g.phase == p::Phase::Model
    })
    .await;
    let mut term = watch(&env, &[], 80, 24);
    term.wait_text(&short(&child), SCREEN);

    // `s` asks; `n` keeps the run going.
    term.send("s");
    let asked = term.wait_text("Stop the run?", SCREEN);
    assert!(asked.contains(&run), "{asked}");
    term.send("n");
    term.wait_for("the dialog to close", SCREEN, |t| {
        !t.contains("Stop the run?")
    });
    assert_eq!(listed(&env, &child).state, p::ChildState::Running);

    // `s`, `y`: the broker that owns the child is alive, so watch names it and what
    // stops the run, and changes nothing.
    term.send("s");
    term.wait_text("Stop the run?", SCREEN);
    term.send("y");
    let answer = term.wait_text("Not stopped", SCREEN);
    keep("stop-refused", &answer);
    let pid = s.pid().expect("broker pid");
    let flat = words(&answer);
    assert!(flat.contains(&format!("pid {pid}")), "{answer}");
    assert!(flat.contains("subzero_stop"), "{answer}");
    assert!(flat.contains("Nothing was changed"), "{answer}");
    assert_eq!(listed(&env, &child).state, p::ChildState::Running);
    assert_eq!(listed(&env, &child).active_run_id.as_deref(), Some(&run));
    term.send(" ");
    term.wait_for("the message to close", SCREEN, |t| {
        !t.contains("Not stopped")
    });
    term.send("q");
    assert!(term.wait_exit(SCREEN).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_whose_broker_is_gone_goes_through_a_broker_watch_starts() {
    let env = Env::new(vec![slow_reply("Done.", 60_000)]);
    let s = env.broker("broker").await;
    let (child, run) = spawn(&s, &env, "researcher", "Read slowly").await;
    until_snap(&s, &child, Duration::from_secs(20), |g| {
        g.phase == p::Phase::Model
    })
    .await;
    // The host dies and takes its broker with it; the worker follows (parent-death signal),
    // and the store still says the child is running: no broker is left to record the end.
    let pid = s.pid().expect("broker pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the broker");
    let lock = env
        .state_dir()
        .join("locks/children")
        .join(format!("{child}.lock"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !subzero_runtime::locks::holders(&lock).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker outlived its broker"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(listed(&env, &child).state, p::ChildState::Running);

    let mut term = watch(&env, &[], 80, 24);
    term.wait_text(&short(&child), SCREEN);
    term.send("s");
    term.wait_text("Stop the run?", SCREEN);
    term.send("y");
    // watch starts `subzero mcp` for the workspace and calls subzero_stop: that broker
    // proves the owner dead and records the lost run before it answers.
    let answer = term.wait_text("any key closes this", Duration::from_secs(40));
    keep("stop-orphan", &answer);
    let after = listed(&env, &child);
    assert_eq!(
        after.state,
        p::ChildState::Interrupted,
        "{after:#?}\n{answer}"
    );
    assert_eq!(after.active_run_id, None, "{after:#?}");
    let flat = words(&answer);
    assert!(
        flat.contains(&format!("{run} had already ended")),
        "{answer}"
    );
    term.send(" ");
    // The board shows the recorded end.
    let screen = term.wait_for("the child interrupted", SCREEN, |t| {
        row_of(t, &child).contains("interrupted")
    });
    assert!(screen.contains("0 running"), "{screen}");
    term.send("q");
    assert!(term.wait_exit(SCREEN).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_it_prints_the_board_once_as_plain_text() {
    let env = Env::new(vec![Reply::text("Done.")]);
    let s = env.broker("broker").await;
    let (child, _) = spawn(&s, &env, "researcher", "Say done").await;
    settled(&s, &child, Duration::from_secs(20)).await;
    let out = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .args(["watch", "--workspace"])
        .arg(env.workspace())
        .arg("--state-dir")
        .arg(env.state_dir())
        .env("COLUMNS", "80")
        .stdin(Stdio::null())
        .output()
        .expect("watch runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        !text.contains('\x1b'),
        "escape sequences in a pipe:\n{text:?}"
    );
    assert!(text.starts_with("subzero watch · "), "{text}");
    assert!(text.contains("1 child: 0 running"), "{text}");
    assert!(row_of(&text, &child).contains("ready"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    assert!(!text.contains("PHASE"), "one STATE column at 80:\n{text}");

    // Wider: STATE, PHASE and MODEL have columns of their own; --all finds the child too.
    let out = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .args(["watch", "--all", "--state-dir"])
        .arg(env.state_dir())
        .env("COLUMNS", "120")
        .stdin(Stdio::null())
        .output()
        .expect("watch runs");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("· all workspaces ·"), "{text}");
    for title in ["STATE", "PHASE", "MODEL"] {
        assert!(text.contains(title), "no {title} at 120 columns:\n{text}");
    }
    let row = row_of(&text, &child);
    assert!(
        row.contains("ready") && row.contains("idle") && row.contains("scripted"),
        "{row}"
    );
}

/// What a prompt-injected child writes to make a terminal act instead of show: OSC 52 sets
/// the clipboard, OSC 0 retitles the window, CSI `2J` clears the screen, CSI `8m` hides what
/// follows, a bare CR overwrites the line, U+202E shows the rest reversed.
const HOSTILE: &str =
    "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\x1b[8mhidden\rover\u{202e}gnp.exe";
/// Each of those as `watch` draws it.
const ESCAPED: [&str; 6] = [
    "\\x1b]52;c;cHduZWQ=\\x07",
    "\\x1b]0;owned\\x07",
    "\\x1b[2J",
    "\\x1b[8mhidden",
    "hidden\\rover",
    "\\u{202e}gnp.exe",
];

fn shows_every_sequence_escaped(what: &str, screen: &str) {
    for shown in ESCAPED {
        assert!(
            screen.contains(shown),
            "{what} does not show {shown}:\n{screen}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_childs_text_is_drawn_escaped_and_a_pipe_gets_plain_text() {
    // A workspace named with HOSTILE, a model named with it, a child that answered it and
    // one whose endpoint refused with it as the error body.
    let env = Env::new(vec![
        Reply::text(&format!("{HOSTILE}\nline two")),
        Reply::status(400, HOSTILE),
    ]);
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

    let mut term = watch_in(&env, &workspace, &[], 240, 40);
    let board = term.wait_text("2 children", SCREEN);
    // The header names the workspace, the details the selected child's model.
    shows_every_sequence_escaped("the board", &board);
    // Each child's event stream: the answer in the completed event, the endpoint's error
    // body in the failed one.
    for child in &children {
        term.send(HOME);
        term.wait_text("1/2", SCREEN);
        if !term.text().contains(child.as_str()) {
            term.send(DOWN);
            term.wait_text(child, SCREEN);
        }
        term.send("\r");
        let events = term.wait_text(&format!("events of {child}"), SCREEN);
        shows_every_sequence_escaped(&format!("the events of {child}"), &events);
        term.send(ESC);
        term.wait_text("LAST EVENT", SCREEN);
    }
    term.send("q");
    assert!(term.finish(SCREEN).success());
    let acting = controls_beyond(&term.bytes(), |csi| !matches!(csi, "2J" | "8m"));
    assert!(
        acting.is_empty(),
        "watch let these reach the terminal: {acting:?}"
    );

    // Piped, the board is printed once, as plain text.
    let out = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .args(["watch", "--workspace"])
        .arg(&workspace)
        .arg("--state-dir")
        .arg(env.state_dir())
        .env("COLUMNS", "240")
        .stdin(Stdio::null())
        .output()
        .expect("watch runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.starts_with("subzero watch · "), "{text}");
    assert!(text.contains("gnp.exe · 2 children"), "{text}");
    assert!(
        !text.contains(['\x1b', '\x07', '\r', '\u{202e}']),
        "{text:?}"
    );
}
