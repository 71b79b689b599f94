//! Fixtures recorded from the live server: one child driven through every tool and every
//! event type over MCP (the real binary, real workers, the gated model), each document
//! checked against its schema's Rust type and compared with the committed
//! `fixtures/v1/<stem>/valid/live-*.json` after normalization (ids by first appearance,
//! timestamps, the workspace path, the model port, versions, waits, the tested-host
//! table). `cargo xtask check`
//! validates the same files against the JSON Schemas. `SUBZERO_BLESS=1` rewrites them
//! after an intended change.
//!
//! Also here: the hand-written snapshot fixtures obey the event-log rules the live server
//! follows (`docs/lifecycle.md`, "Rules the traces rely on").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::live::*;
use nix::sys::signal::Signal;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subzero_protocol as p;
use subzero_protocol::Validate;
use subzero_testkit::Reply;

const PATIENCE: Duration = Duration::from_secs(30);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v1")
}

/// Stable stand-ins for what differs between runs.
struct Normalizer {
    ids: BTreeMap<String, String>,
    workspace: String,
    /// The test's temporary directory (state, config), shown as `/home/u/.subzero`.
    dir: String,
    port: String,
}

const CROCKFORD: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

impl Normalizer {
    fn id(&mut self, prefix: &str, raw: &str) -> String {
        let n = self.ids.len();
        self.ids
            .entry(raw.to_owned())
            .or_insert_with(|| {
                let mut tail = String::new();
                let mut k = n + 1;
                for _ in 0..4 {
                    tail.insert(0, char::from(CROCKFORD[k % 32]));
                    k /= 32;
                }
                format!("{prefix}01JDZ8Q4W3V9K2M5N7P8R0{tail}")
            })
            .clone()
    }

    fn value(&mut self, key: &str, v: &Value) -> Value {
        match v {
            // The filesystem enforcement differs between kernels: recorded as Landlock ABI 7.
            Value::Object(map) if key == "filesystem" && map.contains_key("landlockAbi") => {
                let mut fs = map.clone();
                let access = map.get("access").and_then(Value::as_str);
                fs.insert("landlockAbi".into(), json!(7));
                fs.insert(
                    "summary".into(),
                    json!(
                        access.map_or("landlock-abi-7".into(), |a| format!("landlock-abi-7 {a}"))
                    ),
                );
                if access.is_some() {
                    fs.insert("enforced".into(), json!(true));
                }
                Value::Object(fs)
            }
            Value::Number(_) | Value::Null if key == "landlock" => json!(7),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.value(k, v)))
                    .collect(),
            ),
            // The table of tested host versions changes with every host release.
            Value::Array(_) if key == "hostAdapters" => json!([]),
            // Whether the Pi worker is installed depends on the checkout (`npm ci`), and the
            // footprint on the build: the recording keeps the Rust worker's entry, sized.
            Value::Array(items) if key == "workers" => Value::Array(
                items
                    .iter()
                    .filter(|w| w["name"] == "rust")
                    .map(|v| self.value(key, v))
                    .collect(),
            ),
            Value::Number(_) if key == "installedBytes" => json!(20971520),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(key, v)).collect()),
            Value::String(s) => json!(self.string(key, s)),
            Value::Number(_) if key == "ms" => json!(0),
            other => other.clone(),
        }
    }

    fn string(&mut self, key: &str, s: &str) -> String {
        for prefix in ["ch_", "run_", "art_", "st_"] {
            if s.starts_with(prefix) && s.len() == prefix.len() + 26 {
                return self.id(prefix, s);
            }
        }
        if matches!(key, "version" | "coreVersion") {
            return "1.0.0".into();
        }
        // The build: the commit moves with every commit, the target with the machine.
        if key == "commit" && (s.len() == 40 || s == "unknown") {
            return "4b825dc642cb6eb9a060e54bf8d69288fbee4904".into();
        }
        if key == "target" {
            return "x86_64-unknown-linux-gnu".into();
        }
        if s.len() == 24 && s.ends_with('Z') && s.as_bytes()[10] == b'T' {
            return "2026-11-29T20:05:36.123Z".into();
        }
        s.replace(&self.workspace, "/home/u/proj")
            .replace(&self.dir, "/home/u/.subzero")
            .replace(&self.port, "127.0.0.1:8080")
    }
}

/// Check `doc` against the schema's Rust type (round trip + validation).
fn conforms<T: DeserializeOwned + serde::Serialize + Validate>(what: &str, doc: &Value) {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what} does not match its schema: {e}\n{doc:#}"));
    typed
        .validate()
        .unwrap_or_else(|e| panic!("{what} breaks a bound: {e}"));
    assert_eq!(
        &serde_json::to_value(&typed).unwrap(),
        doc,
        "{what} does not round-trip"
    );
}

/// The recorded documents by file, checked and normalized.
struct Recording {
    norm: Normalizer,
    files: BTreeMap<PathBuf, Value>,
}

