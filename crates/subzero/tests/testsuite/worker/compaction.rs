//! Compaction through the real worker on each protocol, against scripted servers that
//! refuse every prompt past N tokens (⌈body bytes / 4⌉, the worker's own estimate): a child
//! whose conversation outgrows the window makes one tools-off summary request, continues on
//! a new branch that opens with the summary and the most recent turn, keeps the old branch
//! whole in the transcript, reports `compacted`, and completes; the next run, from the
//! committed leaf, still sees the summary. With `compaction: "off"`, or when the summary
//! request fails, the run ends `context_exhausted` and nothing is committed.

use crate::support::worker::{
    Compacted, ControlLines, OnProtocol, README, RunSpec, Settled, WorkerProc, dirs, researcher,
    with_compaction_off,
};
use subzero_protocol::{ErrorCode, RunSettledStatus};
use subzero_testkit::model_requests::chat;
use subzero_testkit::worker_transcript::{Entry, entries, first};
use subzero_testkit::{Reply, ScriptedServer, overflow};

/// The first run's long answer: what compaction summarises away.
fn long_answer() -> String {
    format!("ANSWER-ONE {}", "the first run found a lot. ".repeat(300))
}
/// The second run's long prompt: the most recent turn, kept on the new branch.
fn long_prompt() -> String {
    format!("PROMPT-TWO {}", "now look further into it. ".repeat(300))
}
const SUMMARY: &str = "SUMMARY-TOKEN: run one found a lot; run two asks for more.";
/// The window the servers enforce, in tokens: the whole conversation (≈ 16 KB) passes
/// it, the summary request (≈ 8 KB) and the compacted one (≈ 8 KB) do not.
const WINDOW: u64 = 3_750;

fn protocols() -> [OnProtocol; 3] {
    [
        OnProtocol {
            api: "openai-completions",
            tag: "KC",
        },
        OnProtocol {
            api: "openai-responses",
            tag: "KR",
        },
        OnProtocol {
            api: "anthropic-messages",
            tag: "KM",
        },
    ]
}

/// One child on one worker: its workspace, transcript and the leaf its last run committed.
struct Child {
    on: OnProtocol,
    worker: WorkerProc,
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    leaf: Option<(String, String)>,
}

impl Child {
    fn new(on: OnProtocol) -> Self {
        let (ws, state) = dirs();
        std::fs::write(ws.path().join("README.md"), README).expect("readme");
        Self {
            on,
            worker: WorkerProc::spawn(),
            ws,
            state,
            leaf: None,
        }
    }

    fn transcript(&self) -> std::path::PathBuf {
        self.state.path().join("t.jsonl")
    }

    /// Runs run `n` with `prompt`, the `start_run` adjusted by `adjust`, from the last
    /// committed leaf; the settled line (and the leaf, when one was committed).
    fn run(
        &mut self,
        server: &ScriptedServer,
        n: u8,
        prompt: &str,
        adjust: impl FnOnce(&mut RunSpec),
    ) -> Settled {
        let id = self.on.run_id(n);
        let transcript = self.transcript();
        let mut spec = RunSpec::new(
            &id,
            server.base_url(),
            researcher(),
            self.ws.path(),
            &transcript,
        );
        spec.api = self.on.api;
        spec.prompt = prompt;
        if let Some((leaf, digest)) = &self.leaf {
            spec.from_leaf = Some(leaf);
            spec.expected_digest = Some(digest);
        }
        adjust(&mut spec);
        self.worker.send(&spec.message());
        let settled = self.worker.run_settled(&id);
        if matches!(
            settled.status,
            RunSettledStatus::Completed | RunSettledStatus::BudgetExhausted
        ) {
            let committed = self.worker.leaf_committed(&id);
            self.leaf = Some((
                committed.leaf_id.as_str().to_owned(),
                committed.digest.as_str().to_owned(),
            ));
        }
        settled
    }

    fn compacted(&self, n: u8) -> Vec<Compacted> {
        self.worker.compactions(&self.on.run_id(n))
    }
}

/// The text of a request body, whatever the protocol's shape.
fn body(server: &ScriptedServer, i: usize) -> String {
    server.requests()[i].body.clone()
}

