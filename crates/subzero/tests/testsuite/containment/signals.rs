//! A tool process signals only its own tree: from Landlock ABI 6 its ruleset scopes
//! signals, so a prompt-injected coder's `bash` cannot SIGTERM its worker (which would end
//! the run), its broker (the parent agent's MCP server), the test process or any other
//! process of the user — on the subreaper fallback, where it sees them all in `/proc`, as in
//! a PID namespace, where its worker is PID 1 — while it still ends a process it started.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::containment::{Case, Path_};
use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

/// Each probe `name=ok|fail:output` into `signals.txt`: signal 0 (the permission check
/// alone, nothing is delivered) to each target, then the real signal to its own child.
fn script(targets: &[(&str, String)]) -> String {
    let mut script = String::from(
        "probe() { name=$1; shift; if out=$(\"$@\" 2>&1); then r=ok; else r=fail; fi; printf '%s=%s:%s\\n' \"$name\" \"$r\" \"$(printf '%s' \"$out\" | tr '\\n' ' ')\" >> signals.txt; }\n",
    );
    for (name, pid) in targets {
        script.push_str(&format!("probe {name} kill -0 {pid}\n"));
    }
    script.push_str("probe self kill -0 $$\n");
    script.push_str("sleep 100 & probe own_child kill -TERM $!\n");
    script.push_str("cat signals.txt\n");
    script
}

fn results(case: &Case) -> BTreeMap<String, (bool, String)> {
    let text =
        std::fs::read_to_string(case.env.workspace().join("signals.txt")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once('=')?;
            let (result, output) = rest.split_once(':')?;
            Some((name.to_owned(), (result == "ok", output.trim().to_owned())))
        })
        .collect()
}

async fn a_tool_signals_only_its_own_tree(path: Path_) {
    let case = Case::new(path);
    let env = &case.env;
    let mut reaper = Reaper::new(env.dir.path());
    let s = case.broker("broker").await;
    let broker = reaper.broker(s.pid());
    let landlock = broker_info(&s)
        .await
        .enforcement
        .landlock
        .map(|abi| abi.get());
    if landlock.is_none_or(|abi| abi < 6) {
        eprintln!("skipping: Landlock ABI {landlock:?} does not scope signals (6 or later does)");
        return;
    }
    let mut targets = vec![("worker", "$PPID".to_owned())];
    if path == Path_::Fallback {
        targets.push(("broker", broker.to_string()));
        targets.push(("test", std::process::id().to_string()));
    } else {
        targets.push(("init", "1".to_owned()));
    }
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": script(&targets)}).to_string(),
    ));
    env.server.push(Reply::text("signalled"));
    let (child, _) = spawn(&s, env, "coder", "Try the signals").await;
    let snap = settled(&s, &child, Duration::from_secs(60)).await;
    // The worker was not ended by its tool: the run completed.
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let seen = results(&case);
    for (name, _) in &targets {
        let (delivered, output) = seen
            .get(*name)
            .unwrap_or_else(|| panic!("probe {name} missing: {seen:#?}"));
        assert!(
            !delivered && output.contains("not permitted"),
            "a tool may signal its {name}: {output}"
        );
    }
    for name in ["self", "own_child"] {
        assert_eq!(
            seen.get(name).map(|(ok, _)| *ok),
            Some(true),
            "a tool cannot signal {name}: {seen:#?}"
        );
    }
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_pid_namespace_a_tool_cannot_signal_its_worker() {
    a_tool_signals_only_its_own_tree(Path_::Namespace).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_the_subreaper_fallback_a_tool_cannot_signal_its_worker_broker_or_host() {
    a_tool_signals_only_its_own_tree(Path_::Fallback).await;
}
