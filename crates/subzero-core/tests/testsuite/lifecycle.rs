//! The lifecycle rules, read like the spec, on the typed API and its value-level twin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::testsuite::support::{storage_key, supervisor};
use subzero_core::lifecycle::any::{RunRecord, WrongState};
use subzero_core::lifecycle::child::{Next, Ready};
use subzero_core::lifecycle::run::Completed;
use subzero_core::lifecycle::{ActiveChild, AnyChild, AnyRun, Checkpoint, Child, Failure, LeafRef};
use subzero_core::{
    BudgetName, BudgetReached, ChildId, ChildState, Coded, ErrorCode, RunId, RunStatus,
    Sha256Digest,
};

fn leaf(n: u8) -> LeafRef {
    LeafRef::new(&format!("leaf-{n}"), Sha256Digest::of(&[n])).unwrap()
}

#[test]
fn stop_with_a_stale_run_id_changes_nothing() {
    let child = Child::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let (child, _) = child.followup(RunId::generate(), "q".into()).unwrap();
    let active = child.active_run().id();
    let stale = RunId::generate();
    let (child, err) = child.stop(stale).unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    assert_eq!(child.active_run().id(), active);
    assert_eq!(child.queue().len(), 1);
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "stale_run: run {stale} is not the active run of child {}",
            child.id()
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "(active: {active}); read subzero_get and retry with that id"
        )),
        "{message}"
    );
}

#[test]
fn a_matching_stop_clears_the_queue_and_waits_for_the_supervisor() {
    let supervisor = supervisor();
    let child = Child::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let (child, _) = child.followup(RunId::generate(), "q".into()).unwrap();
    let run = child.active_run().id();
    let accepted = child.stop(run).unwrap();
    assert_eq!(accepted.withdrawn.len(), 1);
    assert_eq!(accepted.withdrawn[0].status(), RunStatus::Stopped);
    assert_eq!(accepted.withdrawn[0].reaped(), None);
    let stopping = accepted.child;
    assert_eq!(stopping.active_run().status(), RunStatus::StopRequested);
    let wrong = supervisor.confirm_stop(stopping.id(), RunId::generate(), 0);
    let (stopping, err) = stopping.confirm_stop(wrong).unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    let proof = supervisor.confirm_stop(stopping.id(), run, 3);
    let settled = stopping.confirm_stop(proof).unwrap();
    assert_eq!(settled.outcome.reaped(), Some(3));
    assert!(matches!(settled.next, Next::Idle(_)));
}

#[test]
fn the_next_queued_run_starts_only_after_the_leaf_is_recorded() {
    let supervisor = supervisor();
    let child = Child::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let first = child.active_run().id();
    let second = RunId::generate();
    let (child, position) = child.followup(second, "q".into()).unwrap();
    assert_eq!(position, 1);
    let proof = supervisor.leaf_recorded(child.id(), first, leaf(1));
    let settled = child.complete(proof).unwrap();
    let Next::Started(child) = settled.next else {
        panic!("the queued run should have started")
    };
    assert_eq!(child.active_run().id(), second);
    assert_eq!(child.last_leaf(), Some(&leaf(1)));
}

#[test]
fn steer_without_the_capability_is_unsupported_and_queues_nothing() {
    let supervisor = supervisor();
    let mut child = AnyChild::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let err = child.steer(&supervisor.capabilities(false)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnsupportedSteer);
    assert!(err.to_string().contains("send mode \"followup\""), "{err}");
    assert!(child.queued().is_empty());
    let run = child.steer(&supervisor.capabilities(true)).unwrap();
    assert_eq!(child.active_run().map(|(r, _)| r), Some(run));
    child.stop(run).unwrap();
    let err = child.steer(&supervisor.capabilities(true)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotRunning);
}

