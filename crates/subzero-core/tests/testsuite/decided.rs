//! Decided values, read like the spec: every request on a stored child returns the whole
//! change — the child after, its custody and phase, each run move — and nothing else can
//! describe one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::testsuite::support::storage_key as key;
use crate::testsuite::support::supervisor;
use subzero_core::lifecycle::{
    ActiveRunRecord, ChildRecord, CustodyRecord, Decided, Failure, LeafRef, Loaded,
    LockObservation, NamedRun, QueuedRunRecord, Recovered, RunEnding, StoredChild,
};
use subzero_core::{
    ChildId, ChildState, Coded, ErrorCode, Ownership, Phase, RunId, RunStatus, Sha256Digest,
};

const OWNER: &str = "bk_A";

/// A stored running child held by `OWNER`, its active run `run` (in `status`) and
/// `queued` behind it.
fn running(run: RunId, status: RunStatus, queued: &[RunId]) -> Loaded {
    let id = ChildId::generate();
    let record = ChildRecord {
        id,
        state: ChildState::Running,
        active_run: Some(ActiveRunRecord { id: run, status }),
        queued: queued
            .iter()
            .map(|q| QueuedRunRecord {
                id: *q,
                prompt: "next".into(),
            })
            .collect(),
        last_leaf: None,
        interrupted_run: None,
        interruption_reason: None,
        queue_capacity: 4,
    };
    load(record, Ownership::Owned, Phase::Model)
}

fn ready() -> Loaded {
    let record = ChildRecord {
        id: ChildId::generate(),
        state: ChildState::Ready,
        active_run: None,
        queued: Vec::new(),
        last_leaf: None,
        interrupted_run: None,
        interruption_reason: None,
        queue_capacity: 4,
    };
    load(record, Ownership::None, Phase::Idle)
}

fn load(record: ChildRecord, ownership: Ownership, phase: Phase) -> Loaded {
    let stored = StoredChild {
        record,
        custody: CustodyRecord {
            ownership,
            owner: (ownership != Ownership::None).then(|| OWNER.to_owned()),
            generation: 3,
        },
        phase,
        version: 7,
    };
    Loaded::load(stored, key()).unwrap()
}

fn moves<T>(decided: &Decided<T>) -> Vec<(RunId, RunStatus, RunStatus)> {
    decided
        .moves()
        .iter()
        .map(|m| (m.run(), m.from(), m.to()))
        .collect()
}

#[test]
fn a_stop_decides_the_active_run_stop_requested_and_withdraws_the_queue() {
    let (run, q) = (RunId::generate(), RunId::generate());
    let loaded = running(run, RunStatus::Running, &[q]);
    let origin = loaded.origin();
    let decided = loaded.stop(run, NamedRun::OfThisChild, OWNER).unwrap();
    assert!(decided.changes());
    assert_eq!(decided.origin(), Some(origin));
    assert_eq!(origin.version(), 7);
    assert_eq!(decided.phase(), Phase::Stopping);
    assert_eq!(decided.custody().owner(), Some(OWNER));
    assert_eq!(
        moves(&decided),
        vec![
            (run, RunStatus::Running, RunStatus::StopRequested),
            (q, RunStatus::Queued, RunStatus::Stopped)
        ]
    );
    assert_eq!(decided.outcome().withdrawn, vec![q]);
}

#[test]
fn a_repeated_stop_changes_nothing_and_only_the_holder_may_stop() {
    let run = RunId::generate();
    let decided = running(run, RunStatus::StopRequested, &[])
        .stop(run, NamedRun::OfThisChild, OWNER)
        .unwrap();
    assert!(!decided.changes());
    assert!(!decided.outcome().newly_requested);
    let err = running(run, RunStatus::Running, &[])
        .stop(run, NamedRun::OfThisChild, "bk_B")
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy);
}

#[test]
fn a_stop_on_a_ready_child_is_not_running_for_its_own_run_and_stale_otherwise() {
    let run = RunId::generate();
    let ended = ready().stop(run, NamedRun::OfThisChild, OWNER).unwrap_err();
    assert_eq!(ended.code(), ErrorCode::NotRunning);
    let unknown = ready().stop(run, NamedRun::Unknown, OWNER).unwrap_err();
    assert_eq!(unknown.code(), ErrorCode::StaleRun);
}

#[test]
fn a_completion_moves_the_run_and_starts_the_next_under_the_same_holder() {
    let (run, next) = (RunId::generate(), RunId::generate());
    let loaded = running(run, RunStatus::Running, &[next]);
    let leaf = LeafRef::new("leaf-1", Sha256Digest::of(b"t")).unwrap();
    let proof = supervisor().leaf_recorded(loaded.child().id(), run, leaf);
    let decided = loaded.settle(RunEnding::Completed(proof), OWNER).unwrap();
    assert_eq!(
        moves(&decided),
        vec![
            (run, RunStatus::Running, RunStatus::Completed),
            (next, RunStatus::Queued, RunStatus::Running)
        ]
    );
    assert_eq!(decided.outcome().started, Some(next));
    assert_eq!(decided.custody().ownership(), Ownership::Owned);
    assert_eq!(decided.phase(), Phase::Starting);
    assert!(decided.child().last_leaf().is_some());
}

