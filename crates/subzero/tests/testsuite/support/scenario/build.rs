//! The steps that set a broker up rather than call it: a stored record built over MCP,
//! frozen templates, and the requests a limit bounds.

use nix::sys::signal::Signal;
use serde::Deserialize;
use serde_json::{Value, json};
use subzero_testkit::Reply;

use crate::support::live::*;
use crate::support::mcp::{p, parse};

use super::core_only::*;
use super::{Driven, Live, PATIENCE};

/// A stored child record of a `load` step (the trace's `childRecord`), as far as the live
/// build reads it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    state: String,
    #[serde(default)]
    active_run: Option<ActiveRun>,
    #[serde(default)]
    queued: Vec<Queued>,
    /// The last completed leaf (kept as the trace writes it), or none.
    #[serde(default)]
    last_leaf: Option<Value>,
}

/// A record's active run: its name and stored status.
#[derive(Debug, Deserialize)]
struct ActiveRun {
    run: String,
    status: String,
}

/// A record's queued run.
#[derive(Debug, Deserialize)]
struct Queued {
    run: String,
    prompt: String,
}

/// A `freeze_template` step's input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Freeze {
    template_id: String,
    /// Templates of the configuration file (the file's shape, as JSON), if the step has any.
    #[serde(default, deserialize_with = "present")]
    user_templates: Option<Value>,
}

/// A `check_limit` step's input.
#[derive(Debug, Deserialize)]
struct CheckLimit {
    limit: String,
    value: u64,
}

/// The part of a model request the freeze reads: the names of the tools it offers.
#[derive(Debug, Deserialize)]
struct Offered {
    tools: Vec<OfferedTool>,
}

#[derive(Debug, Deserialize)]
struct OfferedTool {
    function: OfferedFunction,
}

#[derive(Debug, Deserialize)]
struct OfferedFunction {
    name: String,
}

