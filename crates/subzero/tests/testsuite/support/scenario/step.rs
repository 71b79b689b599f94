//! [`Live::step`]: one trace step driven over MCP, or the reason it cannot be.

use nix::sys::signal::Signal;
use serde::Deserialize;
use serde_json::{Value, json};
use subzero_testkit::Reply;

use crate::support::live::*;
use crate::support::mcp::{last, p, parse};

use super::build::trace;
use super::core_only::*;
use super::{Driven, Live, PATIENCE};

/// A step's input as far as the live driver reads it: the members of every operation's
/// input it uses (each operation's input has some of them; see the trace schema).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    /// A load step's stored record (read as the build's record there).
    record: Option<Value>,
    /// The prompt of a spawn or followup.
    prompt: Option<String>,
    /// The run a step names (spawn, followup, confirm_stop, complete, fail).
    run: Option<String>,
    /// The run a stop expects.
    expected_run: Option<String>,
    /// Whether a steer's run can take it (absent: it can).
    steering: Option<bool>,
    /// The child a report or checkpoint names, when it names one (`null` included).
    #[serde(default, deserialize_with = "present")]
    child: Option<Value>,
    /// The leaf a completion records.
    leaf: Option<Value>,
    /// The error code a failure reports.
    code: Option<String>,
    /// The leaf a checkpoint observed.
    observed: Option<Value>,
    /// A resume's message (read as [`ResumeMessage`] there) or a failure's text.
    message: Option<Value>,
}

/// A resume step's message: the prompt, and the run it starts.
#[derive(Debug, Deserialize)]
struct ResumeMessage {
    prompt: String,
    run: Option<String>,
}