#[test]
fn a_failure_withdraws_the_queue_and_frees_the_child() {
    let (run, q) = (RunId::generate(), RunId::generate());
    let failure = Failure {
        code: ErrorCode::ModelRequestFailed,
        message: "503".into(),
    };
    let decided = running(run, RunStatus::Running, &[q])
        .settle(RunEnding::Failed { run, failure }, OWNER)
        .unwrap();
    assert_eq!(
        moves(&decided),
        vec![
            (run, RunStatus::Running, RunStatus::Failed),
            (q, RunStatus::Queued, RunStatus::Stopped)
        ]
    );
    assert_eq!(decided.child().state(), ChildState::Ready);
    assert_eq!(decided.custody().state(), ChildState::Ready);
    assert_eq!(decided.custody().ownership(), Ownership::None);
    assert_eq!(decided.phase(), Phase::Idle);
}

#[test]
fn a_lost_worker_whose_tree_may_live_leaves_the_child_recovery_required() {
    let run = RunId::generate();
    let lost = RunEnding::Lost {
        run,
        reason: "exited".into(),
        tree_gone: false,
    };
    let decided = running(run, RunStatus::StopRequested, &[])
        .settle(lost, OWNER)
        .unwrap();
    assert_eq!(
        moves(&decided),
        vec![(run, RunStatus::StopRequested, RunStatus::Interrupted)]
    );
    assert_eq!(decided.custody().ownership(), Ownership::RecoveryRequired);
    assert_eq!(decided.phase(), Phase::RecoveryRequired);
    let other = RunEnding::Lost {
        run: RunId::generate(),
        reason: "exited".into(),
        tree_gone: true,
    };
    let err = running(run, RunStatus::Running, &[])
        .settle(other, OWNER)
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
}

#[test]
fn a_followup_queues_for_any_holder_and_starts_only_for_the_owner() {
    let run = RunId::generate();
    let queued = running(run, RunStatus::Running, &[])
        .followup(RunId::generate(), "more".into(), "bk_B")
        .unwrap();
    assert_eq!(
        queued.phase(),
        Phase::Model,
        "a queued follow-up keeps the phase"
    );
    assert_eq!(
        queued.admitted().map(|a| a.status()),
        Some(RunStatus::Queued)
    );
    let err = ready()
        .followup(RunId::generate(), "go".into(), OWNER)
        .unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::Busy,
        "a ready child must be claimed first"
    );
    let claimed = ready().claim(OWNER).unwrap();
    assert_eq!(claimed.custody().generation(), 4);
    assert!(moves(&claimed).is_empty());
}

#[test]
fn a_spawn_is_a_new_child_held_by_its_spawner_with_its_first_run() {
    let (child, run) = (ChildId::generate(), RunId::generate());
    let decided = Decided::spawn(child, run, "go".into(), 4, OWNER);
    assert_eq!(decided.origin(), None);
    assert_eq!(decided.custody().generation(), 1);
    assert_eq!(decided.phase(), Phase::Starting);
    let admitted = decided.admitted().unwrap();
    assert_eq!(
        (admitted.run(), admitted.status()),
        (run, RunStatus::Running)
    );
}

#[test]
fn recovery_interrupts_an_orphaned_run_and_a_held_lock_marked_twice_changes_nothing() {
    let (run, q) = (RunId::generate(), RunId::generate());
    let decided = running(run, RunStatus::Running, &[q])
        .recover(3, LockObservation::Free, "broker_lost")
        .unwrap();
    assert_eq!(
        decided.outcome(),
        &Recovered::Interrupted {
            run,
            abandoned: vec![q]
        }
    );
    assert_eq!(
        moves(&decided),
        vec![
            (run, RunStatus::Running, RunStatus::Interrupted),
            (q, RunStatus::Queued, RunStatus::Interrupted)
        ]
    );
    let held = running(run, RunStatus::Running, &[])
        .recover(3, LockObservation::Held, "held")
        .unwrap();
    assert!(held.changes());
    let marked = held.child().record();
    let again = load(marked, Ownership::RecoveryRequired, Phase::RecoveryRequired)
        .recover(3, LockObservation::Held, "held")
        .unwrap();
    assert!(!again.changes(), "already marked: nothing to write");
    assert_eq!(again.outcome(), &Recovered::Held);
    let stale = running(run, RunStatus::Running, &[])
        .recover(2, LockObservation::Free, "gone")
        .unwrap();
    assert!(!stale.changes());
    assert_eq!(stale.outcome(), &Recovered::Unchanged);
}
