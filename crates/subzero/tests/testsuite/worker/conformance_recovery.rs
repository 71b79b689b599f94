//! The worker conformance suite, part 2: stop and cancellation with the tool tree reaped,
//! resume by branching from the last completed leaf, and — for the Pi worker, whose tools run
//! inside Node — what a hostile bash command can reach (`support::conformance`).

use std::time::Duration;

use crate::support;
use crate::support::conformance::*;
use serde_json::json;
use subzero_protocol::{RunSettledStatus, ToolState};
use subzero_testkit::{Reply, ScriptedServer, Step};

/// Pids of live processes whose command line is `marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
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
        let argv = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !zombie && argv.trim_end() == marker.trim_end() {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_stop_mid_tool_call_kills_and_reaps_the_whole_tree_before_it_is_confirmed() {
    each_engine(|engine| {
        let place = Place::new();
        let marker = match engine {
            Engine::Rust => "3131",
            Engine::Pi => "3132",
        };
        let command = format!("setsid sleep {marker}1 & (sleep {marker}2 &); sleep {marker}3");
        let server = ScriptedServer::start(vec![Reply::tool_call(
            "call_1",
            "bash",
            &json!({"command": command}).to_string(),
        )])
        .expect("server");
        let id = engine.run_id(21);
        let mut worker = place.worker(engine, &coder());
        worker.send(&place.start(&id, server.base_url(), coder(), "Run it."));
        worker.tool_event(&id, "bash", ToolState::Started);
        let deadline = std::time::Instant::now() + WAIT;
        let sleeps = || {
            (1..=3)
                .flat_map(|n| with_marker(&format!("sleep {marker}{n}")))
                .count()
        };
        while sleeps() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            sleeps(),
            3,
            "{engine:?}: the tool tree runs; stdout {}\nstderr {}\nps {}",
            worker.stdout_text(),
            worker.stderr_text(),
            String::from_utf8_lossy(
                &std::process::Command::new("ps")
                    .args(["-eo", "pid,ppid,args"])
                    .output()
                    .map(|o| o.stdout)
                    .unwrap_or_default()
            )
        );
        worker.send(&json!({"type": "cancel", "runId": id}));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Stopped,
            "{engine:?}: {settled}"
        );
        let confirmed = worker.cancel_confirmed(&id);
        // What counts is that nothing is left; `reaped` counts what the final sweep found
        // (the Rust worker's call teardown may have ended the tree before it).
        assert!(confirmed < u64::MAX, "{engine:?}: {confirmed}");
        assert_eq!(sleeps(), 0, "{engine:?}: a tool outlived the confirmation");
    });
}

#[test]
fn a_cancel_during_a_partial_tool_call_stops_the_stream_and_confirms() {
    each_engine(|engine| {
        let place = Place::new();
        let held = subzero_testkit::held::HeldStream::start(vec![Step::tool_delta(
            Some(0),
            Some("call_1"),
            Some("read"),
            "{\"pa",
        )])
        .expect("held stream");
        let id = engine.run_id(22);
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&id, held.base_url(), researcher(), "Read."));
        held.wait_for_request(WAIT).expect("the request arrived");
        assert!(
            !held.wait_closed(Duration::from_millis(300)),
            "the stream is open while the run waits"
        );
        worker.send(&json!({"type": "cancel", "runId": id}));
        assert!(
            held.wait_closed(Duration::from_secs(5)),
            "{engine:?}: the endpoint never saw the connection close"
        );
        worker.cancel_confirmed(&id);
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Stopped,
            "{engine:?}: {settled}"
        );
        assert!(
            worker.tool_activity(&id).is_empty(),
            "{engine:?}: the partial call never ran"
        );
    });
}

