//! Every lifecycle trace in `fixtures/scenarios/` replayed against the live broker: the
//! real `subzero mcp` over stdio, real workers, SQLite, and a model on loopback whose
//! answers the replay releases (`support::gate`), so a run is at the model exactly as
//! long as the trace says. `crates/subzero-core/tests/scenarios.rs` replays the same
//! traces against the core.
//!
//! How a step is driven over MCP:
//! - `spawn`, `followup`, `steer`, `stop`, `resume`: the tool of the same name;
//! - `complete` / `fail` of the active run: the gated model answers (text / HTTP 503);
//! - `confirm_stop`: a stop is held pending by pausing the worker (SIGSTOP) before the
//!   `stop` call; confirming it is letting the worker go on (SIGCONT);
//! - `lose_worker`: SIGKILL of the worker;
//! - `checkpoint` + `resume`: `subzero_resume`, which verifies the checkpoint itself;
//! - `load` of a consistent record: the same child built over MCP (its last leaf by a
//!   completed run, its active run, stop and queue by the calls that make them), and for
//!   a ready or interrupted record a broker restart, so it is read back from storage;
//! - `freeze_template`: `subzero_info` and `subzero_spawn`, user templates through the
//!   configuration file of a restarted broker;
//! - `check_limit`: the request the limit bounds;
//! - a trace's `queueCapacity`: the broker's `[limits] queued_followups`.
//!
//! What MCP cannot express is core-only, decided by the rules in `classify` and listed
//! in `CORE_ONLY` (the replay fails when the two disagree), and outcome keys MCP does not
//! show are in `UNOBSERVABLE`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::support::scenario::{CORE_ONLY, Driven, Live, UNOBSERVABLE, whole_trace};

fn scenario_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scenarios")
}

/// `actual` matches `expected` as in the core replay, except for keys MCP does not show.
fn matches(op: &str, expected: &Value, actual: &Value, at: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let hidden = UNOBSERVABLE
                    .iter()
                    .any(|(o, key, _)| (*o == op || *o == "*") && key == k);
                match a.get(k) {
                    Some(av) => matches(op, v, av, &format!("{at}.{k}")),
                    None if hidden => {}
                    None => panic!("{at}: the live outcome has no `{k}` (expected {v})"),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{at}: expected {expected}, got {actual}");
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                matches(op, x, y, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(expected, actual, "{at}"),
    }
}

fn traces() -> Vec<(String, Value)> {
    let mut traces: Vec<(String, Value)> = std::fs::read_dir(scenario_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().unwrap().to_string_lossy().as_bytes()[0].is_ascii_digit()
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (
                name,
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
            )
        })
        .collect();
    traces.sort_by(|a, b| a.0.cmp(&b.0));
    traces
}

#[tokio::test(flavor = "multi_thread")]
async fn every_scenario_replays_against_the_live_broker() {
    let only = std::env::var("SUBZERO_SCENARIO").ok();
    let mut core_only: Vec<(String, usize, &'static str)> = Vec::new();
    let mut live_steps = 0usize;
    let mut replayed = 0usize;
    for (name, trace) in traces() {
        let number = name[..3].to_owned();
        if only.as_ref().is_some_and(|o| !name.starts_with(o.as_str())) {
            continue;
        }
        if let Some(why) = whole_trace(&number, &trace) {
            core_only.push((number, 0, why));
            continue;
        }
        let mut live = Live::new(&trace).await;
        for (i, step) in trace["steps"].as_array().unwrap().iter().enumerate() {
            let op = step["op"].as_str().unwrap();
            let at = format!("{name} step {} ({op})", i + 1);
            let expect = &step["expect"];
            match live.step(op, &step["input"], expect).await {
                Driven::CoreOnly(why) => core_only.push((number.clone(), i + 1, why)),
                Driven::Live(Ok(mut value)) => {
                    assert!(
                        expect.get("ok").is_some(),
                        "{at}: expected {expect}, the live broker succeeded with {value}"
                    );
                    if let Value::Object(map) = &mut value {
                        map.insert("child".into(), live.view().await);
                    }
                    matches(op, &expect["ok"], &value, &at);
                    live_steps += 1;
                }
                Driven::Live(Err(code)) => {
                    assert_eq!(
                        expect["error"], code,
                        "{at}: the live broker answered {code}"
                    );
                    live_steps += 1;
                }
            }
        }
        live.finish().await;
        replayed += 1;
    }
    if only.is_none() {
        let listed: Vec<(String, usize, &str)> = CORE_ONLY
            .iter()
            .map(|(n, s, w)| ((*n).to_owned(), *s, *w))
            .collect();
        assert_eq!(
            core_only, listed,
            "the steps the live replay could not drive differ from CORE_ONLY"
        );
        assert!(replayed >= 29, "only {replayed} traces replayed live");
    }
    writeln!(
        std::io::stderr(),
        "replayed {replayed} traces live: {live_steps} steps over MCP, {} core-only",
        core_only.len()
    )
    .unwrap();
}
