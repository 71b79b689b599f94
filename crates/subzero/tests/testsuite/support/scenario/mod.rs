//! The live side of the scenario replay (`mcp/scenarios.rs`): a [`Live`] broker driven one
//! trace step at a time ([`Live::step`], in `step.rs`; stored records and limits in
//! `build.rs`), and the steps MCP cannot express (`core_only.rs`).
// Like `mcp/scenarios.rs`, the replay unwraps what a trace guarantees.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod build;
mod core_only;
mod step;

use std::collections::BTreeMap;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::McpSession;

use crate::support::live::*;
use crate::support::mcp::p;

pub(crate) use core_only::{CORE_ONLY, UNOBSERVABLE, whole_trace};

pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// What a step became live.
pub(crate) enum Driven {
    /// Replayed: the outcome MCP shows, or the error code.
    Live(Result<Value, String>),
    /// Not expressible over MCP, for this reason.
    CoreOnly(&'static str),
}

pub(crate) struct Live {
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
    /// The trace's own configuration (its `[limits]`), kept by every reconfiguration.
    base_config: String,
}

impl Live {
    /// A broker configured as `trace` says (`queueCapacity` is `[limits] queued_followups`).
    pub(crate) async fn new(trace: &Value) -> Live {
        let base_config = trace["queueCapacity"]
            .as_u64()
            .map(|cap| format!("[limits]\nqueued_followups = {cap}\n\n"))
            .unwrap_or_default();
        let env = LiveEnv::new();
        let mut live = Live {
            env,
            session: None,
            runs: BTreeMap::new(),
            child: None,
            paused: Vec::new(),
            leaf: Value::Null,
            checkpoint_live: false,
            base_config,
        };
        live.configure("");
        live.session = Some(live.env.start().await.expect("broker starts"));
        live
    }

    /// Write the configuration file: the trace's own, then `extra`.
    fn configure(&self, extra: &str) {
        self.env.configure(&format!("{}{extra}", self.base_config));
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

    async fn snapshot(&self) -> p::ChildSnapshot {
        let snap = ok(self.s(), "subzero_get", json!({"childId": self.child()})).await;
        crate::support::mcp::parse("subzero_get", &snap)
    }

    /// The trace's `child` view of the live snapshot.
    pub(crate) async fn view(&self) -> Value {
        if self.child.is_none() {
            return Value::Null;
        }
        let snap = self.snapshot().await;
        let status = match (&snap.active_run_id, snap.phase) {
            (None, _) => Value::Null,
            (_, p::Phase::Stopping) => json!("stop_requested"),
            _ => json!("running"),
        };
        let queued: Vec<Value> = snap
            .queued_runs
            .iter()
            .map(|r| self.run_name(&json!(r)))
            .collect();
        json!({
            "state": snap.state,
            "activeRun": self.run_name(&json!(snap.active_run_id)),
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
            self.run_name(&json!(snap.active_run_id)),
            snap.phase == p::Phase::Stopping,
        )
    }

    /// Wait until run `id` has ended; then the settlement as a trace writes it.
    async fn settled(&self, id: &str) -> Value {
        let ended =
            |s: &p::ChildSnapshot| s.last_run.as_ref().is_some_and(|r| r.run_id.as_str() == id);
        let snap = until(self.s(), &self.child(), PATIENCE, |s| {
            ended(&crate::support::mcp::parse("subzero_get", s))
        })
        .await;
        let snap: p::ChildSnapshot = crate::support::mcp::parse("subzero_get", &snap);
        assert!(ended(&snap), "the run never settled: {snap:#?}");
        let started = self.run_name(&json!(snap.active_run_id));
        if !started.is_null() {
            self.at_the_model();
        }
        let last = crate::support::mcp::last(&snap);
        json!({
            "settled": {"run": self.run_name(&json!(last.run_id)), "status": last.status},
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
                if snap
                    .last_run
                    .as_ref()
                    .is_some_and(|r| r.run_id.as_str() == id)
                {
                    return self.settled(id).await;
                }
                if self.env.gate.held() > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    }

    pub(crate) async fn finish(mut self) {
        self.resume_workers();
        if let Some(session) = self.session.take() {
            session.close().await.expect("close");
        }
    }
}
