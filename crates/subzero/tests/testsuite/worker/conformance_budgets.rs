//! The worker conformance suite, part 3: the budgets and cuts of a run — `deadlineMs`,
//! `toolTimeoutMs`, `tokenBudget`, `maxOutputTokens` (a text answer cut, a call cut
//! mid-arguments) and `tool_argument_bytes` — each case on the Rust worker and on the Pi
//! worker, as the broker starts them (`support::conformance`).

use std::time::{Duration, Instant};

use crate::support::conformance::*;
use crate::support::worker::{max_output_cut, with_limits};
use serde_json::json;
use subzero_protocol::{BudgetName, BudgetReached, RunSettledStatus, ToolState};
use subzero_testkit::model_requests::chat;
use subzero_testkit::{RecordedRequest, Reply, ScriptedServer, Step};

const SUMMARY: &str = "Handoff: the work is half done; continue with the tests.";

/// Pids of live, non-zombie processes whose command line is exactly `argv`.
fn running(argv: &str) -> usize {
    let mut found = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'));
        if !zombie
            && String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .trim_end()
                == argv
        {
            found += 1;
        }
    }
    found
}

/// A marker number distinct per engine and per uid (the nobody copy runs while root's
/// processes of the same case are gone, but keep them apart anyway).
fn marker(engine: Engine, case: u32) -> String {
    let tag = match engine {
        Engine::Rust => 1,
        Engine::Pi => 2,
    };
    format!("{case}{tag}{}", nix::unistd::geteuid().as_raw() % 7)
}

/// The tool results (`role: tool` contents) of a request, by call id.
fn tool_results(request: &RecordedRequest) -> Vec<(String, String)> {
    chat::Request::of(request)
        .tool_answers()
        .into_iter()
        .map(|(id, content)| (id.to_owned(), content.to_owned()))
        .collect()
}

#[test]
fn a_deadline_mid_tool_call_kills_the_command_answers_it_not_run_and_hands_off() {
    each_engine(|engine| {
        let place = Place::new();
        let sleep = format!("sleep {}", marker(engine, 31));
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "bash", &json!({ "command": sleep }).to_string()),
            Reply::text(SUMMARY),
        ])
        .expect("server");
        let grant = with_limits(coder(), &json!({"deadlineMs": 2500}));
        let id = engine.run_id(31);
        let started = Instant::now();
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "Wait."));
        worker.tool_event(&id, "bash", ToolState::Started);
        let settled = worker.run_settled(&id);
        assert!(started.elapsed() < Duration::from_secs(15), "{engine:?}");
        assert_eq!(
            settled.status,
            RunSettledStatus::BudgetExhausted,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.budget.as_ref().map(|b| b.budget),
            Some(BudgetName::DeadlineMs)
        );
        assert_eq!(settled.budget.as_ref().map(|b| b.limit.get()), Some(2500));
        assert!(
            settled.budget.as_ref().is_some_and(|b| b.reached >= 2500),
            "{settled}"
        );
        assert_eq!(settled.result(), SUMMARY, "{engine:?}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{engine:?}: one turn, one handoff");
        let answered = tool_results(&requests[1]);
        assert_eq!(answered.len(), 1, "{engine:?}: {answered:?}");
        assert!(
            answered[0]
                .1
                .starts_with("not run: the run has used its deadline of 2500 ms"),
            "{engine:?}: {answered:?}"
        );
        assert_eq!(
            running(&sleep),
            0,
            "{engine:?}: the command outlived the deadline"
        );
    });
}

#[test]
fn a_command_past_tool_timeout_is_killed_answered_with_the_timeout_error_and_the_run_goes_on() {
    each_engine(|engine| {
        let place = Place::new();
        let sleep = format!("sleep {}", marker(engine, 32));
        let command = format!("echo EARLY-7c4; {sleep}");
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "bash", &json!({ "command": command }).to_string()),
            // The next answer comes late: the command must be gone while the run goes on.
            Reply::Sse(vec![
                Step::delay_ms(1500),
                Step::text("Done without it."),
                Step::finish("stop"),
                Step::done(),
            ]),
        ])
        .expect("server");
        let grant = with_limits(coder(), &json!({"toolTimeoutMs": 1000}));
        let id = engine.run_id(32);
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "Wait."));
        assert!(
            server.wait_for_requests(2, WAIT),
            "{engine:?}: the run went on"
        );
        assert_eq!(
            running(&sleep),
            0,
            "{engine:?}: the timed-out command still runs"
        );
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.result(), "Done without it.");
        let answered = tool_results(&server.requests()[1]);
        assert!(
            answered[0].1.contains(
                "bash timed out after 1000 ms (toolTimeoutMs); its processes were killed"
            ),
            "{engine:?}: {answered:?}"
        );
        assert!(
            answered[0].1.contains("EARLY-7c4"),
            "{engine:?}: output so far: {answered:?}"
        );
        let events = worker.tool_activity(&id);
        assert!(
            events
                .iter()
                .any(|(n, s)| n == "bash" && *s == ToolState::Failed),
            "{engine:?}: {events:?}"
        );
    });
}

