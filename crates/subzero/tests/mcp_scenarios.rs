//! Every lifecycle trace in `fixtures/scenarios/` replayed against the live broker: the
//! real `subzero mcp` over stdio, real workers, SQLite, and a model on loopback whose
//! answers the replay releases (`gate_support`), so a run is at the model exactly as
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
//! - `check_limit`: the request the limit bounds.
//!
//! What MCP cannot express is core-only, decided by the rules in `classify` and listed
//! in `CORE_ONLY` (the replay fails when the two disagree), and outcome keys MCP does not
//! show are in `UNOBSERVABLE`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gate_support;
mod live_support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use live_support::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::McpSession;

const PATIENCE: Duration = Duration::from_secs(30);

/// Steps the live broker cannot be driven to over MCP, with the reason; everything else
/// in every trace is replayed live.
const CORE_ONLY: &[(&str, usize, &str)] = &[
    ("006", 2, STEERLESS),
    ("007", 4, STEERLESS),
    ("012", 2, UNASKED_CONFIRMATION),
    ("012", 3, UNASKED_CONFIRMATION),
    ("012", 5, UNASKED_CONFIRMATION),
    ("014", 3, RACE),
    ("016", 2, FOREIGN_REPORT),
    ("016", 3, FOREIGN_REPORT),
    ("016", 4, FOREIGN_REPORT),
    ("016", 6, FOREIGN_REPORT),
    ("016", 7, FOREIGN_REPORT),
    ("020", 5, TRANSCRIPT),
    ("020", 6, TRANSCRIPT),
    ("020", 7, TRANSCRIPT),
    ("021", 3, FOREIGN_CHECKPOINT),
    ("021", 4, FOREIGN_CHECKPOINT),
    ("023", 0, QUEUE_BOUND),
    ("024", 5, UNASKED_CONFIRMATION),
    ("024", 6, NO_WORKER),
    ("026", 1, STORAGE),
    ("026", 2, STORAGE),
    ("026", 3, STORAGE),
    ("026", 4, STORAGE),
    ("026", 5, STORAGE),
    ("026", 6, STORAGE),
    ("026", 7, STORAGE),
    ("027", 5, UNASKED_CONFIRMATION),
    ("028", 2, TRANSCRIPT),
    ("029", 0, EVENT_LOG),
    ("031", 5, MCP_GRANTS),
    ("031", 6, MCP_GRANTS),
    ("031", 7, WORKER_EVENTS),
    ("031", 8, WORKER_EVENTS),
    ("032", 3, FOREIGN_REPORT),
    ("032", 4, FOREIGN_REPORT),
    ("032", 5, UNASKED_CONFIRMATION),
    ("032", 6, NO_WORKER),
];

const STEERLESS: &str = "the real worker always advertises steering";
const UNASKED_CONFIRMATION: &str =
    "a worker confirms only the stop the broker asked it for, of its active run";
const RACE: &str = "a run completing before its stop lands is a race MCP cannot order (the worker sees the cancel first)";
const FOREIGN_REPORT: &str = "a worker reports only about its own active run; a report naming another run, another child or a settled run cannot be sent";
const TRANSCRIPT: &str = "the transcript the broker verifies a checkpoint against is the worker's; MCP cannot make it differ";
const FOREIGN_CHECKPOINT: &str = "a checkpoint is verified inside subzero_resume for the named child; one of another child cannot be passed";
const QUEUE_BOUND: &str = "the whole trace: its queue bound (queueCapacity 2) is not a [limits] key, so the live broker's 16 cannot be lowered";
const NO_WORKER: &str = "no worker runs for a ready or interrupted child, so none can be lost";
const STORAGE: &str = "an inconsistent stored record cannot be produced over MCP";
const EVENT_LOG: &str = "the whole trace: events are appended by the broker, never by a caller, and their numbers depend on what the worker emitted; `an_event_log_past_its_retention_reports_the_gap_in_band` replays its rules live";
const MCP_GRANTS: &str = "64 distinct tools take MCP servers; the bound is checked when such a child is frozen (worker_mcp tests)";
const WORKER_EVENTS: &str = "event payloads are written by the broker from worker events; the worker cuts text at 4,096 bytes before that";

