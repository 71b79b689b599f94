//! [`Live::step`]: one trace step driven over MCP, or the reason it cannot be.

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use subzero_testkit::Reply;

use crate::support::live::*;
use crate::support::mcp::p;

use super::core_only::*;
use super::{Driven, Live, PATIENCE};

impl Live {
    pub(crate) async fn step(&mut self, op: &str, input: &Value, expect: &Value) -> Driven {
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
                            let at = snap
                                .queued_runs
                                .iter()
                                .position(|r| r.as_str() == id)
                                .unwrap();
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
                } else if input["code"] == "context_exhausted" {
                    // The endpoint refuses the prompt as too long, the summary request
                    // of the compaction that follows too.
                    subzero_testkit::overflow::openai_chat()
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
            "compacted" => Driven::CoreOnly(COMPACTION),
            "freeze_template" => Driven::Live(self.freeze(input).await),
            "check_limit" => self.check_limit(input).await,
            other => panic!("unknown op {other}"),
        }
    }
}
