//! Random operation sequences on `AnyChild` keep the lifecycle invariants, and every
//! request gets exactly the outcome (or typed error) the rules predict.
//!
//! Invariants checked after every step: at most one active run and it is not queued;
//! queued runs exist only behind an active run; a refused request (a stale stop among
//! them) changes nothing; a run that reached a terminal status never becomes active or
//! queued again; event sequence numbers strictly increase; the child survives a
//! `record` → `load` round trip.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::testsuite::support::{storage_key, supervisor};
use std::collections::HashSet;

use proptest::prelude::*;
use proptest::sample::Index;
use subzero_core::events::{EventBody, EventLog, Retention};
use subzero_core::lifecycle::{AnyChild, Checkpoint, Failure, LeafRef, RunReport, Supervisor};
use subzero_core::{
    ChildId, ChildState, Coded, ErrorCode, EventSeq, Limits, RunId, RunStatus, Sha256Digest,
};

/// Which run an operation names.
#[derive(Clone, Debug)]
enum Target {
    Active,
    Queued(Index),
    Settled(Index),
    Fresh,
}

#[derive(Clone, Debug)]
enum Op {
    Followup,
    Steer(bool),
    Stop(Target),
    ConfirmStop(Target),
    Complete(Target),
    Fail(Target),
    LoseWorker,
    Resume { matching: bool, message: bool },
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => Just(Target::Active),
        1 => any::<Index>().prop_map(Target::Queued),
        1 => any::<Index>().prop_map(Target::Settled),
        1 => Just(Target::Fresh),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Followup),
        1 => any::<bool>().prop_map(Op::Steer),
        2 => target().prop_map(Op::Stop),
        2 => target().prop_map(Op::ConfirmStop),
        3 => target().prop_map(Op::Complete),
        1 => target().prop_map(Op::Fail),
        1 => Just(Op::LoseWorker),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(matching, message)| Op::Resume { matching, message }),
    ]
}

struct World {
    child: AnyChild,
    settled: Vec<RunId>,
    events: EventLog,
    last_seq: EventSeq,
    supervisor: &'static Supervisor,
    leaves: u32,
}

impl World {
    fn resolve(&self, target: &Target) -> RunId {
        let queued = self.child.queued();
        match target {
            Target::Active => self
                .child
                .active_run()
                .map_or_else(RunId::generate, |(r, _)| r),
            Target::Queued(i) if !queued.is_empty() => queued[i.index(queued.len())],
            Target::Settled(i) if !self.settled.is_empty() => {
                self.settled[i.index(self.settled.len())]
            }
            _ => RunId::generate(),
        }
    }

    /// The outcome the rules predict: `Ok(())` or the error code.
    fn predict(&self, op: &Op, named: Option<RunId>) -> Result<(), ErrorCode> {
        let active = self.child.active_run();
        let is_active = |r: Option<RunId>| active.is_some_and(|(a, _)| Some(a) == r);
        let stopping = active.is_some_and(|(_, s)| s == RunStatus::StopRequested);
        let queue_full = self.child.queued().len() >= self.child.queue_capacity() as usize;
        match (self.child.state(), op) {
            (ChildState::Interrupted, Op::Resume { matching: true, .. }) => Ok(()),
            (
                ChildState::Interrupted,
                Op::Resume {
                    matching: false, ..
                },
            ) => Err(ErrorCode::CheckpointIncompatible),
            (ChildState::Interrupted, _) => Err(ErrorCode::Interrupted),
            (ChildState::Ready, Op::Followup) => Ok(()),
            (ChildState::Ready, Op::Steer(_) | Op::LoseWorker) => Err(ErrorCode::NotRunning),
            (ChildState::Ready, Op::Resume { matching, .. }) => {
                if *matching {
                    Ok(())
                } else {
                    Err(ErrorCode::CheckpointIncompatible)
                }
            }
            (ChildState::Ready, _) => Err(ErrorCode::StaleRun),
            (ChildState::Running, Op::Followup) if queue_full => Err(ErrorCode::LimitExceeded),
            (ChildState::Running, Op::Followup | Op::LoseWorker) => Ok(()),
            (ChildState::Running, Op::Steer(_)) if stopping => Err(ErrorCode::NotRunning),
            (ChildState::Running, Op::Steer(true)) => Ok(()),
            (ChildState::Running, Op::Steer(false)) => Err(ErrorCode::UnsupportedSteer),
            (ChildState::Running, Op::Resume { .. }) => Err(ErrorCode::Busy),
            (ChildState::Running, Op::ConfirmStop(_)) if is_active(named) && !stopping => {
                Err(ErrorCode::InvalidRequest)
            }
            (
                ChildState::Running,
                Op::Stop(_) | Op::ConfirmStop(_) | Op::Complete(_) | Op::Fail(_),
            ) => {
                if is_active(named) {
                    Ok(())
                } else {
                    Err(ErrorCode::StaleRun)
                }
            }
        }
    }

