//! Turning a schedule's calls into MCP calls and their answers into the ledger.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use subzero_protocol::{
    ApplyOutput, ArtifactChunk, CheckoutState, ChildSnapshot, ErrorCode, Info, ListOutput,
    ResumeOutput, SendOutput, SpawnOutput, StopOutput,
};

use crate::args;
use crate::ledger::Ledger;
use crate::schedule::{Action, Invalid, Landing, Op, Schedule};
use crate::stats::Stats;
use crate::verdict::{Invariant, Verdicts};
use crate::world::{Answer, World};

/// How long past its own `waitMs` a call may take before it counts as unanswered.
const ANSWER_BOUND: Duration = Duration::from_secs(60);

/// Everything one soak run shares.
#[derive(Debug)]
pub struct Ctx {
    pub world: Arc<World>,
    pub schedule: Schedule,
    pub ledger: Mutex<Ledger>,
    pub verdicts: Arc<Verdicts>,
    pub stats: Mutex<Stats>,
    /// Steps started so far.
    pub step: Arc<AtomicUsize>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Ctx {
    pub fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    pub fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    pub fn now(&self) -> usize {
        self.step.load(Ordering::SeqCst)
    }

    pub fn violation(&self, invariant: Invariant, detail: impl Into<String>) {
        self.verdicts.add(invariant, self.now(), detail);
    }

    /// One call, counted in the stats; answers outside the contract are violations.
    pub async fn call(&self, broker: usize, tool: &str, args: Value, wait_ms: u64) -> Answer {
        let limit = Duration::from_millis(wait_ms) + ANSWER_BOUND;
        let answer = self.world.call(broker, tool, args.clone(), limit).await;
        let outcome = match &answer {
            Answer::Ok(_) => "ok".to_owned(),
            Answer::Refused(code, _) => code.to_string(),
            Answer::Broken(_) => "broken".to_owned(),
            Answer::Lost => "lost (broker killed)".to_owned(),
            Answer::Unanswered => "unanswered".to_owned(),
        };
        self.stats().call(tool, &outcome);
        match &answer {
            Answer::Refused(ErrorCode::Internal, message) => self.violation(
                Invariant::TypedAnswers,
                format!("{tool} answered `internal`: {message} (arguments {args})"),
            ),
            Answer::Broken(detail) => self.violation(Invariant::TypedAnswers, detail.clone()),
            Answer::Unanswered => self.violation(
                Invariant::TypedAnswers,
                format!("{tool} was not answered within {limit:?} (arguments {args})"),
            ),
            _ => {}
        }
        answer
    }

    /// The ok answer read as the tool's output type; anything else is a violation.
    pub fn parse<T: DeserializeOwned>(&self, tool: &str, value: &Value) -> Option<T> {
        match serde_json::from_value(value.clone()) {
            Ok(typed) => Some(typed),
            Err(e) => {
                self.violation(
                    Invariant::TypedAnswers,
                    format!("{tool} answered something that is not its output type ({e}): {value}"),
                );
                None
            }
        }
    }

    /// Runs the call of step `index`.
    pub async fn run_call(&self, index: usize, broker: usize, op: &Op) {
        match op {
            Op::Retry { of } => self.retry(index, broker, *of).await,
            Op::Invalid(invalid) => self.invalid(broker, *invalid).await,
            Op::Apply { how, race, .. } => self.apply(index, broker, op, *how, *race).await,
            _ => {
                let (tool, args, wait_ms) = self.arguments(op);
                if has_request_id(&args) {
                    self.ledger().record_sent(index, tool, &args);
                }
                let answer = self.call(broker, tool, args.clone(), wait_ms).await;
                self.note_cut(op, &answer);
                self.absorb(index, op, &args, &answer);
            }
        }
    }

    /// The tool, arguments and `waitMs` of a call, with children resolved now.
    fn arguments(&self, op: &Op) -> (&'static str, Value, u64) {
        args::arguments(op, &self.ledger(), self.world.model_ref())
    }

    /// Records what an answer says; checks that it is the tool's output type.
    fn absorb(&self, index: usize, op: &Op, args: &Value, answer: &Answer) {
        let Answer::Ok(value) = answer else {
            return;
        };
        let tool = op.tool();
        if has_request_id(args)
            && let Some(detail) = self.ledger().record_receipt(index, value)
        {
            self.violation(Invariant::IdempotentRetries, detail);
        }
        let child = args["childId"].as_str().unwrap_or_default().to_owned();
        match op {
            Op::Spawn {
                slot,
                plan,
                isolated,
                ..
            } => {
                if let Some(out) = self.parse::<SpawnOutput>(tool, value) {
                    if out.checkout.is_some() != *isolated {
                        self.violation(
                            Invariant::TypedAnswers,
                            format!(
                                "a spawn {} isolation answered {} checkout: {value}",
                                if *isolated { "with" } else { "without" },
                                if out.checkout.is_some() { "a" } else { "no" }
                            ),
                        );
                    }
                    self.ledger()
                        .record_spawn(*slot, &out.child_id, &out.run_id, plan);
                }
            }
            Op::Followup { plan, .. } => {
                if let Some(out) = self.parse::<SendOutput>(tool, value) {
                    self.ledger().record_run(&child, &out.run_id, Some(plan));
                }
            }
            Op::Steer { .. } => {
                self.parse::<SendOutput>(tool, value);
            }
            Op::Stop { .. } => {
                if let Some(out) = self.parse::<StopOutput>(tool, value)
                    && out.confirmed
                {
                    self.tree_gone(&out.run_id);
                }
            }
            Op::Resume { plan, .. } => {
                if let Some(out) = self.parse::<ResumeOutput>(tool, value)
                    && let Some(run) = &out.run_id
                {
                    self.ledger().record_run(&child, run, plan.as_ref());
                }
            }
            Op::Get { .. } => {
                if let Some(snapshot) = self.parse::<ChildSnapshot>(tool, value) {
                    self.observe(args["cursor"].as_u64().unwrap_or(0), &snapshot);
                }
            }
            Op::List { .. } => {
                self.parse::<ListOutput>(tool, value);
            }
            Op::Output { .. } => {
                self.parse::<ArtifactChunk>(tool, value);
            }
            Op::Info => {
                self.parse::<Info>(tool, value);
            }
            Op::Apply { .. } | Op::Invalid(_) | Op::Retry { .. } => {}
        }
    }

    /// Records a snapshot in the ledger; what it breaks is a violation.
    pub fn observe(&self, requested: u64, snapshot: &ChildSnapshot) {
        let (found, ended) = self.ledger().observe_snapshot(requested, snapshot);
        for v in found {
            self.violation(v.invariant, v.detail);
        }
        for run in ended {
            self.tree_gone(&run);
        }
    }

    /// A run reported ended has no tool process left: its worker kills the run's tree
    /// before it reports the end (and a stop is recorded only after that confirmation).
    pub fn tree_gone(&self, run: &str) {
        let Some(tag) = self.ledger().tag_of(run) else {
            return;
        };
        let left: Vec<u32> = crate::kernel::tagged(&self.world.root)
            .into_iter()
            .filter(|(_, t)| *t == tag)
            .map(|(pid, _)| pid)
            .collect();
        if !left.is_empty() {
            self.violation(
                Invariant::NoLeftoverProcess,
                format!(
                    "run {run} ({tag}) is reported ended, yet its tool processes {left:?} still run"
                ),
            );
        }
    }

    /// The call of step `of`, sent again with the same arguments.
    async fn retry(&self, index: usize, broker: usize, of: usize) {
        let Some((tool, args)) = self.ledger().sent(of) else {
            self.stats()
                .call("retry", "skipped (the first call was never sent)");
            return;
        };
        let answer = self.call(broker, &tool, args.clone(), 0).await;
        let Some(Action::Call { op, .. }) = self.schedule.step(of).map(|s| &s.action) else {
            return;
        };
        let _ = index;
        self.note_cut(op, &answer);
        self.absorb(of, op, &args, &answer);
    }

    /// An isolated spawn cut by a broker kill may leave a checkout directory behind whose
    /// child was never stored (`subzero doctor` reports it): the ledger counts them.
    fn note_cut(&self, op: &Op, answer: &Answer) {
        if matches!(op, Op::Spawn { isolated: true, .. }) && matches!(answer, Answer::Lost) {
            self.ledger().note_cut_isolated_spawn();
        }
    }

    /// `subzero_apply` of a child, once or raced from two brokers at the same moment. At
    /// most one apply of a child ever succeeds; a refusal is one `subzero_apply` documents.
    async fn apply(&self, index: usize, broker: usize, op: &Op, how: Landing, race: bool) {
        let (tool, args, _) = self.arguments(op);
        let answers = if race {
            let other = (broker + 1) % self.world.broker_count();
            let (a, b) = tokio::join!(
                self.call(broker, tool, args.clone(), 0),
                self.call(other, tool, args.clone(), 0)
            );
            vec![a, b]
        } else {
            vec![self.call(broker, tool, args.clone(), 0).await]
        };
        let child = args["childId"].as_str().unwrap_or_default().to_owned();
        for answer in answers {
            match answer {
                Answer::Ok(value) => self.applied(index, &child, how, &value).await,
                Answer::Refused(code, message) => {
                    self.ledger().note_apply_refused(&child, &code.to_string());
                    if !args::APPLY_REFUSALS.contains(&code) && code != ErrorCode::Internal {
                        self.violation(
                            Invariant::TypedAnswers,
                            format!("{tool} refused with `{code}`, which it does not document ({message}; arguments {args})"),
                        );
                    }
                }
                Answer::Lost => self.ledger().note_apply_cut(&child),
                Answer::Broken(_) | Answer::Unanswered => {}
            }
        }
    }

    /// A successful apply: its answer says what was asked (applied, or discarded/removed),
    /// names a commit only when one was asked for, and is the child's first success.
    async fn applied(&self, index: usize, child: &str, how: Landing, value: &Value) {
        let Some(out) = self.parse::<ApplyOutput>("subzero_apply", value) else {
            return;
        };
        let expected: &[CheckoutState] = match how {
            Landing::Edits | Landing::Commit => &[CheckoutState::Applied],
            Landing::Discard => &[CheckoutState::Discarded, CheckoutState::Removed],
        };
        if !expected.contains(&out.state) || (how != Landing::Commit && out.commit.is_some()) {
            self.violation(
                Invariant::TypedAnswers,
                format!("subzero_apply ({how:?}) of child {child} answered {value}"),
            );
        }
        if let Some(commit) = &out.commit {
            let workspace = self.world.workspace.clone();
            let commit = commit.to_string();
            let message = tokio::task::spawn_blocking(move || {
                crate::repo::commit_message(&workspace, &commit)
            })
            .await
            .ok()
            .flatten();
            if message.as_deref() != Some(args::commit_message(child).as_str()) {
                self.violation(
                    Invariant::ChangesLandOnce,
                    format!(
                        "subzero_apply of child {child} named commit {} whose message in the workspace is {message:?}",
                        out.commit.as_ref().map(|c| c.to_string()).unwrap_or_default()
                    ),
                );
            }
        }
        let detail = self
            .ledger()
            .record_apply(child, index, &out.state.to_string());
        if let Some(detail) = detail {
            self.violation(Invariant::ChangesLandOnce, detail);
        }
    }

    /// A call the broker must refuse, with the codes it may refuse it with.
    async fn invalid(&self, broker: usize, invalid: Invalid) {
        let (args, expected) = self.invalid_arguments(invalid);
        let tool = invalid.tool();
        let answer = self.call(broker, tool, args.clone(), 0).await;
        match answer {
            Answer::Ok(value) => self.violation(
                Invariant::TypedAnswers,
                format!("{tool} accepted an invalid call ({invalid:?}, arguments {args}): {value}"),
            ),
            Answer::Refused(code, message)
                if !expected.contains(&code)
                    && !matches!(
                        code,
                        ErrorCode::StorageUnavailable | ErrorCode::RuntimeShuttingDown
                    ) =>
            {
                self.violation(
                    Invariant::TypedAnswers,
                    format!(
                        "{tool} refused {invalid:?} with `{code}` ({message}); expected one of {expected:?}"
                    ),
                )
            }
            _ => {}
        }
    }

    fn invalid_arguments(&self, invalid: Invalid) -> (Value, Vec<ErrorCode>) {
        let some_child = self
            .ledger()
            .children()
            .first()
            .cloned()
            .unwrap_or_else(|| crate::ledger::UNKNOWN_CHILD.to_owned());
        args::invalid(invalid, self.world.model_ref(), &some_child)
    }
}

fn has_request_id(args: &Value) -> bool {
    args.get("requestId").is_some()
}