#[test]
fn steer_on_a_stopping_child_is_not_running_and_changes_nothing() {
    let supervisor = supervisor();
    let mut child = AnyChild::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let (run, _) = child.active_run().unwrap();
    child.stop(run).unwrap();
    child.followup(RunId::generate(), "q".into()).unwrap();
    let before = child.record();
    let expected = format!(
        "not_running: steer needs a running run, but child {} is running (run {run} is \
         stopping); wait for the stop to be confirmed, then send mode \"followup\"",
        child.id()
    );
    // Whether or not the worker advertises steering: a stopping run is not steered.
    for advertised in [true, false] {
        let err = child
            .steer(&supervisor.capabilities(advertised))
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotRunning);
        assert_eq!(err.to_string(), expected);
        assert_eq!(child.record(), before);
    }
    // Loaded from storage, as the broker meets it.
    let loaded = AnyChild::load(before, storage_key()).unwrap();
    assert!(matches!(loaded, AnyChild::Active(ActiveChild::Stopping(_))));
    let err = loaded.steer(&supervisor.capabilities(true)).unwrap_err();
    assert_eq!(err.to_string(), expected);
}

#[test]
fn a_lost_worker_interrupts_and_only_a_verified_checkpoint_resumes() {
    let supervisor = supervisor();
    let child = Child::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let first = child.active_run().id();
    let proof = supervisor.leaf_recorded(child.id(), first, leaf(1));
    let settled = child.complete(proof).unwrap();
    let Next::Idle(ready) = settled.next else {
        panic!("nothing was queued")
    };
    let lost = ready
        .followup(RunId::generate(), "q".into())
        .lose_worker("exit 137");
    let interrupted = lost.child;
    assert_eq!(lost.run.status(), RunStatus::Interrupted);
    assert_eq!(interrupted.reason(), "exit 137");

    let id = interrupted.id();
    let err = interrupted.checkpoint(None).unwrap_err();
    assert_eq!(err.code(), ErrorCode::CheckpointIncompatible);
    let other_leaf = supervisor.observed_leaf(id, leaf(2));
    let err = interrupted.checkpoint(Some(&other_leaf)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::CheckpointIncompatible);
    let other_transcript = supervisor.observed_leaf(ChildId::generate(), leaf(1));
    let err = interrupted.checkpoint(Some(&other_transcript)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::CheckpointIncompatible);
    assert!(err.to_string().contains("transcript of child"), "{err}");
    let foreign = Checkpoint::verify(ChildId::generate(), None, None).unwrap();
    let (interrupted, err) = interrupted.resume(foreign).unwrap_err();
    assert_eq!(err.code(), ErrorCode::CheckpointIncompatible);

    let observed = supervisor.observed_leaf(id, leaf(1));
    let checkpoint = interrupted.checkpoint(Some(&observed)).unwrap();
    assert_eq!(checkpoint.leaf(), Some(&leaf(1)));
    let ready: Child<Ready> = interrupted.resume(checkpoint).unwrap();
    assert_eq!(ready.state(), ChildState::Ready);
}

#[test]
fn going_up_from_the_wrong_state_gives_the_value_back() {
    let any = AnyChild::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let id = any.id();
    let WrongState {
        value,
        expected,
        found,
    } = Child::<Ready>::try_from(any).unwrap_err();
    assert_eq!((expected, found), ("ready child", "running child"));
    assert_eq!(value.id(), id);
}

