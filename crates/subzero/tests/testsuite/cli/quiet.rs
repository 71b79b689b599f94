//! Quiet by default: with `SUBZERO_LOG` unset, a broker that starts, runs a child to
//! completion and exits on EOF writes nothing to stderr below `WARN` (hosts show a
//! server's stderr to the user as errors). With `SUBZERO_LOG=info` the same session does
//! log, so the check is not vacuous. `SUBZERO_LOG` takes a level or `target=level`
//! directives; anything else is named on stderr once and the broker stays quiet.

use std::time::Duration;

use crate::support::faults::{RawBroker, Reaper};
use crate::support::mcp::Env;
use crate::support::mcp::{last_status, p};
use serde_json::json;
use subzero_testkit::Reply;

/// Run one session (spawn, wait for the result, EOF) and return the broker's stderr.
fn session(log: Option<&str>, name: &str) -> String {
    let env = Env::new(vec![Reply::text("Quiet result.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut cmd = env.command(name);
    cmd.env.retain(|(k, _)| k.as_os_str() != "SUBZERO_LOG");
    if let Some(filter) = log {
        cmd.env.push(("SUBZERO_LOG".into(), filter.into()));
    }
    let mut broker = RawBroker::start(&cmd);
    reaper.broker(Some(broker.pid()));
    let out = broker.typed::<p::SpawnOutput>(
        "subzero_spawn",
        json!({"prompt": "go", "templateId": "researcher", "model": env.model()}),
    );
    let child = out.child_id.as_str().to_owned();
    let snap =
        broker.typed::<p::ChildSnapshot>("subzero_get", json!({"childId": child, "waitMs": 20000}));
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    broker.close_stdin();
    assert!(
        broker.wait_exit(Duration::from_secs(10)).is_some(),
        "the broker exits at EOF"
    );
    std::fs::read_to_string(env.log(name)).expect("stderr file")
}

#[test]
fn without_subzero_log_the_broker_writes_nothing_below_warn_to_stderr() {
    let quiet = session(None, "quiet");
    let chatty: Vec<&str> = quiet
        .lines()
        .filter(|l| {
            [" INFO ", " DEBUG ", " TRACE "]
                .iter()
                .any(|lvl| l.contains(lvl))
        })
        .collect();
    assert!(chatty.is_empty(), "stderr below warn: {chatty:#?}");

    let loud = session(Some("info"), "loud");
    assert!(
        loud.lines().any(|l| l.contains(" INFO ")),
        "SUBZERO_LOG=info logs at info: {loud}"
    );
}

#[test]
fn subzero_log_directives_pick_targets() {
    let only_serve = session(Some("warn,subzero::serve=info"), "targets");
    let info: Vec<&str> = only_serve
        .lines()
        .filter(|l| l.contains(" INFO "))
        .collect();
    assert!(
        info.iter().any(|l| l.contains("subzero mcp ready")),
        "the broker's own INFO line is there: {only_serve}"
    );
    assert!(
        info.iter().all(|l| l.contains("subzero::serve")),
        "only the named target logs at info: {info:#?}"
    );
}

#[test]
fn an_unreadable_subzero_log_is_named_once_and_the_broker_stays_quiet() {
    let out = session(Some("[span{field=1}]=debug"), "unreadable");
    let named: Vec<&str> = out.lines().filter(|l| l.contains("SUBZERO_LOG")).collect();
    assert_eq!(named.len(), 1, "{out}");
    assert!(
        named[0].contains("target=level") && named[0].contains("WARN"),
        "says what it takes and what it does instead: {}",
        named[0]
    );
    assert!(
        !out.lines()
            .any(|l| [" INFO ", " DEBUG "].iter().any(|lvl| l.contains(lvl))),
        "{out}"
    );
}