/// A child past its window (run 2 brings a long prompt after run 1's long answer) on
/// `on`, with the window known (`contextWindow`) or not; the server and the child after
/// run 2.
fn outgrow(on: OnProtocol, window_known: bool) -> (ScriptedServer, Child, Settled) {
    let server = ScriptedServer::start(vec![
        overflow::unmetered_text(on.api, &long_answer()),
        overflow::unmetered_text(on.api, SUMMARY),
        overflow::unmetered_text(on.api, "done after compaction"),
        overflow::unmetered_text(on.api, "third run answered"),
    ])
    .expect("server");
    server.refuse_past(WINDOW, overflow::refusal(on.api));
    let mut child = Child::new(on);
    let window = |spec: &mut RunSpec| {
        if window_known {
            spec.context_window = Some(WINDOW);
        }
    };
    let first = child.run(&server, 1, "read the readme", window);
    assert_eq!(first.status, RunSettledStatus::Completed, "{first}");
    let second = child.run(&server, 2, &long_prompt(), window);
    (server, child, second)
}

/// What every compaction must show: the run completes on the new branch, the summary
/// request asked for no tool and saw the first answer, the request after it carries the
/// summary and the recent turn but not the summarised answer, the old branch stays whole
/// in the file, and the next run still sees the summary.
fn assert_compacted(
    server: &ScriptedServer,
    mut child: Child,
    second: &Settled,
    requests_before: usize,
) {
    assert_eq!(second.status, RunSettledStatus::Completed, "{second}");
    assert_eq!(second.result(), "done after compaction", "{second}");
    let events = child.compacted(2);
    assert_eq!(events.len(), 1, "one compaction: {events:?}");
    let event = &events[0];
    let (before, after) = (event.tokens_before, event.tokens_after);
    assert!(before > after && after < WINDOW, "{event:?}");
    let requests = server.requests().len();
    assert_eq!(
        requests,
        requests_before + 2,
        "the summary request, then the turn"
    );
    let summary_request = body(server, requests - 2);
    assert!(
        summary_request.contains("ANSWER-ONE"),
        "the summary request saw the first run"
    );
    assert!(summary_request.contains("Do not call any tool"));
    let next = body(server, requests - 1);
    assert!(
        next.contains("SUMMARY-TOKEN") && next.contains("PROMPT-TWO"),
        "{next}"
    );
    assert!(
        !next.contains("ANSWER-ONE"),
        "the summarised answer is not sent again"
    );

    // The old branch is whole in the file; the new one starts at the root with the summary.
    let all = entries(&child.transcript());
    let root = &all[0].id;
    assert!(
        all.iter().any(|e| e.id == event.branch_from),
        "branchFrom is an entry of the file"
    );
    assert!(all.iter().any(|e| e.text().starts_with("ANSWER-ONE")));
    let summary = first(&all, "summary");
    assert_eq!(
        summary.parent_id.as_ref(),
        Some(root),
        "the new branch starts at the root"
    );
    assert!(summary.text().contains("SUMMARY-TOKEN"));

    // A followup from the committed leaf continues the compacted branch.
    let third = child.run(server, 3, "and then?", |_| {});
    assert_eq!(third.status, RunSettledStatus::Completed, "{third}");
    let last = body(server, server.requests().len() - 1);
    assert!(
        last.contains("SUMMARY-TOKEN") && !last.contains("ANSWER-ONE"),
        "{last}"
    );
}

#[test]
fn a_refusal_past_the_window_compacts_once_and_the_run_completes_on_each_protocol() {
    for on in protocols() {
        let (server, child, second) = outgrow(on, false);
        // Run 1, run 2's refused request, then the summary request and the turn.
        assert_compacted(&server, child, &second, 2);
    }
}

#[test]
fn a_known_window_compacts_before_the_request_would_pass_eighty_percent_on_each_protocol() {
    for on in protocols() {
        let (server, child, second) = outgrow(on, true);
        // Run 1, then no refused request: compaction came first.
        assert_compacted(&server, child, &second, 1);
    }
}

#[test]
fn with_compaction_off_the_run_ends_context_exhausted_and_asks_for_no_summary() {
    let on = protocols()[0];
    let server = ScriptedServer::start(vec![
        overflow::unmetered_text(on.api, &long_answer()),
        overflow::unmetered_text(on.api, "never asked for"),
    ])
    .expect("server");
    server.refuse_past(WINDOW, overflow::refusal(on.api));
    let mut child = Child::new(on);
    let off = |spec: &mut RunSpec| spec.snapshot = with_compaction_off(researcher());
    assert_eq!(
        child.run(&server, 1, "read the readme", off).status,
        RunSettledStatus::Completed
    );
    let second = child.run(&server, 2, &long_prompt(), off);
    assert_eq!(second.status, RunSettledStatus::Failed, "{second}");
    assert_eq!(second.code(), ErrorCode::ContextExhausted, "{second}");
    assert_eq!(
        server.requests().len(),
        2,
        "no summary request, nothing retried"
    );
    assert!(child.compacted(2).is_empty());
}