    fn apply(&mut self, op: &Op, named: Option<RunId>) -> Result<(), ErrorCode> {
        let id = self.child.id();
        let coded = |e: subzero_core::LifecycleError| e.code();
        match op {
            Op::Followup => self
                .child
                .followup(RunId::generate(), "p".to_owned())
                .map(drop)
                .map_err(coded),
            Op::Steer(cap) => self
                .child
                .steer(&self.supervisor.capabilities(*cap))
                .map(drop)
                .map_err(coded),
            Op::Stop(_) => self.child.stop(named.unwrap()).map(drop).map_err(coded),
            Op::ConfirmStop(_) => {
                let proof = self.supervisor.confirm_stop(id, named.unwrap(), 0);
                self.child.confirm_stop(proof).map(drop).map_err(coded)
            }
            Op::Complete(_) => {
                self.leaves += 1;
                let digest = Sha256Digest::of(&self.leaves.to_le_bytes());
                let leaf = LeafRef::new(&format!("leaf-{}", self.leaves), digest).unwrap();
                let proof = self.supervisor.leaf_recorded(id, named.unwrap(), leaf);
                self.child
                    .settle(RunReport::Completed(proof))
                    .map(drop)
                    .map_err(coded)
            }
            Op::Fail(_) => {
                let failure = Failure {
                    code: ErrorCode::ModelRequestFailed,
                    message: "503".to_owned(),
                };
                let report = RunReport::Failed {
                    run: named.unwrap(),
                    failure,
                };
                self.child.settle(report).map(drop).map_err(coded)
            }
            Op::LoseWorker => self.child.lose_worker("lost").map(drop).map_err(coded),
            Op::Resume { matching, message } => {
                let checkpoint = if *matching {
                    // The transcript holds the recorded leaf, as the runtime reads it.
                    let observed = self
                        .child
                        .last_leaf()
                        .cloned()
                        .map(|leaf| self.supervisor.observed_leaf(id, leaf));
                    self.child.checkpoint(observed.as_ref()).unwrap()
                } else {
                    Checkpoint::verify(ChildId::generate(), None, None).unwrap()
                };
                let message = message.then(|| (RunId::generate(), "again".to_owned()));
                self.child
                    .resume(checkpoint, message)
                    .map(drop)
                    .map_err(coded)
            }
        }
    }

    fn remember_settled(&mut self, before: Option<(RunId, RunStatus)>, queued: &[RunId]) {
        let still: HashSet<RunId> = self
            .child
            .queued()
            .into_iter()
            .chain(self.child.active_run().map(|(r, _)| r))
            .collect();
        for run in before
            .map(|(r, _)| r)
            .into_iter()
            .chain(queued.iter().copied())
        {
            if !still.contains(&run) && !self.settled.contains(&run) {
                self.settled.push(run);
            }
        }
    }

    fn check_invariants(&self) {
        let queued = self.child.queued();
        let active = self.child.active_run();
        match self.child.state() {
            ChildState::Running => {
                let (a, status) = active.expect("a running child has an active run");
                assert!(status.is_active());
                assert!(!queued.contains(&a), "the active run is also queued");
            }
            _ => {
                assert!(active.is_none(), "only a running child has an active run");
                assert!(queued.is_empty(), "queued runs without an active run");
            }
        }
        let distinct: HashSet<_> = queued.iter().collect();
        assert_eq!(distinct.len(), queued.len(), "a run is queued twice");
        for run in queued.iter().chain(active.map(|(r, _)| r).iter()) {
            assert!(
                !self.settled.contains(run),
                "terminal run {run} came back to life"
            );
        }
        let record = self.child.record();
        assert_eq!(
            AnyChild::load(record.clone(), storage_key())
                .unwrap()
                .record(),
            record
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_operation_sequences_keep_the_invariants(
        capacity in 1u32..4,
        ops in proptest::collection::vec(op(), 1..48),
    ) {
        let child = AnyChild::spawn(ChildId::generate(), RunId::generate(), "start".to_owned(), capacity);
        let mut world = World {
            events: EventLog::new(child.id(), Retention { max_events: 8, max_bytes: u64::MAX }),
            child,
            settled: Vec::new(),
            last_seq: EventSeq::START,
            // SAFETY: test; the tokens stand for the worker reports the operations script.
            supervisor: supervisor(),
            leaves: 0,
        };
        let limits = Limits::default();
        for op in &ops {
            let named = match op {
                Op::Stop(t) | Op::ConfirmStop(t) | Op::Complete(t) | Op::Fail(t) => Some(world.resolve(t)),
                _ => None,
            };
            let expected = world.predict(op, named);
            let before = world.child.record();
            let active_before = world.child.active_run();
            let queued_before = world.child.queued();
            let outcome = world.apply(op, named);
            prop_assert_eq!(outcome, expected, "op {:?} in {:?}", op, before);
            match outcome {
                Err(_) => prop_assert_eq!(world.child.record(), before, "a refused {:?} changed the child", op),
                Ok(()) => {
                    world.remember_settled(active_before, &queued_before);
                    let run = world.child.active_run().map_or_else(RunId::generate, |(r, _)| r);
                    let seq = world.events.append(0, EventBody::RunStarted { run_id: run }, &limits).unwrap();
                    prop_assert!(seq > world.last_seq, "event seq did not increase");
                    world.last_seq = seq;
                    let page = world.events.read(EventSeq::START, 100).unwrap();
                    let seqs: Vec<_> = page.events.iter().map(|e| e.seq).collect();
                    prop_assert!(seqs.windows(2).all(|w| w[0] < w[1]));
                    prop_assert_eq!(page.gap.is_some(), seq.get() > 8);
                }
            }
            world.check_invariants();
        }
    }
}