impl Recording {
    fn keep<T: DeserializeOwned + serde::Serialize + Validate>(
        &mut self,
        stem: &str,
        name: &str,
        doc: &Value,
    ) {
        conforms::<T>(&format!("{stem}/{name}"), doc);
        let normalized = self.norm.value("", doc);
        conforms::<T>(&format!("{stem}/{name} (normalized)"), &normalized);
        let path = fixtures()
            .join(stem)
            .join("valid")
            .join(format!("live-{name}.json"));
        self.files.insert(path, normalized);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_output_and_event_type_is_recorded_from_the_live_server() {
    let mut env = LiveEnv::new();
    env.configure("[limits]\nevent_retention = 16\n");
    let s = env.start().await.expect("broker starts");
    let mut rec = Recording {
        norm: Normalizer {
            ids: BTreeMap::new(),
            workspace: env.workspace().to_string_lossy().into_owned(),
            dir: env
                .dir
                .path()
                .canonicalize()
                .unwrap_or_else(|_| env.dir.path().to_path_buf())
                .to_string_lossy()
                .into_owned(),
            port: env.gate.origin().trim_start_matches("http://").to_owned(),
        },
        files: BTreeMap::new(),
    };
    let info = ok(&s, "subzero_info", json!({})).await;
    rec.keep::<p::Info>("info", "info", &info);

    // Run 1: a tool call, a steer applied to the next model turn, text, completed.
    let spawned = ok(
        &s,
        "subzero_spawn",
        json!({"prompt": "Survey the README.", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    rec.keep::<p::SpawnOutput>("tool-spawn-output", "spawn", &spawned);
    let child = spawned["childId"].as_str().unwrap().to_owned();
    assert!(env.gate.answer(
        &Reply::tool_call("call_1", "read", r#"{"path":"README.md"}"#),
        PATIENCE
    ));
    assert!(env.gate.wait_bodies(2, PATIENCE), "no second model turn");
    // The worker asks for the second turn right after the tool's result: wait until the
    // broker has recorded the tool's end too, so the followup's `run_queued` comes after it
    // however loaded the machine is.
    until(&s, &child, PATIENCE, |snap| {
        snap["events"].as_array().is_some_and(|e| {
            e.iter()
                .any(|e| e["type"] == "tool" && e["state"] == "finished")
        })
    })
    .await;
    let steered = ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "steer", "message": "Mention the title."}),
    )
    .await;
    rec.keep::<p::SendOutput>("tool-send-output", "steer", &steered);
    let queued = ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "Now list the files."}),
    )
    .await;
    rec.keep::<p::SendOutput>("tool-send-output", "followup", &queued);
    // The steer lands in the turn after the one held now.
    assert!(env.gate.answer(
        &Reply::tool_call("call_2", "ls", r#"{"path":"."}"#),
        PATIENCE
    ));
    assert!(env.gate.wait_bodies(3, PATIENCE), "no third model turn");
    assert!(
        env.gate
            .answer(&Reply::text("The README is titled Demo project."), PATIENCE)
    );

    // Run 2 (the follow-up): a steer the stop discards, then the stop.
    let second = queued["runId"].as_str().unwrap().to_owned();
    until(&s, &child, PATIENCE, |snap| {
        snap["activeRunId"] == second.as_str()
    })
    .await;
    assert!(env.gate.wait_held(PATIENCE));
    ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "steer", "message": "Skip hidden files."}),
    )
    .await;
    let stopped = ok(
        &s,
        "subzero_stop",
        json!({"childId": child, "expectedRunId": second, "waitMs": 10000}),
    )
    .await;
    assert_eq!(stopped["confirmed"], true, "{stopped:#}");
    rec.keep::<p::StopOutput>("tool-stop-output", "stop", &stopped);

    // Run 3 fails at the model; run 4 loses its worker.
    ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "Try once more."}),
    )
    .await;
    assert!(env.gate.answer(
        &Reply::Status {
            status: 503,
            body: r#"{"error":{"message":"overloaded"}}"#.into()
        },
        PATIENCE
    ));
    until(&s, &child, PATIENCE, |snap| {
        snap["lastRun"]["status"] == "failed"
    })
    .await;
    ok(
        &s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "And again."}),
    )
    .await;
    assert!(env.gate.wait_held(PATIENCE));
    for pid in env.workers() {
        signal(pid, Signal::SIGKILL);
    }
    until(&s, &child, PATIENCE, |snap| snap["state"] == "interrupted").await;

    // The whole log from cursor 0: pruned to 16, so it starts with the gap event.
    let mut by_type: BTreeMap<String, Value> = BTreeMap::new();
    let mut cursor = 0u64;
    let mut first_page = None;
    loop {
        let page = ok(
            &s,
            "subzero_get",
            json!({"childId": child, "cursor": cursor, "eventLimit": 50}),
        )
        .await;
        let events = page["events"].as_array().unwrap().clone();
        first_page.get_or_insert(page.clone());
        for event in &events {
            by_type
                .entry(event["type"].as_str().unwrap().to_owned())
                .or_insert_with(|| event.clone());
        }
        if events.is_empty() {
            break;
        }
        cursor = page["nextCursor"].as_u64().unwrap();
    }
    let snapshot = first_page.unwrap();
    assert!(
        snapshot["gap"].is_object(),
        "retention pruned nothing: {snapshot:#}"
    );
    rec.keep::<p::ChildSnapshot>("child-snapshot", "get", &snapshot);

    let resumed = ok(
        &s,
        "subzero_resume",
        json!({"childId": child, "model": env.model(), "message": "Pick up where you were."}),
    )
    .await;
    rec.keep::<p::ResumeOutput>("tool-resume-output", "resume", &resumed);
    assert!(env.gate.answer(&Reply::text("Resumed and done."), PATIENCE));
    let done = until(&s, &child, PATIENCE, |snap| snap["state"] == "ready").await;
    let artifact = done["lastRun"]["artifactId"].as_str().unwrap().to_owned();
    let chunk = ok(
        &s,
        "subzero_output",
        json!({"artifactId": artifact, "offset": 0, "length": 7}),
    )
    .await;
    rec.keep::<p::ArtifactChunk>("artifact-chunk", "output", &chunk);
    let tail = ok(
        &s,
        "subzero_get",
        json!({"childId": child, "cursor": cursor, "eventLimit": 50}),
    )
    .await;
    for event in tail["events"].as_array().unwrap() {
        by_type
            .entry(event["type"].as_str().unwrap().to_owned())
            .or_insert_with(|| event.clone());
    }
    let listed = ok(&s, "subzero_list", json!({})).await;
    rec.keep::<p::ListOutput>("tool-list-output", "list", &listed);
    s.close().await.expect("close");

    let every_type = [
        "run_queued",
        "run_started",
        "text",
        "tool",
        "steer_applied",
        "steer_discarded",
        "stop_requested",
        "stop_confirmed",
        "completed",
        "failed",
        "interrupted",
        "gap",
    ];
    for kind in every_type {
        let event = by_type
            .get(kind)
            .unwrap_or_else(|| panic!("the live server emitted no `{kind}` event: {by_type:#?}"));
        rec.keep::<p::ChildEvent>("child-event", &kind.replace('_', "-"), event);
    }
    compare_or_bless(&rec.files);
}