#[test]
fn a_failed_summary_request_leaves_the_transcript_as_it_was_and_is_typed() {
    let on = protocols()[2];
    let server = ScriptedServer::start(vec![
        overflow::unmetered_text(on.api, &long_answer()),
        Reply::status(503, "overloaded"),
        overflow::unmetered_text(on.api, "a short question answered"),
    ])
    .expect("server");
    server.refuse_past(WINDOW, overflow::refusal(on.api));
    let mut child = Child::new(on);
    assert_eq!(
        child.run(&server, 1, "read the readme", |_| {}).status,
        RunSettledStatus::Completed
    );
    let leaf = child.leaf.clone();
    let second = child.run(&server, 2, &long_prompt(), |_| {});
    assert_eq!(second.status, RunSettledStatus::Failed, "{second}");
    assert_eq!(second.code(), ErrorCode::ContextExhausted, "{second}");
    let message = second.message();
    assert!(
        message.contains("compacting failed") && message.contains("503"),
        "{message}"
    );
    assert!(child.compacted(2).is_empty());
    assert_eq!(child.leaf, leaf, "nothing was committed");
    assert!(
        !entries(&child.transcript())
            .iter()
            .any(|e: &Entry| e.kind == "summary")
    );
    // The child is as it was: a short followup from the same leaf runs.
    let third = child.run(&server, 3, "a short question", |_| {});
    assert_eq!(third.status, RunSettledStatus::Completed, "{third}");
}

#[test]
fn the_parent_asking_compacts_before_the_first_request_of_the_run() {
    let on = protocols()[1];
    let server = ScriptedServer::start(vec![
        overflow::unmetered_text(on.api, &long_answer()),
        overflow::unmetered_text(on.api, SUMMARY),
        overflow::unmetered_text(on.api, "answered on the compacted branch"),
    ])
    .expect("server");
    let mut child = Child::new(on);
    assert_eq!(
        child.run(&server, 1, "read the readme", |_| {}).status,
        RunSettledStatus::Completed
    );
    let second = child.run(&server, 2, "PROMPT-SHORT continue", |spec| {
        spec.compact = Some(true)
    });
    assert_eq!(second.status, RunSettledStatus::Completed, "{second}");
    assert_eq!(child.compacted(2).len(), 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[1].body.contains("ANSWER-ONE") && !requests[1].body.contains("PROMPT-SHORT"));
    assert!(
        requests[2].body.contains("SUMMARY-TOKEN") && requests[2].body.contains("PROMPT-SHORT")
    );
    assert!(!requests[2].body.contains("ANSWER-ONE"));
}

#[test]
fn the_summary_is_capped_in_bytes_and_asked_for_in_few_tokens() {
    let on = protocols()[0];
    let flood = format!("SUMMARY-TOKEN {}", "and more detail ".repeat(2_000));
    let server = ScriptedServer::start(vec![
        overflow::unmetered_text(on.api, &long_answer()),
        overflow::unmetered_text(on.api, &flood),
        overflow::unmetered_text(on.api, "done after compaction"),
    ])
    .expect("server");
    // Room for the capped summary and the kept prompt, not for the 32 KB flood.
    server.refuse_past(WINDOW, overflow::refusal(on.api));
    let mut child = Child::new(on);
    assert_eq!(
        child.run(&server, 1, "read the readme", |_| {}).status,
        RunSettledStatus::Completed
    );
    let second = child.run(&server, 2, &long_prompt(), |_| {});
    assert_eq!(second.status, RunSettledStatus::Completed, "{second}");
    let requests = server.requests();
    let summary_request = chat::Request::of(&requests[2]);
    let cap = summary_request.max_tokens.expect("max_tokens");
    assert!(cap <= 1024, "{summary_request:#?}");
    assert!(summary_request.tools.is_none(), "no tool is offered");
    let all = entries(&child.transcript());
    let text = first(&all, "summary").text();
    // The window is unknown: at most 20 % of the refused prompt's bytes (the cap, in
    // tokens, is a quarter of that), plus the line that opens a summary.
    let before = child.compacted(2)[0].tokens_before;
    let share = (before * 4 / 5) as usize;
    assert!(text.len() <= share + 400, "{} bytes", text.len());
    assert!(cap * 4 <= share as u64 + 4, "{cap}");
    assert!(text.contains("SUMMARY-TOKEN"));
}
