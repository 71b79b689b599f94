//! Replays every checkout trace in `fixtures/checkouts/` against subzero-core.
//!
//! A trace names git commits symbolically (`"base"`, `"h1"`); the replayer gives each
//! name a fresh object id, runs each step through [`AnyCheckout`]'s operations (which
//! dispatch to the typed transitions), writes each decision with a writer that records
//! nothing, and compares the outcome with the step's `expect`: `{"state", "head"}` or
//! `{"error": code}`. After every step the checkout survives a `record` → `load` round
//! trip; a decision moves the row version by one from the version it names; a refused
//! step changes nothing. Every trace is validated against `checkout.schema.json` first,
//! and together the traces reach every state and exercise every operation.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::result_large_err,
    reason = "a test; a refused step gives the checkout back by value, as the transitions do"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use subzero_core::lifecycle::checkout::CheckoutPhase;
use subzero_core::lifecycle::{
    AnyCheckout, ChangeRecord, Checkout, CheckoutDecided, CheckoutRecord, CheckoutSite, DiffStats,
    GitOid,
};
use subzero_core::{CheckoutState, ChildId, Coded, ErrorCode};

use crate::testsuite::support::{storage_key, supervisor};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Trace {
    #[allow(dead_code, reason = "documentation for the reader")]
    description: String,
    steps: Vec<Step>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Step {
    op: String,
    /// `"other"`: the evidence is about another child.
    child: Option<String>,
    /// The commit the evidence names as the base (default `base`).
    base: Option<String>,
    /// The commit the evidence names as the head.
    head: Option<String>,
    /// `[files changed, insertions, deletions]`.
    stats: Option<[u64; 3]>,
    /// For `load`: the stored record.
    state: Option<CheckoutState>,
    version: Option<u64>,
    dirty: Option<bool>,
    carried: Option<bool>,
    expect: Value,
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/checkouts")
}

struct Replay {
    child: ChildId,
    other: ChildId,
    oids: BTreeMap<String, GitOid>,
    checkout: Option<AnyCheckout>,
}

type Outcome = Result<AnyCheckout, (Option<AnyCheckout>, ErrorCode)>;

/// Writes `decided` with a writer that records nothing, after checking it moves the row
/// version by one from the version it names.
fn written<S>(decided: CheckoutDecided<S>, from: Option<u64>) -> AnyCheckout
where
    S: CheckoutPhase,
    AnyCheckout: From<Checkout<S>>,
{
    assert_eq!(decided.origin().map(|o| o.version()), from);
    let after = decided.checkout().version();
    assert_eq!(
        after,
        from.map_or(1, |v| v + 1),
        "a decision is one version on"
    );
    let checkout = decided.commit(|_| Ok::<(), Infallible>(())).unwrap();
    AnyCheckout::from(checkout)
}

impl Replay {
    fn oid(&mut self, name: &str) -> GitOid {
        let next = self.oids.len() + 1;
        self.oids
            .entry(name.to_owned())
            .or_insert_with(|| GitOid::parse(&format!("{next:040x}")).unwrap())
            .clone()
    }

    fn oid_name(&self, oid: &GitOid) -> String {
        let found = self.oids.iter().find(|(_, v)| *v == oid);
        found.map_or_else(|| oid.to_string(), |(k, _)| k.clone())
    }

    fn site(&mut self, step: &Step) -> CheckoutSite {
        CheckoutSite {
            path: PathBuf::from("/state/checkouts/c"),
            base: self.oid("base"),
            workspace_head: self.oid("workspace"),
            dirty: step.dirty.unwrap_or(false),
            carried: step.carried.unwrap_or(false),
        }
    }

    fn about(&self, step: &Step) -> ChildId {
        if step.child.as_deref() == Some("other") {
            self.other
        } else {
            self.child
        }
    }

    fn evidence(&mut self, step: &Step) -> (ChildId, GitOid, Option<GitOid>, DiffStats) {
        let base = self.oid(step.base.as_deref().unwrap_or("base"));
        let head = step.head.as_deref().map(|h| self.oid(h));
        let [files_changed, insertions, deletions] = step.stats.unwrap_or([1, 1, 0]);
        let stats = DiffStats {
            files_changed,
            insertions,
            deletions,
        };
        (self.about(step), base, head, stats)
    }

    fn load(&mut self, step: &Step) -> Outcome {
        let site = self.site(step);
        let (_, _, head, stats) = self.evidence(step);
        let record = CheckoutRecord {
            child: self.child,
            state: step.state.expect("a load names the stored state"),
            site,
            change: head.map(|head| ChangeRecord { head, stats }),
            version: step.version.unwrap_or(1),
        };
        AnyCheckout::load(record, storage_key()).map_err(|e| (None, e.code()))
    }

    fn step(&mut self, step: &Step) -> Outcome {
        if step.op == "prepare" {
            let site = self.site(step);
            return Ok(written(Checkout::prepare(self.child, site), None));
        }
        if step.op == "load" {
            return self.load(step);
        }
        let (child, base, head, stats) = self.evidence(step);
        let any = self
            .checkout
            .take()
            .expect("a trace prepares or loads first");
        let from = Some(any.record().version);
        let supervisor = supervisor();
        let result = match step.op.as_str() {
            "start_run" => any.start_run().map(|d| written(d, from)),
            "settle" => {
                let head = head.expect("a settle names its head");
                let proof = supervisor.change_recorded(child, base, head, stats);
                any.settle(proof).map(|d| written(d, from))
            }
            "settle_unchanged" => {
                let proof = supervisor.no_change_recorded(child, base);
                any.settle_unchanged(proof).map(|d| written(d, from))
            }
            "apply" => {
                let proof = supervisor.landing_seen(child, head.expect("an apply names its head"));
                any.apply(proof).map(|d| written(d, from))
            }
            "discard" => any.discard().map(|d| written(d, from)),
            "remove" => any.remove().map(|d| written(d, from)),
            other => panic!("no checkout operation {other}"),
        };
        result.map_err(|(any, e)| (Some(any), e.code()))
    }
}

fn view(replay: &Replay, checkout: &AnyCheckout) -> Value {
    let record = checkout.record();
    let head = record.change.map(|c| replay.oid_name(&c.head));
    serde_json::json!({ "state": record.state.as_str(), "head": head })
}

fn load_traces() -> Vec<(String, Value)> {
    let mut traces: Vec<(String, Value)> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".json") && name.as_bytes()[0].is_ascii_digit()
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap();
            (name, serde_json::from_str(&text).unwrap())
        })
        .collect();
    traces.sort_by(|a, b| a.0.cmp(&b.0));
    traces
}