fn compare_or_bless(files: &BTreeMap<PathBuf, Value>) {
    let bless = std::env::var_os("SUBZERO_BLESS").is_some();
    let mut stale = Vec::new();
    for (path, doc) in files {
        let text = format!("{}\n", serde_json::to_string_pretty(doc).unwrap());
        if bless {
            std::fs::write(path, &text).unwrap();
        } else if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
            stale.push(format!("{}:\n{text}", path.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "recorded fixtures differ from the live server (rerun with SUBZERO_BLESS=1 after an intended change):\n{}",
        stale.join("\n")
    );
}

/// The snapshot fixtures (hand-written and recorded) follow the event-log rules: seqs
/// grow, `nextCursor` is the last seq returned, a `gap` event comes first with the seq
/// of `oldestCursor` exactly when `gap` is set, and an active run has started.
#[test]
fn snapshot_fixtures_obey_the_event_log_rules() {
    let dir = fixtures().join("child-snapshot/valid");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.display().to_string();
        let snap: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let events = snap["events"].as_array().unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{name}: seqs {seqs:?}"
        );
        if let Some(last) = seqs.last() {
            assert_eq!(snap["nextCursor"], *last, "{name}: nextCursor");
        }
        let gaps: Vec<&Value> = events.iter().filter(|e| e["type"] == "gap").collect();
        match &snap["gap"] {
            Value::Null => assert!(gaps.is_empty(), "{name}: a gap event without `gap`"),
            gap => {
                assert_eq!(gaps.len(), 1, "{name}: `gap` set, one gap event expected");
                assert_eq!(
                    events[0]["type"], "gap",
                    "{name}: the gap event comes first"
                );
                assert_eq!(gap["oldest"], snap["oldestCursor"], "{name}: gap.oldest");
                assert_eq!(events[0]["seq"], snap["oldestCursor"], "{name}: gap seq");
                assert_eq!(events[0]["oldest"], gap["oldest"], "{name}");
                assert_eq!(events[0]["requested"], gap["requested"], "{name}");
            }
        }
        if let Some(active) = snap["activeRunId"].as_str() {
            let of_active: Vec<&str> = events
                .iter()
                .filter(|e| e["runId"] == active)
                .map(|e| e["type"].as_str().unwrap())
                .collect();
            assert!(
                of_active.is_empty() || of_active.contains(&"run_started"),
                "{name}: the active run's events {of_active:?} lack run_started"
            );
        }
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} snapshot fixtures");
}
