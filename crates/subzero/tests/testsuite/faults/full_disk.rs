//! A full state directory never leaves a child `running` without a live worker for more
//! than the settlement bound (10 s, `broker/worker/settle.rs` `SETTLE_BOUND`), and once
//! space returns the child takes a followup and a resume without a stop.
//!
//! Each test mounts a 2 MiB tmpfs as the broker's `--state-dir` and fills it in one way:
//! a researcher streaming a 3 MB answer (the events and the transcript fill it), a
//! `bash` tool call during which the disk fills (the transcript refuses the tool's result
//! mid-call), a result file that does not fit, and a worker that cannot start. Then the
//! file system is grown to 64 MiB (`mount -o remount,size=64m`). The transcript never keeps
//! a malformed line, and a resume afterwards verifies its checkpoint.
//!
//! Mounting needs root (CI runs as root); elsewhere the tests say why they did not run and
//! pass. The mount is undone by a guard, also when a test panics.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support;
use crate::support::chat_request::ChatRequest;
use crate::support::faults::{RawBroker, Reaper};
use crate::support::mcp::{Env, last, last_error, p, slow_reply};
use crate::support::tmpfs::Tmpfs;
use serde::Deserialize;
use serde_json::json;
use subzero_testkit::{Reply, Step};

/// The documented bound: a run whose worker is gone is recorded within 10 s.
const BOUND: Duration = Duration::from_secs(10);

/// A streamed answer of `bytes` bytes of text, then `finish_reason: stop`.
fn big_answer(bytes: u64) -> Reply {
    let chunk = json!({
        "id": "chatcmpl-testkit", "object": "chat.completion.chunk", "created": 0,
        "model": "testkit",
        "choices": [{"index": 0, "delta": {"content": "x".repeat(1000)}, "finish_reason": null}]
    })
    .to_string();
    Reply::Sse(vec![
        Step::repeat_data(&chunk, bytes / 1000),
        Step::finish("stop"),
        Step::done(),
    ])
}

fn get(broker: &mut RawBroker, child: &str) -> p::ChildSnapshot {
    broker.typed("subzero_get", json!({"childId": child, "eventLimit": 1}))
}