/// Reads a member that is there, `null` included, as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Live {
    pub(crate) async fn step(&mut self, op: &str, raw: &Value, expect: &Value) -> Driven {
        let ok_expected = expect.get("ok").is_some();
        let input: Input = trace("a step's input", raw);
        // The run the step names, as a trace value (`null` when it names none).
        let named_run = json!(input.run);
        match op {
            "spawn" => {
                let out = outcome(
                    self.s(),
                    "subzero_spawn",
                    json!({"prompt": input.prompt, "templateId": "researcher", "model": self.env.model()}),
                )
                .await;
                Driven::Live(match out {
                    Ok(out) => {
                        let out: p::SpawnOutput = parse("subzero_spawn", &out);
                        self.child = Some(out.child_id.to_string());
                        let run = input.run.clone().unwrap();
                        self.runs.insert(run, out.run_id.to_string());
                        self.leaf = Value::Null;
                        self.at_the_model();
                        Ok(json!({}))
                    }
                    Err(code) => Err(code),
                })
            }
            "load" if ok_expected => {
                self.build(input.record.as_ref().expect("a load step has a record"))
                    .await;
                Driven::Live(Ok(json!({})))
            }
            "load" => Driven::CoreOnly(STORAGE),
            "followup" => {
                let out = outcome(
                    self.s(),
                    "subzero_send",
                    json!({"childId": self.child(), "mode": "followup", "message": input.prompt}),
                )
                .await;
                Driven::Live(match out {
                    Ok(out) => {
                        let out: p::SendOutput = parse("subzero_send", &out);
                        let id = out.run_id.to_string();
                        self.runs.insert(input.run.clone().unwrap(), id.clone());
                        if out.delivery == p::SendOutputDelivery::Queued {
                            let snap = self.snapshot().await;
                            let at = snap
                                .queued_runs
                                .iter()
                                .position(|r| r.as_str() == id)
                                .unwrap();
                            Ok(json!({"delivery": out.delivery, "position": at + 1}))
                        } else {
                            self.at_the_model();
                            Ok(json!({"delivery": out.delivery}))
                        }
                    }
                    Err(code) => Err(code),
                })
            }
            "steer" if input.steering == Some(false) => Driven::CoreOnly(STEERLESS),
            "steer" => {
                let out = outcome(
                    self.s(),
                    "subzero_send",
                    json!({"childId": self.child(), "mode": "steer", "message": "look at the tests first"}),
                )
                .await;
                Driven::Live(out.map(|o| {
                    let o: p::SendOutput = parse("subzero_send", &o);
                    json!({"delivery": o.delivery, "run": self.run_name(&json!(o.run_id))})
                }))
            }
            "stop" => {
                let expected = self.run_id(input.expected_run.as_deref().unwrap());
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
                Driven::Live(out.map(|o| {
                    let o: p::StopOutput = parse("subzero_stop", &o);
                    json!({"run": self.run_name(&json!(o.run_id))})
                }))
            }
            "confirm_stop" => {
                let (active, stopping) = self.active().await;
                let names_it = active == named_run && input.child.is_none();
                if !(stopping && names_it && !self.paused.is_empty()) {
                    return Driven::CoreOnly(UNASKED_CONFIRMATION);
                }
                let id = self.run_id(input.run.as_deref().unwrap());
                self.resume_workers();
                Driven::Live(Ok(self.settled(&id).await))
            }
            "complete" | "fail" => {
                let (active, stopping) = self.active().await;
                if active != named_run || input.child.is_some() {
                    return Driven::CoreOnly(FOREIGN_REPORT);
                }
                if stopping {
                    return Driven::CoreOnly(RACE);
                }
                let id = self.run_id(input.run.as_deref().unwrap());
                let reply = if op == "complete" {
                    self.leaf = input.leaf.clone().unwrap_or(Value::Null);
                    Reply::text("The run's answer.")
                } else if input.code.as_deref() == Some("context_exhausted") {
                    // The endpoint refuses the prompt as too long, the summary request
                    // of the compaction that follows too.
                    subzero_testkit::overflow::openai_chat()
                } else {
                    assert_eq!(
                        input.code.as_deref(),
                        Some("model_request_failed"),
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
                if snap.state != p::ChildState::Running {
                    return Driven::CoreOnly(NO_WORKER);
                }
                let workers = self.env.workers();
                assert!(!workers.is_empty(), "a running child without a worker");
                for pid in workers {
                    signal(pid, Signal::SIGKILL);
                }
                self.paused.clear();
                let snap = until(self.s(), &self.child(), PATIENCE, |s| {
                    parse::<p::ChildSnapshot>("subzero_get", s).state == p::ChildState::Interrupted
                })
                .await;
                let snap: p::ChildSnapshot = parse("subzero_get", &snap);
                let ended = last(&snap);
                Driven::Live(Ok(json!({
                    "interrupted": {"run": self.run_name(&json!(ended.run_id)), "status": ended.status},
                })))
            }
            "checkpoint" => {
                if input.child.is_some() {
                    self.checkpoint_live = false;
                    return Driven::CoreOnly(FOREIGN_CHECKPOINT);
                }
                let observed = input.observed.clone().unwrap_or(Value::Null);
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
                let message: Option<ResumeMessage> = input
                    .message
                    .as_ref()
                    .map(|m| trace("a resume step's message", m));
                let message = message.as_ref();
                let args = match message {
                    Some(m) => {
                        json!({"childId": self.child(), "model": self.env.model(), "message": m.prompt})
                    }
                    None => json!({"childId": self.child(), "model": self.env.model()}),
                };
                let out = outcome(self.s(), "subzero_resume", args).await;
                Driven::Live(match out {
                    Ok(out) => {
                        let out: p::ResumeOutput = parse("subzero_resume", &out);
                        if let Some(run) = message.and_then(|m| m.run.as_ref()) {
                            self.runs
                                .insert(run.clone(), out.run_id.as_ref().unwrap().to_string());
                            self.at_the_model();
                        }
                        Ok(json!({"state": out.state, "run": self.run_name(&json!(out.run_id))}))
                    }
                    Err(code) => Err(code),
                })
            }
            "event_append" | "event_read" => Driven::CoreOnly(EVENT_LOG),
            "compacted" => Driven::CoreOnly(COMPACTION),
            "freeze_template" => Driven::Live(self.freeze(raw).await),
            "check_limit" => self.check_limit(raw).await,
            other => panic!("unknown op {other}"),
        }
    }
}
