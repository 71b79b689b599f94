//! The steps that set a broker up rather than call it: a stored record built over MCP,
//! frozen templates, and the requests a limit bounds.

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use subzero_testkit::Reply;

use crate::support::live::*;

use super::core_only::*;
use super::{Driven, Live, PATIENCE};

impl Live {
    /// Build the stored record `r` over MCP: its last leaf by a completed run, its active
    /// run (stopping if recorded so), its queue; a ready or interrupted child is then
    /// read back by a restarted broker.
    pub(super) async fn build(&mut self, r: &Value) {
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
    pub(super) async fn freeze(&mut self, input: &Value) -> Result<Value, String> {
        let id = input["templateId"].as_str().unwrap();
        if let Some(user) = input.get("userTemplates") {
            if let Some(session) = self.session.take() {
                session.close().await.expect("close");
            }
            self.configure(&templates_toml(user));
            match self.env.start().await {
                Ok(session) => self.session = Some(session),
                Err(code) => {
                    self.configure("");
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

    pub(super) async fn check_limit(&mut self, input: &Value) -> Driven {
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
                // The instructions are checked when the config is loaded; a template past
                // the limit is left out, and spawning it answers that limit.
                let user = json!({"long": {"description": "Long", "instructions": "x".repeat(value), "tools": ["read"]}});
                let result = self
                    .freeze(&json!({"templateId": "long", "userTemplates": user}))
                    .await
                    .map(|_| json!({}));
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