/// Outcome keys MCP does not show, per op.
const UNOBSERVABLE: &[(&str, &str, &str)] = &[
    (
        "*",
        "lastLeaf",
        "leaf ids are the transcript's, never on the wire",
    ),
    (
        "stop",
        "newlyRequested",
        "subzero_stop reports the run and its status, not whether this call was the first",
    ),
    (
        "stop",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "confirm_stop",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "complete",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "fail",
        "withdrawn",
        "withdrawn runs leave the queue (checked through `child.queued`)",
    ),
    (
        "lose_worker",
        "abandoned",
        "abandoned runs leave the queue (checked through `child.queued`)",
    ),
    (
        "checkpoint",
        "leaf",
        "leaf ids are the transcript's, never on the wire",
    ),
];

fn scenario_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scenarios")
}

/// What a step became live.
enum Driven {
    /// Replayed: the outcome MCP shows, or the error code.
    Live(Result<Value, String>),
    /// Not expressible over MCP, for this reason.
    CoreOnly(&'static str),
}

struct Live {
    env: LiveEnv,
    session: Option<McpSession>,
    /// Symbolic run names ↔ live run ids.
    runs: BTreeMap<String, String>,
    child: Option<String>,
    /// Workers paused so that a stop stays pending.
    paused: Vec<u32>,
    /// The leaf the child recorded last (the trace's leaf value).
    leaf: Value,
    /// Whether the last `checkpoint` step is one the live resume verifies the same way.
    checkpoint_live: bool,
}

impl Live {
    async fn new(extra_config: &str) -> Live {
        let mut env = LiveEnv::new();
        env.configure(extra_config);
        let session = env.start().await.expect("broker starts");
        Live {
            env,
            session: Some(session),
            runs: BTreeMap::new(),
            child: None,
            paused: Vec::new(),
            leaf: Value::Null,
            checkpoint_live: false,
        }
    }

    fn s(&self) -> &McpSession {
        self.session.as_ref().expect("a broker runs")
    }

    fn child(&self) -> String {
        self.child
            .clone()
            .expect("the trace spawned or loaded a child")
    }

    /// The live id of run `name`; a name the trace never created gets a fresh id no run
    /// has.
    fn run_id(&mut self, name: &str) -> String {
        self.runs
            .entry(name.to_owned())
            .or_insert_with(|| subzero_core::RunId::generate().to_string())
            .clone()
    }

    fn run_name(&self, id: &Value) -> Value {
        match id.as_str() {
            None => Value::Null,
            Some(id) => json!(
                self.runs
                    .iter()
                    .find(|(_, v)| v.as_str() == id)
                    .map_or_else(|| format!("<unnamed {id}>"), |(k, _)| k.clone())
            ),
        }
    }

    async fn snapshot(&self) -> Value {
        ok(self.s(), "subzero_get", json!({"childId": self.child()})).await
    }