/// Reads a member that is there, `null` included, as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A trace value read as the driver's type `T`, panicking with it when it does not match.
pub(super) fn trace<T: serde::de::DeserializeOwned>(what: &str, value: &Value) -> T {
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{what} does not match the trace format: {e}\n{value:#}"))
}

impl Live {
    /// Build the stored record `r` over MCP: its last leaf by a completed run, its active
    /// run (stopping if recorded so), its queue; a ready or interrupted child is then
    /// read back by a restarted broker.
    pub(super) async fn build(&mut self, r: &Value) {
        let r: Record = trace("a load step's record", r);
        self.runs.clear();
        self.resume_workers();
        let spawn = |prompt: &str| json!({"prompt": prompt, "templateId": "researcher", "model": self.env.model()});
        let active_run = r.active_run.as_ref();
        let first = match (&r.last_leaf, active_run) {
            (None, Some(active)) => active.run.as_str(),
            (None, None) => "loaded",
            (Some(_), _) => "before_the_leaf",
        };
        let out: p::SpawnOutput = parse(
            "subzero_spawn",
            &ok(self.s(), "subzero_spawn", spawn("loaded from storage")).await,
        );
        self.child = Some(out.child_id.to_string());
        self.runs.insert(first.to_owned(), out.run_id.to_string());
        self.at_the_model();
        if let Some(leaf) = &r.last_leaf {
            let id = self.run_id(first);
            self.answer_until_settled(&id, &Reply::text("recorded"))
                .await;
            self.leaf = leaf.clone();
            if let Some(active) = active_run {
                let out: p::SendOutput = parse(
                    "subzero_send",
                    &ok(
                        self.s(),
                        "subzero_send",
                        json!({"childId": self.child(), "mode": "followup", "message": "active"}),
                    )
                    .await,
                );
                self.runs.insert(active.run.clone(), out.run_id.to_string());
                self.at_the_model();
            }
        } else {
            self.leaf = Value::Null;
        }
        if let Some(stopping) = active_run.filter(|a| a.status == "stop_requested") {
            let active = self.run_id(&stopping.run);
            self.pause_workers();
            ok(
                self.s(),
                "subzero_stop",
                json!({"childId": self.child(), "expectedRunId": active}),
            )
            .await;
        }
        for queued in &r.queued {
            let out: p::SendOutput = parse(
                "subzero_send",
                &ok(
                    self.s(),
                    "subzero_send",
                    json!({"childId": self.child(), "mode": "followup", "message": queued.prompt}),
                )
                .await,
            );
            self.runs.insert(queued.run.clone(), out.run_id.to_string());
        }
        if r.state == "interrupted" {
            for pid in self.env.workers() {
                signal(pid, Signal::SIGKILL);
            }
            self.paused.clear();
            until(self.s(), &self.child(), PATIENCE, |s| {
                parse::<p::ChildSnapshot>("subzero_get", s).state == p::ChildState::Interrupted
            })
            .await;
        }
        if r.state != "running" {
            self.restart().await;
        }
    }

    /// `freeze_template`: built-ins as `subzero_info` lists them; user templates through
    /// the configuration file of a restarted broker (refused at load, or listed); an
    /// unknown id by the spawn it refuses.
    pub(super) async fn freeze(&mut self, input: &Value) -> Result<Value, String> {
        let input: Freeze = trace("a freeze_template step's input", input);
        let id = input.template_id.as_str();
        if let Some(user) = &input.user_templates {
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
        let info: p::Info = parse(
            "subzero_info",
            &ok(self.s(), "subzero_info", json!({})).await,
        );
        let listed = info
            .templates
            .iter()
            .find(|t| t.template_id.as_str() == id)
            .cloned();
        let before = self.env.gate.bodies().len();
        let spawned: p::SpawnOutput = parse(
            "subzero_spawn",
            &outcome(
                self.s(),
                "subzero_spawn",
                json!({"prompt": "freeze", "templateId": id, "model": self.env.model()}),
            )
            .await?,
        );
        // The grant the worker was given is the one the model is offered.
        assert!(
            self.env.gate.wait_bodies(before + 1, PATIENCE),
            "no model request"
        );
        let request: Offered = trace("the model request", &self.env.gate.bodies()[before]);
        let offered: Vec<String> = request.tools.into_iter().map(|t| t.function.name).collect();
        let listed = listed.expect("a spawnable template is listed");
        assert_eq!(
            json!(offered),
            json!(listed.tools),
            "the model is offered the grant"
        );
        ok(
            self.s(),
            "subzero_stop",
            json!({"childId": spawned.child_id, "expectedRunId": spawned.run_id, "waitMs": 10000}),
        )
        .await;
        Ok(json!({"tools": listed.tools, "writeCapable": listed.write_capable}))
    }

    pub(super) async fn check_limit(&mut self, input: &Value) -> Driven {
        let input: CheckLimit = trace("a check_limit step's input", input);
        let value = usize::try_from(input.value).unwrap();
        match input.limit.as_str() {
            "prompt_bytes" => {
                let out = outcome(
                    self.s(),
                    "subzero_spawn",
                    json!({"prompt": "x".repeat(value), "templateId": "researcher", "model": self.env.model()}),
                )
                .await;
                if let Ok(spawned) = &out {
                    let spawned: p::SpawnOutput = parse("subzero_spawn", spawned);
                    self.at_the_model();
                    ok(
                        self.s(),
                        "subzero_stop",
                        json!({"childId": spawned.child_id, "expectedRunId": spawned.run_id, "waitMs": 10000}),
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
                let spawned: p::SpawnOutput = parse(
                    "subzero_spawn",
                    &ok(
                        self.s(),
                        "subzero_spawn",
                        json!({"prompt": "hold", "templateId": "researcher", "model": self.env.model()}),
                    )
                    .await,
                );
                let child = spawned.child_id.to_string();
                self.at_the_model();
                let send = json!({"childId": child, "mode": "followup", "message": "later"});
                for _ in 0..value {
                    ok(self.s(), "subzero_send", send.clone()).await;
                }
                let out = outcome(self.s(), "subzero_send", send).await;
                ok(
                    self.s(),
                    "subzero_stop",
                    json!({"childId": child, "expectedRunId": spawned.run_id, "waitMs": 10000}),
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