#[test]
fn past_the_token_budget_the_answers_calls_are_not_run_and_the_run_hands_off() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::Sse(vec![
                Step::tool_delta(
                    Some(0),
                    Some("call_1"),
                    Some("read"),
                    r#"{"path":"README.md"}"#,
                ),
                Step::finish("tool_calls"),
                Step::usage(80, 30),
                Step::done(),
            ]),
            Reply::text(SUMMARY),
        ])
        .expect("server");
        let grant = with_limits(researcher(), &json!({"tokenBudget": 100}));
        let id = engine.run_id(33);
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "Read it."));
        let leaf = worker.leaf_committed(&id);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::BudgetExhausted,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.budget,
            Some(BudgetReached {
                budget: BudgetName::TokenBudget,
                limit: std::num::NonZeroU64::new(100).expect("above 0"),
                reached: 110,
            }),
            "{engine:?}"
        );
        assert_eq!(settled.result(), SUMMARY);
        assert!(
            worker.tool_activity(&id).is_empty(),
            "{engine:?}: no tool ran past the budget: {:?}",
            worker.events(&id)
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let answered = tool_results(&requests[1]);
        assert_eq!(answered.len(), 1, "{engine:?}: the unrun call is answered");
        assert_eq!(answered[0].0, "call_1");
        assert!(
            answered[0].1.starts_with("not run"),
            "{engine:?}: {answered:?}"
        );
        assert!(
            !answered[0].1.contains("A small project."),
            "{engine:?}: it ran"
        );
        let text = place.transcript_text();
        assert!(engine.digest(&text, leaf.leaf_id.as_str()).is_some());
    });
}

#[test]
fn a_text_answer_cut_at_max_output_tokens_is_kept_and_marked_cut() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![Reply::Sse(vec![
            Step::text("The project is a small demo that"),
            Step::finish("length"),
            Step::usage(20, 64),
            Step::done(),
        ])])
        .expect("server");
        let grant = with_limits(researcher(), &json!({"maxOutputTokens": 64}));
        let id = engine.run_id(34);
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "Describe it."));
        worker.leaf_committed(&id);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.result(), "The project is a small demo that");
        assert_eq!(
            settled.cut,
            Some(max_output_cut(64)),
            "{engine:?}: {settled}"
        );
        let body = chat::Request::of(&server.requests()[0]);
        assert_eq!(
            body.max_tokens,
            Some(64),
            "{engine:?}: the cap each request carries"
        );
    });
}

#[test]
fn a_call_cut_mid_arguments_is_not_run_its_whole_sibling_runs_and_the_run_goes_on() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::Sse(vec![
                Step::tool_delta(Some(0), Some("call_1"), Some("ls"), "{}"),
                Step::tool_delta(Some(1), Some("call_2"), Some("read"), r#"{"path":"READ"#),
                Step::finish("length"),
                Step::usage(20, 64),
                Step::done(),
            ]),
            Reply::text("I will ask for less."),
        ])
        .expect("server");
        let grant = with_limits(researcher(), &json!({"maxOutputTokens": 64}));
        let id = engine.run_id(35);
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "Read it."));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.result(), "I will ask for less.");
        assert!(settled.cut.is_none(), "{engine:?}: {settled}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{engine:?}: the run went on");
        let answered = tool_results(&requests[1]);
        let result = |id: &str| {
            answered
                .iter()
                .find(|(call, _)| call == id)
                .map(|(_, text)| text.clone())
                .unwrap_or_else(|| panic!("{engine:?}: {id} unanswered: {answered:?}"))
        };
        assert!(
            result("call_1").contains("README.md"),
            "{engine:?}: the whole call ran: {answered:?}"
        );
        assert!(
            result("call_2").contains(
                "the call was cut at the output-token cap of 64 tokens before its arguments were complete; make a smaller call"
            ),
            "{engine:?}: {answered:?}"
        );
        assert!(
            worker.tool_was(&id, "ls", ToolState::Finished)
                && !worker.tool_was(&id, "read", ToolState::Finished),
            "{engine:?}: {:?}",
            worker.events(&id)
        );
    });
}

#[test]
fn arguments_over_tool_argument_bytes_are_dropped_from_the_transcript_and_answered_briefly() {
    each_engine(|engine| {
        let place = Place::new();
        let padding = "PAD-9f1-".repeat(400);
        let arguments = json!({"path": "README.md", "pad": padding}).to_string();
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "read", &arguments),
            Reply::text("Understood."),
        ])
        .expect("server");
        let id = engine.run_id(36);
        let mut worker = place.worker(engine, &researcher());
        let start = place.start_with(&id, server.base_url(), researcher(), "Read it.", |spec| {
            spec.stream_limits = Some(json!({"maxResponseBytes": 8388608, "maxToolArgumentBytes": 1024, "idleTimeoutMs": 180000}));
        });
        worker.send(&start);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let answered = tool_results(&requests[1]);
        let expected = format!(
            "the arguments of this read call were {} bytes, over the 1024-byte cap (tool_argument_bytes), and were dropped",
            arguments.len()
        );
        assert!(
            answered[0].1.contains(&expected),
            "{engine:?}: {answered:?}"
        );
        assert!(
            !place.transcript_text().contains("PAD-9f1-"),
            "{engine:?}: the oversized arguments stayed in the transcript"
        );
        let body = requests[1].json().expect("json").to_string();
        assert!(
            !body.contains("PAD-9f1-"),
            "{engine:?}: they were sent back: {body}"
        );
    });
}