/// Runs one step and checks its outcome; returns the op and the state or error seen.
fn check_step(replay: &mut Replay, step: &Step, at: &str) -> String {
    let before = replay.checkout.as_ref().map(AnyCheckout::record);
    match (replay.step(step), step.expect.get("error")) {
        (Ok(checkout), None) => {
            let seen = view(replay, &checkout);
            for (key, want) in step.expect.as_object().unwrap() {
                assert_eq!(&seen[key], want, "{at}: {key} (got {seen})");
            }
            let record = checkout.record();
            let reloaded = AnyCheckout::load(record.clone(), storage_key()).unwrap();
            assert_eq!(reloaded.record(), record, "{at}: record/load round trip");
            replay.checkout = Some(checkout);
            record.state.as_str().to_owned()
        }
        (Err((back, code)), Some(want)) => {
            assert_eq!(want, code.as_str(), "{at}: wrong error code");
            if step.op != "load" {
                replay.checkout = back;
                let after = replay.checkout.as_ref().map(AnyCheckout::record);
                assert_eq!(before, after, "{at}: a refused step changed the checkout");
            }
            code.as_str().to_owned()
        }
        (Ok(c), Some(want)) => panic!("{at}: expected {want}, got {}", c.state()),
        (Err((_, code)), None) => panic!("{at}: expected {}, got {code}", step.expect),
    }
}

#[test]
fn every_checkout_trace_replays_as_recorded() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture_dir().join("checkout.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let (mut ops, mut reached) = (BTreeSet::new(), BTreeSet::new());
    let traces = load_traces();
    for (name, json) in &traces {
        let errors: Vec<String> = validator.iter_errors(json).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
        let trace = Trace::deserialize(json).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut replay = Replay {
            child: ChildId::generate(),
            other: ChildId::generate(),
            oids: BTreeMap::new(),
            checkout: None,
        };
        for (i, step) in trace.steps.iter().enumerate() {
            let at = format!("{name} step {} ({})", i + 1, step.op);
            reached.insert(check_step(&mut replay, step, &at));
            ops.insert(step.op.clone());
        }
    }
    assert!(traces.len() >= 5, "only {} checkout traces", traces.len());
    for state in CheckoutState::ALL {
        assert!(reached.contains(state.as_str()), "no trace reaches {state}");
    }
    let all_ops = [
        "prepare",
        "load",
        "start_run",
        "settle",
        "settle_unchanged",
        "apply",
        "discard",
        "remove",
    ];
    for op in all_ops {
        assert!(ops.contains(op), "no trace exercises {op}");
    }
    for code in ["invalid_request", "change_unavailable", "internal"] {
        assert!(reached.contains(code), "no trace is refused with {code}");
    }
}