#[test]
fn runs_load_from_records_and_refuse_inconsistent_ones() {
    let base = RunRecord {
        id: RunId::generate(),
        child: ChildId::generate(),
        status: RunStatus::Completed,
        prompt: None,
        leaf: Some(leaf(1)),
        budget: None,
        failure: None,
        reaped: None,
        reason: None,
    };
    let run = AnyRun::load(base.clone(), storage_key()).unwrap();
    assert!(run.is_terminal());
    assert_eq!(run.record(), base);
    let completed = Completed::try_from(run).unwrap();
    assert_eq!(completed.leaf(), &leaf(1));

    let no_leaf = RunRecord {
        leaf: None,
        ..base.clone()
    };
    assert_eq!(
        AnyRun::load(no_leaf, storage_key()).unwrap_err().code(),
        ErrorCode::Internal
    );
    let failed_with_leaf = RunRecord {
        status: RunStatus::Failed,
        failure: Some(Failure {
            code: ErrorCode::Internal,
            message: "x".into(),
        }),
        ..base.clone()
    };
    assert_eq!(
        AnyRun::load(failed_with_leaf, storage_key())
            .unwrap_err()
            .code(),
        ErrorCode::Internal
    );
    let queued_without_prompt = RunRecord {
        status: RunStatus::Queued,
        leaf: None,
        ..base
    };
    assert_eq!(
        AnyRun::load(queued_without_prompt, storage_key())
            .unwrap_err()
            .code(),
        ErrorCode::Internal
    );
}

#[test]
fn a_run_that_reached_a_budget_is_completed_with_its_budget_and_the_queue_goes_on() {
    let supervisor = supervisor();
    let child = Child::spawn(ChildId::generate(), RunId::generate(), "p".into(), 4);
    let first = child.active_run().id();
    let second = RunId::generate();
    let (child, _) = child.followup(second, "q".into()).unwrap();
    let reached = BudgetReached {
        budget: BudgetName::MaxTurns,
        limit: 3,
        reached: 3,
    };
    let stale = supervisor.leaf_recorded(child.id(), RunId::generate(), leaf(2));
    let (child, err) = child.exhaust(stale, reached).unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    let proof = supervisor.leaf_recorded(child.id(), first, leaf(2));
    let settled = child.exhaust(proof, reached).unwrap();
    assert_eq!(settled.outcome.status(), RunStatus::BudgetExhausted);
    assert_eq!(settled.outcome.budget(), Some(&reached));
    assert!(settled.outcome.status().is_terminal());
    let Next::Started(child) = settled.next else {
        panic!("the queued run should have started, as after a completion")
    };
    assert_eq!(child.active_run().id(), second);
    assert_eq!(child.last_leaf(), Some(&leaf(2)));
}

#[test]
fn a_budget_exhausted_record_needs_its_leaf_and_its_budget() {
    let reached = BudgetReached {
        budget: BudgetName::TokenBudget,
        limit: 100,
        reached: 120,
    };
    let exhausted = RunRecord {
        id: RunId::generate(),
        child: ChildId::generate(),
        status: RunStatus::BudgetExhausted,
        prompt: None,
        leaf: Some(leaf(1)),
        budget: Some(reached),
        failure: None,
        reaped: None,
        reason: None,
    };
    let run = AnyRun::load(exhausted.clone(), storage_key()).unwrap();
    assert_eq!(run.status(), RunStatus::BudgetExhausted);
    assert_eq!(run.record(), exhausted);
    for broken in [
        RunRecord {
            budget: None,
            ..exhausted.clone()
        },
        RunRecord {
            leaf: None,
            ..exhausted.clone()
        },
        RunRecord {
            status: RunStatus::Completed,
            ..exhausted.clone()
        },
    ] {
        assert_eq!(
            AnyRun::load(broken, storage_key()).unwrap_err().code(),
            ErrorCode::Internal
        );
    }
}

#[test]
fn every_lifecycle_error_starts_with_its_code() {
    let mut child = AnyChild::spawn(ChildId::generate(), RunId::generate(), "p".into(), 1);
    let mut errors = Vec::new();
    errors.push(child.stop(RunId::generate()).unwrap_err());
    errors.push(child.steer(&supervisor().capabilities(false)).unwrap_err());
    child.followup(RunId::generate(), "q".into()).unwrap();
    errors.push(child.followup(RunId::generate(), "r".into()).unwrap_err());
    child.lose_worker("gone").unwrap();
    errors.push(child.followup(RunId::generate(), "s".into()).unwrap_err());
    for err in errors {
        let text = err.to_string();
        assert!(
            text.starts_with(err.code().as_str()),
            "message does not start with its code: {text}"
        );
    }
}