#[test]
fn a_resume_after_a_killed_worker_branches_from_the_last_leaf_keeps_the_interrupted_branch_and_adds_the_notice()
 {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::text("FIRST-ANSWER-7a1: a demo."),
            Reply::Hang,
            Reply::text("resumed answer"),
        ])
        .expect("server");
        let (first, second, third) = (engine.run_id(23), engine.run_id(24), engine.run_id(25));
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&first, server.base_url(), researcher(), "What is it?"));
        let leaf = worker.leaf_committed(&first);
        worker.run_settled(&first);
        let interrupted = place.start_with(
            &second,
            server.base_url(),
            researcher(),
            "INTERRUPTED-PROMPT-3f9: go deeper",
            |spec| {
                spec.from_leaf = Some(&leaf.leaf_id);
                spec.expected_digest = Some(&leaf.digest);
            },
        );
        worker.send(&interrupted);
        assert!(
            server.wait_for_requests(2, WAIT),
            "the interrupted run never reached the model"
        );
        worker.kill();
        drop(worker);
        let resumed = place.start_with(
            &third,
            server.base_url(),
            researcher(),
            "Continue.",
            |spec| {
                spec.from_leaf = Some(&leaf.leaf_id);
                spec.expected_digest = Some(&leaf.digest);
                spec.recovery_notice =
                    Some("Recovery notice: RECOVER-4e2 the previous run was interrupted.");
            },
        );
        let mut next = place.worker(engine, &researcher());
        next.send(&resumed);
        let committed = next.leaf_committed(&third);
        let settled = next.run_settled(&third);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        let body = bodies(&server.requests())[2].clone();
        assert!(
            body.contains("FIRST-ANSWER-7a1") && body.contains("RECOVER-4e2"),
            "{engine:?}: {body}"
        );
        assert!(
            !body.contains("INTERRUPTED-PROMPT-3f9"),
            "{engine:?}: the interrupted prompt was replayed: {body}"
        );
        let text = place.transcript_text();
        assert!(
            text.contains("INTERRUPTED-PROMPT-3f9"),
            "{engine:?}: the interrupted branch is kept"
        );
        assert!(text.contains("RECOVER-4e2"));
        assert_eq!(
            engine.digest(&text, committed.leaf_id.as_str()).as_deref(),
            Some(committed.digest.as_str())
        );
    });
}

#[test]
fn a_pi_tools_bash_reaches_no_subzero_descriptor_no_state_directory_and_not_the_key() {
    on_engines(&[Engine::Pi], |engine| {
        let place = Place::new();
        std::fs::create_dir_all(place.state.path().join("transcripts")).expect("dir");
        std::fs::write(place.state.path().join("secret-db"), "STATE-SECRET-88a")
            .expect("state file");
        let state = place.state.path().display().to_string();
        let command = format!(
            "echo -n FDS:; ls -m /proc/$$/fd; echo STATE:$(ls -A {state} 2>&1); \
         cat {state}/secret-db 2>/dev/null || echo SECRET:unreadable; \
         echo KEYS:$(for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; done | grep -ac 'sk-test-key-000[0]'); \
         echo NODE:$(cat /proc/$PPID/fd/0 2>&1 | head -c 120); \
         echo MEM:$(dd if=/proc/$PPID/mem bs=1 count=1 skip=4096 2>&1 | head -c 120)"
        );
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "bash", &json!({"command": command}).to_string()),
            Reply::text("done"),
        ])
        .expect("server");
        let id = engine.run_id(26);
        let mut worker = place.worker(engine, &coder());
        worker.send(&place.start(&id, server.base_url(), coder(), "Look around."));
        let settled = worker.run_settled(&id);
        assert_eq!(settled.status, RunSettledStatus::Completed, "{settled}");
        let requests = server.requests();
        let result = support::worker::tool_results(&requests[1]);
        let out = result.join("\n");
        // `ls` lists the shell's descriptors with no pipeline around it: a pipe the shell
        // itself holds while it starts `ls | …` showed as a descriptor 3 now and then.
        assert!(
            out.lines().any(|l| l.trim() == "FDS:0, 1, 2"),
            "only stdio is open in the tool (a descriptor above 2 reached it): {out}"
        );
        assert!(
            // Only the worker's own scratch directory is bound back beneath the cover
            // (as the broker lays it out: <state>/scratch/<worker's directory>).
            out.lines()
                .any(|l| l.trim() == "STATE:" || l.trim() == "STATE:scratch"),
            "the state directory shows nothing but the scratch parent: {out}"
        );
        assert!(
            !out.contains("STATE-SECRET-88a") && out.contains("SECRET:unreadable"),
            "{out}"
        );
        assert!(
            out.contains("KEYS:0"),
            "the key is in some process's environ or cmdline: {out}"
        );
        assert!(
            out.contains("NODE:cat: /proc/") && out.contains("/fd/0: Permission denied"),
            "Node's descriptors are closed: {out}"
        );
        assert!(
            out.contains("MEM:dd: failed to open") && out.contains("/mem': Permission denied"),
            "Node's memory is closed: {out}"
        );
        assert!(!out.contains("sk-test-key-0000"), "{out}");
    });
}