/// Poll until the child is not `running`; the snapshot, or `None` after `limit`.
fn left_running(broker: &mut RawBroker, child: &str, limit: Duration) -> Option<p::ChildSnapshot> {
    let deadline = Instant::now() + limit;
    loop {
        let snap = get(broker, child);
        if snap.state != p::ChildState::Running {
            return Some(snap);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The disk fills now; within `work` (what the run still had to do) plus [`BOUND`] the run
/// has failed with `code` and the child is no longer running.
fn fails_once_full(
    broker: &mut RawBroker,
    fs: &Tmpfs,
    child: &str,
    work: Duration,
    code: p::ErrorCode,
) {
    fs.fill();
    let filled = Instant::now();
    let snap = left_running(broker, child, work + BOUND)
        .unwrap_or_else(|| panic!("the child was still running on a full disk"));
    eprintln!(
        "left `running` {:?} after the disk filled: {}",
        filled.elapsed(),
        brief(&snap)
    );
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Failed,
        "{}",
        brief(&snap)
    );
    assert_eq!(last_error(&snap).code, code, "{}", brief(&snap));
}

/// The child's state, phase and last run, short (a failed run's preview can be 2 KiB of `x`).
fn brief(snap: &p::ChildSnapshot) -> String {
    let last = snap.last_run.as_ref().map(|run| {
        format!(
            "run {} status {} error {:?} preview {:.40}",
            run.run_id.as_str(),
            run.status,
            run.error,
            run.preview.as_str()
        )
    });
    format!("state {} phase {} lastRun {last:?}", snap.state, snap.phase)
}

fn spawn(broker: &mut RawBroker, env: &Env, template: &str) -> String {
    let out: p::SpawnOutput = broker.typed(
        "subzero_spawn",
        json!({"prompt": "work", "templateId": template, "model": env.model()}),
    );
    out.child_id.to_string()
}

/// A followup on the child, which must complete (no stop) with `answer`.
fn followup_completes(broker: &mut RawBroker, child: &str, answer: &str) {
    broker.ok(
        "subzero_send",
        json!({"childId": child, "message": "go on", "mode": "followup"}),
    );
    let snap = left_running(broker, child, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the followup never ended"));
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Completed,
        "{}",
        brief(&snap)
    );
    assert_eq!(last(&snap).preview.as_str(), answer, "{}", brief(&snap));
}

/// A transcript line, as far as the check reads it: every entry has a string `id`.
#[derive(Deserialize)]
struct TranscriptEntry {
    #[allow(dead_code)]
    id: String,
}

/// Every line of the child's transcript is a readable JSON entry: nothing a later open or
/// checkpoint check trips on.
fn transcript_is_whole(env: &Env, child: &str) {
    let path = env
        .state_dir()
        .join("transcripts")
        .join(format!("{child}.jsonl"));
    let text = std::fs::read_to_string(&path).expect("transcript");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the transcript ends mid-line"
    );
    for (n, line) in text.lines().enumerate() {
        let entry: Result<TranscriptEntry, _> = serde_json::from_str(line);
        assert!(
            entry.is_ok(),
            "transcript line {} is malformed: {:.120}",
            n + 1,
            line
        );
    }
}

#[test]
fn a_3_mb_answer_into_a_full_disk_ends_the_run_within_the_bound_and_the_child_goes_on() {
    let env = Env::new(vec![
        big_answer(3_000_000),
        Reply::text("after space"),
        Reply::text("resumed"),
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let Some(fs) = Tmpfs::mount(&env.state_dir()) else {
        return;
    };
    let mut broker = RawBroker::start(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    let child = spawn(&mut broker, &env, "researcher");
    assert!(
        env.server.wait_for_requests(1, Duration::from_secs(20)),
        "the model got the request"
    );
    let asked = Instant::now();

    // The stream fills the state directory: the worker cannot write its transcript, the
    // broker cannot store the events or the partial result. The run still ends, truthfully.
    let snap = left_running(&mut broker, &child, BOUND)
        .unwrap_or_else(|| panic!("the child was still running {BOUND:?} into a full disk"));
    eprintln!("left `running` after {:?}", asked.elapsed());
    assert_eq!(snap.state, p::ChildState::Ready, "{}", brief(&snap));
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Failed,
        "{}",
        brief(&snap)
    );
    let message = last_error(&snap).message.as_str();
    assert!(message.contains("No space left"), "{}", brief(&snap));
    transcript_is_whole(&env, &child);

    // Space returns: a followup and a resume work, without a stop.
    fs.grow();
    followup_completes(&mut broker, &child, "after space");
    transcript_is_whole(&env, &child);
    let resumed: p::ResumeOutput = broker.typed(
        "subzero_resume",
        json!({"childId": child, "model": env.model(), "message": "and now"}),
    );
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = left_running(&mut broker, &child, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the resumed run never ended"));
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Completed,
        "{}",
        brief(&snap)
    );
    assert_eq!(last(&snap).preview.as_str(), "resumed", "{}", brief(&snap));
    transcript_is_whole(&env, &child);
    drop(broker);
    drop(fs);
}

#[test]
fn a_tool_result_the_full_disk_refuses_ends_the_run_and_the_followup_never_sends_a_dangling_call() {
    let env = Env::new(Vec::new());
    let started = env.workspace().join("tool-started");
    // The tool's output is captured (in the state directory's scratch space) before the
    // disk fills; recorded in the transcript, each of its 8000 control bytes takes six
    // (`\u0001`), so the result needs far more room than freeing the capture gives back.
    let command = format!(
        "head -c 8000 /dev/zero | tr '\\0' '\\001'; touch {}; sleep 2",
        started.display()
    );
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": command}).to_string(),
    ));
    env.server.push(Reply::text("after space"));
    let mut reaper = Reaper::new(env.dir.path());
    let Some(fs) = Tmpfs::mount(&env.state_dir()) else {
        return;
    };
    let mut broker = RawBroker::start(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    let child = spawn(&mut broker, &env, "coder");
    assert!(
        support::faults::eventually(Duration::from_secs(20), || started.exists()),
        "the bash tool started"
    );
    // The disk fills while the tool runs: its result cannot be written to the transcript.
    // A transcript the disk refused is the state directory's storage, typed so.
    fails_once_full(
        &mut broker,
        &fs,
        &child,
        Duration::from_secs(2),
        p::ErrorCode::StorageUnavailable,
    );
    transcript_is_whole(&env, &child);

    fs.grow();
    followup_completes(&mut broker, &child, "after space");
    // The followup continued from before the turn whose call has no recorded result:
    // every assistant tool call in its request is answered (Chat Completions refuses one
    // that is not).
    let requests = env.server.requests();
    let body = ChatRequest::of(requests.last().expect("the followup's request"));
    let messages = &body.messages;
    for (n, message) in messages.iter().enumerate() {
        for call in message.tool_calls.iter().flatten() {
            let id = &call.id;
            assert!(
                messages[n + 1..]
                    .iter()
                    .any(|m| m.role == "tool" && m.tool_call_id.as_ref() == Some(id)),
                "the followup sent tool call {id} without its result: {messages:#?}"
            );
        }
    }
    transcript_is_whole(&env, &child);
    drop(broker);
    drop(fs);
}

#[test]
fn a_result_file_that_does_not_fit_fails_the_run_within_the_bound() {
    let env = Env::new(vec![
        slow_reply("a result with nowhere to go", 1500),
        Reply::text("after space"),
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let Some(fs) = Tmpfs::mount(&env.state_dir()) else {
        return;
    };
    let mut broker = RawBroker::start(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    let child = spawn(&mut broker, &env, "researcher");
    assert!(
        env.server.wait_for_requests(1, Duration::from_secs(20)),
        "the model got the request"
    );
    fails_once_full(
        &mut broker,
        &fs,
        &child,
        Duration::from_millis(1500),
        p::ErrorCode::ArtifactUnavailable,
    );
    fs.grow();
    followup_completes(&mut broker, &child, "after space");
    transcript_is_whole(&env, &child);
    drop(broker);
    drop(fs);
}

/// The broker runs from links to the built binaries, so the test can put a worker that
/// cannot start in the place of `subzero-worker` (the broker starts the one next to its
/// own executable for each worker). Returns the broker's path and the worker's.
fn linked_binaries(dir: &Path) -> (PathBuf, PathBuf) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let real = PathBuf::from(env!("CARGO_BIN_EXE_subzero"));
    for name in ["subzero", "subzero-worker", "subzero-hold"] {
        let (from, to) = (real.with_file_name(name), bin.join(name));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).expect("copy the binary");
        }
    }
    std::fs::hard_link(bin.join("subzero-worker"), bin.join("subzero-worker.real"))
        .expect("keep the real worker");
    (bin.join("subzero"), bin.join("subzero-worker"))
}

/// Replace `exe` by a "worker" that fills `state` and exits before saying hello.
fn break_worker(exe: &Path, state: &Path) {
    let script = exe.with_extension("broken");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n/usr/bin/dd if=/dev/zero of={}/filler bs=64k >/dev/null 2>&1\nexit 1\n",
            state.display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    std::fs::rename(&script, exe).expect("swap in the broken worker");
}

#[test]
fn a_worker_that_cannot_start_on_a_full_disk_fails_its_run_within_the_bound() {
    if !Path::new("/usr/bin/dd").exists() {
        eprintln!("SKIPPED: the test's broken worker needs /usr/bin/dd");
        return;
    }
    let env = Env::new(vec![Reply::text("first"), Reply::text("after space")]);
    let mut reaper = Reaper::new(env.dir.path());
    let Some(fs) = Tmpfs::mount(&env.state_dir()) else {
        return;
    };
    let (exe, worker) = linked_binaries(env.dir.path());
    let mut command = env.command("broker");
    command.exe = exe;
    let mut broker = RawBroker::start(&command);
    reaper.broker(Some(broker.pid()));
    let child = spawn(&mut broker, &env, "researcher");
    let snap = left_running(&mut broker, &child, Duration::from_secs(30)).expect("first run");
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Completed,
        "{}",
        brief(&snap)
    );

    // The next worker fills the disk and dies before its hello: the followup was admitted
    // (the disk had room), the worker start fails, and its failure must be recorded on a
    // full disk.
    break_worker(&worker, &env.state_dir());
    let asked = Instant::now();
    let err = broker.refused_with(
        "subzero_send",
        json!({"childId": child, "message": "go on", "mode": "followup"}),
    );
    assert_eq!(err.code, p::ErrorCode::WorkerIncompatible, "{err:#?}");
    let snap = left_running(&mut broker, &child, BOUND).unwrap_or_else(|| {
        panic!(
            "the child was still running {BOUND:?} after its worker failed to start on a full disk"
        )
    });
    eprintln!("left `running` {:?} after the followup", asked.elapsed());
    assert_eq!(snap.state, p::ChildState::Ready, "{}", brief(&snap));
    assert_eq!(
        last(&snap).status,
        p::TerminalRunStatus::Failed,
        "{}",
        brief(&snap)
    );
    assert_eq!(
        last_error(&snap).code,
        p::ErrorCode::WorkerIncompatible,
        "{}",
        brief(&snap)
    );

    // Space returns and the worker is whole again: the child takes the next followup.
    std::fs::rename(worker.with_file_name("subzero-worker.real"), &worker)
        .expect("restore the worker");
    fs.grow();
    followup_completes(&mut broker, &child, "after space");
    transcript_is_whole(&env, &child);
    drop(broker);
    drop(fs);
}