    /// The trace's `child` view of the live snapshot.
    async fn view(&self) -> Value {
        if self.child.is_none() {
            return Value::Null;
        }
        let snap = self.snapshot().await;
        let status = match (&snap["activeRunId"], snap["phase"].as_str()) {
            (Value::Null, _) => Value::Null,
            (_, Some("stopping")) => json!("stop_requested"),
            _ => json!("running"),
        };
        let queued: Vec<Value> = snap["queuedRuns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| self.run_name(r))
            .collect();
        json!({
            "state": snap["state"],
            "activeRun": self.run_name(&snap["activeRunId"]),
            "activeStatus": status,
            "queued": queued,
        })
    }

    async fn restart(&mut self) {
        if let Some(session) = self.session.take() {
            session.close().await.expect("close");
        }
        self.session = Some(self.env.start().await.expect("broker restarts"));
    }

    /// Wait until the worker of a newly started run is at the model.
    fn at_the_model(&self) {
        assert!(
            self.env.gate.wait_held(PATIENCE),
            "the new run never reached the model"
        );
    }

    fn pause_workers(&mut self) {
        for pid in self.env.workers() {
            signal(pid, Signal::SIGSTOP);
            self.paused.push(pid);
        }
    }

    fn resume_workers(&mut self) {
        for pid in self.paused.drain(..) {
            signal(pid, Signal::SIGCONT);
        }
    }

    /// The active run's name and whether its stop is pending, from the live snapshot.
    async fn active(&self) -> (Value, bool) {
        let snap = self.snapshot().await;
        (
            self.run_name(&snap["activeRunId"]),
            snap["phase"] == "stopping",
        )
    }

    /// Wait until run `id` has ended; then the settlement as a trace writes it.
    async fn settled(&self, id: &str) -> Value {
        let snap = until(self.s(), &self.child(), PATIENCE, |s| {
            s["lastRun"]["runId"] == id
        })
        .await;
        assert_eq!(
            snap["lastRun"]["runId"], id,
            "the run never settled: {snap:#}"
        );
        let started = self.run_name(&snap["activeRunId"]);
        if !started.is_null() {
            self.at_the_model();
        }
        json!({
            "settled": {"run": self.run_name(&snap["lastRun"]["runId"]), "status": snap["lastRun"]["status"]},
            "started": started,
        })
    }

    /// Answer the active run's model requests with `reply` until it ends. Any request
    /// held while the run has not ended is its own: the next run cannot start first.
    async fn answer_until_settled(&self, id: &str, reply: &Reply) -> Value {
        loop {
            assert!(
                self.env.gate.answer(reply, PATIENCE),
                "no model request to answer"
            );
            for _ in 0..200 {
                let snap = self.snapshot().await;
                if snap["lastRun"]["runId"] == id {
                    return self.settled(id).await;
                }
                if self.env.gate.held() > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    }

    async fn step(&mut self, op: &str, input: &Value, expect: &Value) -> Driven {
        let ok_expected = expect.get("ok").is_some();
        match op {
            "spawn" => {
                let out = outcome(
                    self.s(),
                    "subzero_spawn",
                    json!({"prompt": input["prompt"], "templateId": "researcher", "model": self.env.model()}),
                )
                .await;
                Driven::Live(match out {
                    Ok(out) => {
                        self.child = Some(out["childId"].as_str().unwrap().to_owned());
                        let run = input["run"].as_str().unwrap().to_owned();
                        self.runs
                            .insert(run, out["runId"].as_str().unwrap().to_owned());
                        self.leaf = Value::Null;
                        self.at_the_model();
                        Ok(json!({}))
                    }
                    Err(code) => Err(code),
                })
            }
            "load" if ok_expected => {
                self.build(&input["record"]).await;
                Driven::Live(Ok(json!({})))
            }
            "load" => Driven::CoreOnly(STORAGE),
            "followup" => {
                let out = outcome(
                    self.s(),
                    "subzero_send",
                    json!({"childId": self.child(), "mode": "followup", "message": input["prompt"]}),
                )
                .await;
                Driven::Live(match out {
                    Ok(out) => {
                        let id = out["runId"].as_str().unwrap().to_owned();
                        self.runs
                            .insert(input["run"].as_str().unwrap().to_owned(), id.clone());
                        let mut result = json!({"delivery": out["delivery"]});
                        if out["delivery"] == "queued" {
                            let snap = self.snapshot().await;
                            let queue = snap["queuedRuns"].as_array().unwrap();
                            let at = queue.iter().position(|r| r == id.as_str()).unwrap();
                            result["position"] = json!(at + 1);
                        } else {
                            self.at_the_model();
                        }
                        Ok(result)
                    }
                    Err(code) => Err(code),
                })
            }
            "steer" if input["steering"] == false => Driven::CoreOnly(STEERLESS),
            "steer" => {
                let out = outcome(
                    self.s(),
                    "subzero_send",
                    json!({"childId": self.child(), "mode": "steer", "message": "look at the tests first"}),
                )
                .await;
                Driven::Live(
                    out.map(
                        |o| json!({"delivery": o["delivery"], "run": self.run_name(&o["runId"])}),
                    ),
                )
            }
            "stop" => {
                let expected = self.run_id(input["expectedRun"].as_str().unwrap());
                // Held pending until the trace confirms it.
                self.pause_workers();
                let out = outcome(
                    self.s(),
                    "subzero_stop",
                    json!({"childId": self.child(), "expectedRunId": expected}),
                )
                .await;
                let (_, stopping) = self.active().await;
                if !stopping {
                    self.resume_workers();
                }
                Driven::Live(out.map(|o| json!({"run": self.run_name(&o["runId"])})))
            }
            "confirm_stop" => {
                let (active, stopping) = self.active().await;
                let names_it = active == input["run"] && input.get("child").is_none();
                if !(stopping && names_it && !self.paused.is_empty()) {
                    return Driven::CoreOnly(UNASKED_CONFIRMATION);
                }
                let id = self.run_id(input["run"].as_str().unwrap());
                self.resume_workers();
                Driven::Live(Ok(self.settled(&id).await))
            }
            "complete" | "fail" => {
                let (active, stopping) = self.active().await;
                if active != input["run"] || input.get("child").is_some() {
                    return Driven::CoreOnly(FOREIGN_REPORT);
                }
                if stopping {
                    return Driven::CoreOnly(RACE);
                }
                let id = self.run_id(input["run"].as_str().unwrap());
                let reply = if op == "complete" {
                    self.leaf = input["leaf"].clone();
                    Reply::text("The run's answer.")
                } else {
                    assert_eq!(
                        input["code"], "model_request_failed",
                        "a live failure is the model's"
                    );
                    Reply::Status {
                        status: 503,
                        body: r#"{"error":{"message":"overloaded"}}"#.into(),
                    }
                };
                Driven::Live(Ok(self.answer_until_settled(&id, &reply).await))
            }
            "lose_worker" => {
                let snap = self.snapshot().await;
                if snap["state"] != "running" {
                    return Driven::CoreOnly(NO_WORKER);
                }
                let workers = self.env.workers();
                assert!(!workers.is_empty(), "a running child without a worker");
                for pid in workers {
                    signal(pid, Signal::SIGKILL);
                }
                self.paused.clear();
                let snap = until(self.s(), &self.child(), PATIENCE, |s| {
                    s["state"] == "interrupted"
                })
                .await;
                Driven::Live(Ok(json!({
                    "interrupted": {"run": self.run_name(&snap["lastRun"]["runId"]), "status": snap["lastRun"]["status"]},
                })))
            }
            "checkpoint" => {
                if input.get("child").is_some() {
                    self.checkpoint_live = false;
                    return Driven::CoreOnly(FOREIGN_CHECKPOINT);
                }
                let observed = input.get("observed").cloned().unwrap_or(Value::Null);
                self.checkpoint_live = observed == self.leaf;
                if self.checkpoint_live {
                    // Verified by the resume that follows, as subzero_resume does it.
                    Driven::Live(Ok(json!({})))
                } else {
                    Driven::CoreOnly(TRANSCRIPT)
                }
            }
            "resume" => {
                if !std::mem::take(&mut self.checkpoint_live) {
                    return Driven::CoreOnly(FOREIGN_CHECKPOINT);
                }
                let mut args = json!({"childId": self.child(), "model": self.env.model()});
                let message = input.get("message").cloned().unwrap_or(Value::Null);
                if !message.is_null() {
                    args["message"] = message["prompt"].clone();
                }
                let out = outcome(self.s(), "subzero_resume", args).await;
                Driven::Live(match out {
                    Ok(out) => {
                        if let Some(run) = message["run"].as_str() {
                            self.runs
                                .insert(run.to_owned(), out["runId"].as_str().unwrap().to_owned());
                            self.at_the_model();
                        }
                        Ok(json!({"state": out["state"], "run": self.run_name(&out["runId"])}))
                    }
                    Err(code) => Err(code),
                })
            }
            "event_append" | "event_read" => Driven::CoreOnly(EVENT_LOG),
            "freeze_template" => Driven::Live(self.freeze(input).await),
            "check_limit" => self.check_limit(input).await,
            other => panic!("unknown op {other}"),
        }
    }

    /// Build the stored record `r` over MCP: its last leaf by a completed run, its active
    /// run (stopping if recorded so), its queue; a ready or interrupted child is then
    /// read back by a restarted broker.
    async fn build(&mut self, r: &Value) {
        self.runs.clear();
        self.resume_workers();
        let spawn = |prompt: &str| json!({"prompt": prompt, "templateId": "researcher", "model": self.env.model()});
        let first = if r["lastLeaf"].is_null() {
            r["activeRun"]["run"].as_str().unwrap_or("loaded")
        } else {
            "before_the_leaf"
        };
        let out = ok(self.s(), "subzero_spawn", spawn("loaded from storage")).await;
        self.child = Some(out["childId"].as_str().unwrap().to_owned());
        self.runs
            .insert(first.to_owned(), out["runId"].as_str().unwrap().to_owned());
        self.at_the_model();
        if !r["lastLeaf"].is_null() {
            let id = self.run_id(first);
            self.answer_until_settled(&id, &Reply::text("recorded"))
                .await;
            self.leaf = r["lastLeaf"].clone();
            if let Some(active) = r["activeRun"]["run"].as_str() {
                let out = ok(
                    self.s(),
                    "subzero_send",
                    json!({"childId": self.child(), "mode": "followup", "message": "active"}),
                )
                .await;
                self.runs
                    .insert(active.to_owned(), out["runId"].as_str().unwrap().to_owned());
                self.at_the_model();
            }
        } else {
            self.leaf = Value::Null;
        }
        if r["activeRun"]["status"] == "stop_requested" {
            let active = self.run_id(r["activeRun"]["run"].as_str().unwrap());
            self.pause_workers();
            ok(
                self.s(),
                "subzero_stop",
                json!({"childId": self.child(), "expectedRunId": active}),
            )
            .await;
        }
        for queued in r["queued"].as_array().into_iter().flatten() {
            let out = ok(
                self.s(),
                "subzero_send",
                json!({"childId": self.child(), "mode": "followup", "message": queued["prompt"]}),
            )
            .await;
            self.runs.insert(
                queued["run"].as_str().unwrap().to_owned(),
                out["runId"].as_str().unwrap().to_owned(),
            );
        }
        if r["state"] == "interrupted" {
            for pid in self.env.workers() {
                signal(pid, Signal::SIGKILL);
            }
            self.paused.clear();
            until(self.s(), &self.child(), PATIENCE, |s| {
                s["state"] == "interrupted"
            })
            .await;
        }
        if r["state"] != "running" {
            self.restart().await;
        }
    }

    /// `freeze_template`: built-ins as `subzero_info` lists them; user templates through
    /// the configuration file of a restarted broker (refused at load, or listed); an
    /// unknown id by the spawn it refuses.
    async fn freeze(&mut self, input: &Value) -> Result<Value, String> {
        let id = input["templateId"].as_str().unwrap();
        if let Some(user) = input.get("userTemplates") {
            if let Some(session) = self.session.take() {
                session.close().await.expect("close");
            }
            self.env.configure(&templates_toml(user));
            match self.env.start().await {
                Ok(session) => self.session = Some(session),
                Err(code) => {
                    self.env.configure("");
                    self.session = Some(self.env.start().await.expect("broker starts"));
                    return Err(code);
                }
            }
        }
        let info = ok(self.s(), "subzero_info", json!({})).await;
        let listed = info["templates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["templateId"] == id)
            .cloned();
        let before = self.env.gate.bodies().len();
        let spawned = outcome(
            self.s(),
            "subzero_spawn",
            json!({"prompt": "freeze", "templateId": id, "model": self.env.model()}),
        )
        .await?;
        // The grant the worker was given is the one the model is offered.
        assert!(
            self.env.gate.wait_bodies(before + 1, PATIENCE),
            "no model request"
        );
        let offered: Vec<Value> = self.env.gate.bodies()[before]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].clone())
            .collect();
        let listed = listed.expect("a spawnable template is listed");
        assert_eq!(
            json!(offered),
            listed["tools"],
            "the model is offered the grant"
        );
        ok(
            self.s(),
            "subzero_stop",
            json!({"childId": spawned["childId"], "expectedRunId": spawned["runId"], "waitMs": 10000}),
        )
        .await;
        Ok(json!({"tools": listed["tools"], "writeCapable": listed["writeCapable"]}))
    }

    async fn check_limit(&mut self, input: &Value) -> Driven {
        let value = usize::try_from(input["value"].as_u64().unwrap()).unwrap();
        match input["limit"].as_str().unwrap() {
            "prompt_bytes" => {
                let out = outcome(
                    self.s(),
                    "subzero_spawn",
                    json!({"prompt": "x".repeat(value), "templateId": "researcher", "model": self.env.model()}),
                )
                .await;
                if let Ok(spawned) = &out {
                    self.at_the_model();
                    ok(
                        self.s(),
                        "subzero_stop",
                        json!({"childId": spawned["childId"], "expectedRunId": spawned["runId"], "waitMs": 10000}),
                    )
                    .await;
                }
                Driven::Live(out.map(|_| json!({})))
            }
            "instructions_bytes" => {
                if let Some(session) = self.session.take() {
                    session.close().await.expect("close");
                }
                let user = json!({"long": {"description": "Long", "instructions": "x".repeat(value), "tools": ["read"]}});
                self.env.configure(&templates_toml(&user));
                let started = self.env.start().await;
                let result = started.as_ref().map(|_| json!({})).map_err(Clone::clone);
                self.env.configure("");
                self.session = Some(match started {
                    Ok(s) => s,
                    Err(_) => self.env.start().await.expect("broker starts"),
                });
                Driven::Live(result)
            }
            "queued_followups" => {
                let spawned = ok(
                    self.s(),
                    "subzero_spawn",
                    json!({"prompt": "hold", "templateId": "researcher", "model": self.env.model()}),
                )
                .await;
                let child = spawned["childId"].as_str().unwrap().to_owned();
                self.at_the_model();
                let send = json!({"childId": child, "mode": "followup", "message": "later"});
                for _ in 0..value {
                    ok(self.s(), "subzero_send", send.clone()).await;
                }
                let out = outcome(self.s(), "subzero_send", send).await;
                ok(
                    self.s(),
                    "subzero_stop",
                    json!({"childId": child, "expectedRunId": spawned["runId"], "waitMs": 10000}),
                )
                .await;
                Driven::Live(out.map(|_| json!({})))
            }
            "granted_tools" => Driven::CoreOnly(MCP_GRANTS),
            "event_payload_bytes" => Driven::CoreOnly(WORKER_EVENTS),
            other => panic!("check_limit {other} is not in the trace format"),
        }
    }

    async fn finish(mut self) {
        self.resume_workers();
        if let Some(session) = self.session.take() {
            session.close().await.expect("close");
        }
    }
}

/// User templates (trace JSON, the configuration file's shape) as `[templates.ID]` TOML.
fn templates_toml(user: &Value) -> String {
    let mut out = String::new();
    for (id, t) in user.as_object().unwrap() {
        out.push_str(&format!("[templates.{id}]\n"));
        for (key, value) in t.as_object().unwrap() {
            out.push_str(&format!("{key} = {}\n", toml_value(value)));
        }
        out.push('\n');
    }
    out
}

fn toml_value(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        // JSON strings, numbers and booleans are TOML literals as they are.
        other => other.to_string(),
    }
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

/// A trace a whole-trace reason keeps off the live broker (step 0 in `CORE_ONLY`).
fn whole_trace(number: &str, trace: &Value) -> Option<&'static str> {
    let follows_up = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["op"] == "followup");
    if trace.get("queueCapacity").is_some() && follows_up {
        return Some(QUEUE_BOUND);
    }
    if trace.get("eventRetention").is_some() {
        return Some(EVENT_LOG);
    }
    CORE_ONLY
        .iter()
        .find(|(n, step, _)| *n == number && *step == 0)
        .map(|(_, _, why)| *why)
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
        let mut live = Live::new("").await;
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
