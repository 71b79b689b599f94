//! The store's transitions are decided by the core lifecycle: an illegal request is
//! the core's typed error (as the runtime's stable code) and changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::testsuite::common::{Fixture, TOKEN, model, stopped};
use subzero_core::{ChildId, ChildState, ErrorCode, RunId, RunStatus};
use subzero_runtime::store::{AdmitFollowup, LockObservation, Phase, Settlement, StoreOptions};

/// Everything a refused request must leave as it was: the child row, every run and
/// the queue (the event sequence is part of the row).
async fn state_of(fx: &Fixture, child: ChildId) -> String {
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    let queue = fx.store.queued_runs(&fx.scope, child).await.unwrap();
    format!("{row:?}\n{runs:?}\n{queue:?}")
}

fn followup(child: ChildId, prompt: &str) -> AdmitFollowup {
    AdmitFollowup {
        child_id: child,
        run_id: RunId::generate(),
        prompt: prompt.to_owned(),
        owner_token: TOKEN.to_owned(),
        receipt: None,
    }
}

fn completed(child: ChildId, run: RunId) -> Settlement {
    Settlement::Completed {
        preview: "done".to_owned(),
        preview_truncated: false,
        artifact: crate::testsuite::common::result_artifact(),
        leaf: crate::testsuite::common::leaf(child, run, "leaf-1"),
        budget: None,
    }
}

/// A child whose worker was lost: `interrupted`, nothing owned.
async fn interrupted_child(fx: &Fixture) -> (ChildId, RunId) {
    let (child, run) = fx.spawn_child().await;
    fx.store
        .recover_child(child, 1, LockObservation::Free, "owner gone")
        .await
        .unwrap();
    (child, run)
}

#[tokio::test]
async fn stop_with_a_stale_run_id_is_stale_run_and_leaves_run_and_queue_untouched() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.queue_followup(child, "later").await;
    let before = state_of(&fx, child).await;
    let stale = RunId::generate();
    let err = fx
        .store
        .begin_stop(&fx.scope, child, stale, TOKEN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    let text = err.to_string();
    assert!(text.contains(&stale.to_string()) && text.contains(&run.to_string()));
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn followup_on_an_interrupted_child_is_interrupted_and_queues_nothing() {
    let fx = Fixture::new();
    let (child, _) = interrupted_child(&fx).await;
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .admit_followup(&fx.scope, followup(child, "more"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Interrupted);
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn stop_on_an_interrupted_child_is_interrupted() {
    let fx = Fixture::new();
    let (child, run) = interrupted_child(&fx).await;
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Interrupted);
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn a_stop_confirmation_for_a_run_that_is_not_stop_requested_changes_nothing() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.queue_followup(child, "later").await;
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .settle_run(child, run, TOKEN, stopped(child, run, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert!(
        err.to_string().contains("has no stop request to confirm"),
        "{err}"
    );
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn a_stop_confirmation_for_another_run_is_stale_and_keeps_the_stop_pending() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap();
    let before = state_of(&fx, child).await;
    let other = RunId::generate();
    let err = fx
        .store
        .settle_run(child, other, TOKEN, stopped(child, other, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    assert_eq!(state_of(&fx, child).await, before);
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::StopRequested);
}

#[tokio::test]
async fn a_proof_about_another_run_is_refused() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .settle_run(child, run, TOKEN, completed(child, RunId::generate()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    let err = fx
        .store
        .settle_run(child, run, TOKEN, stopped(child, RunId::generate(), 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn a_second_completion_of_a_settled_run_is_stale_run() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.store
        .settle_run(child, run, TOKEN, completed(child, run))
        .await
        .unwrap();
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .settle_run(child, run, TOKEN, completed(child, run))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn a_full_queue_is_limit_exceeded_and_queues_nothing() {
    let fx = Fixture::with_options(StoreOptions {
        queued_followups: 2,
        ..StoreOptions::default()
    });
    let (child, _) = fx.spawn_child().await;
    fx.queue_followup(child, "a").await;
    fx.queue_followup(child, "b").await;
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .admit_followup(&fx.scope, followup(child, "c"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::LimitExceeded);
    assert!(
        !err.to_string().contains("limit_exceeded: limit_exceeded"),
        "{err}"
    );
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn resume_of_a_running_child_is_busy() {
    let fx = Fixture::new();
    let (child, _) = fx.spawn_child().await;
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .commit_resume(
            &fx.scope,
            child,
            TOKEN,
            subzero_runtime::store::ResumeCommit {
                model: model(),
                observed: fx.observed_leaf(child).await,
                first: None,
                receipt: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy);
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn a_row_that_describes_no_legal_state_is_internal_and_untouched() {
    let fx = Fixture::new();
    let (child, _) = fx.spawn_child().await;
    fx.raw()
        .execute(
            "UPDATE children SET active_run_id = NULL WHERE child_id = ?1",
            [child.to_string()],
        )
        .unwrap();
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .admit_followup(&fx.scope, followup(child, "more"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal);
    assert!(err.to_string().contains("no active run"), "{err}");
    assert_eq!(state_of(&fx, child).await, before);
}

// ---- where the core's rule now decides ---------------------------------------------

#[tokio::test]
async fn a_followup_sent_while_stopping_starts_after_the_confirmation() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let cleared = fx.queue_followup(child, "before the stop").await;
    let begun = fx
        .store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap();
    assert_eq!(begun.cleared, vec![cleared]);
    let after = fx.queue_followup(child, "after the stop").await;
    let settled = fx
        .store
        .settle_run(child, run, TOKEN, stopped(child, run, 2))
        .await
        .unwrap();
    assert_eq!(settled.cancelled, Vec::<RunId>::new());
    assert_eq!(settled.next.as_ref().map(|n| n.run_id), Some(after));
    assert_eq!(settled.child_state, ChildState::Running);
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.active_run_id, Some(after));
    assert_eq!(row.phase, Phase::Starting);
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    let status = |id: RunId| runs.iter().find(|r| r.run_id == id).unwrap().status;
    assert_eq!(status(run), RunStatus::Stopped);
    assert_eq!(status(cleared), RunStatus::Stopped);
    assert_eq!(status(after), RunStatus::Running);
    assert!(
        fx.store
            .queued_runs(&fx.scope, child)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_lost_worker_interrupts_the_active_run_and_abandons_the_queue() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let queued = fx.queue_followup(child, "later").await;
    let stale = RunId::generate();
    let err = fx
        .store
        .settle_run(
            child,
            stale,
            TOKEN,
            Settlement::Interrupted {
                reason: "gone".to_owned(),
                tree_gone: true,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    let settled = fx
        .store
        .settle_run(
            child,
            run,
            TOKEN,
            Settlement::Interrupted {
                reason: "gone".to_owned(),
                tree_gone: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(settled.child_state, ChildState::Interrupted);
    assert_eq!(settled.cancelled, vec![queued]);
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert_eq!(runs[1].status, RunStatus::Interrupted);
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.phase, Phase::RecoveryRequired);
}

#[tokio::test]
async fn resume_against_a_transcript_that_disagrees_with_the_recorded_leaf_changes_nothing() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.store
        .settle_run(child, run, TOKEN, completed(child, run))
        .await
        .unwrap();
    fx.store.claim(&fx.scope, child, TOKEN).await.unwrap();
    let before = state_of(&fx, child).await;
    let recorded = fx.recorded_leaf(child).await.expect("a recorded leaf");
    // The transcript shows the same leaf id with other content.
    let tampered = subzero_core::lifecycle::LeafRef::new(
        recorded.leaf_id(),
        subzero_core::Sha256Digest::of(b"something else"),
    )
    .unwrap();
    // The recorded leaf, but read from another child's transcript.
    let elsewhere = crate::testsuite::common::observed(ChildId::generate(), recorded.clone());
    for observed in [
        Some(crate::testsuite::common::observed(child, tampered)),
        Some(elsewhere),
        None,
    ] {
        let err = fx
            .store
            .commit_resume(
                &fx.scope,
                child,
                TOKEN,
                subzero_runtime::store::ResumeCommit {
                    model: model(),
                    observed,
                    first: None,
                    receipt: None,
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::CheckpointIncompatible, "{err}");
        assert_eq!(state_of(&fx, child).await, before);
    }
    // The transcript's own digest at the recorded leaf resumes.
    let resumed = fx
        .store
        .commit_resume(
            &fx.scope,
            child,
            TOKEN,
            subzero_runtime::store::ResumeCommit {
                model: model(),
                observed: Some(crate::testsuite::common::observed(child, recorded)),
                first: None,
                receipt: None,
            },
        )
        .await
        .unwrap();
    assert!(matches!(resumed, subzero_runtime::store::Admit::New(_)));
}

/// A resume replayed inside its transaction (another call with the same requestId won
/// the race) gives back the claim it took: the child is not left owned by a broker that
/// runs nothing for it.
#[tokio::test]
async fn a_resume_replayed_in_its_transaction_releases_its_claim() {
    let fx = Fixture::new();
    let (child, _) = interrupted_child(&fx).await;
    let receipt = || subzero_runtime::store::ReceiptInput {
        tool: "subzero_resume".to_owned(),
        request_id: "resume-once".to_owned(),
        args_digest: "sha256:same".to_owned(),
        receipt: serde_json::json!({"childId": child.to_string(), "state": "ready"}),
    };
    let commit = |receipt| subzero_runtime::store::ResumeCommit {
        model: model(),
        observed: None,
        first: None,
        receipt: Some(receipt),
    };
    fx.store.claim(&fx.scope, child, TOKEN).await.unwrap();
    let first = fx
        .store
        .commit_resume(&fx.scope, child, TOKEN, commit(receipt()))
        .await
        .unwrap();
    assert!(matches!(first, subzero_runtime::store::Admit::New(_)));
    // The second call took its claim before it saw the receipt.
    fx.store.claim(&fx.scope, child, TOKEN).await.unwrap();
    let again = fx
        .store
        .commit_resume(&fx.scope, child, TOKEN, commit(receipt()))
        .await
        .unwrap();
    assert!(matches!(again, subzero_runtime::store::Admit::Replayed(_)));
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(
        row.ownership,
        subzero_runtime::store::Ownership::None,
        "{row:?}"
    );
    assert_eq!(row.owner_token, None, "{row:?}");
    // So the child can be claimed again at once (by this broker or another).
    fx.store
        .claim(&fx.scope, child, "another-broker")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_worker_activity_report_never_undoes_a_pending_stop() {
    use subzero_core::lifecycle::Activity;
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.store
        .report_activity(child, TOKEN, Activity::Tool)
        .await
        .unwrap();
    assert_eq!(
        fx.store.child(&fx.scope, child).await.unwrap().phase,
        Phase::Tool
    );
    fx.store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap();
    // The worker finishing its tool reports the model phase; the stop still shows.
    fx.store
        .report_activity(child, TOKEN, Activity::Model)
        .await
        .unwrap();
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.phase, Phase::Stopping);
}

#[tokio::test]
async fn an_activity_report_for_a_child_without_a_run_is_the_cores_not_running() {
    use subzero_core::lifecycle::Activity;
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.store
        .settle_run(child, run, TOKEN, completed(child, run))
        .await
        .unwrap();
    fx.store.claim(&fx.scope, child, TOKEN).await.unwrap();
    let before = state_of(&fx, child).await;
    let err = fx
        .store
        .report_activity(child, TOKEN, Activity::Model)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotRunning);
    assert!(
        err.to_string()
            .contains("a worker activity report needs a running run"),
        "the core's own message: {err}"
    );
    assert_eq!(state_of(&fx, child).await, before);
}

#[tokio::test]
async fn a_refusal_carries_the_cores_message_unchanged() {
    let fx = Fixture::new();
    let (child, _run) = fx.spawn_child().await;
    let stale = RunId::generate();
    let err = fx
        .store
        .begin_stop(&fx.scope, child, stale, TOKEN)
        .await
        .unwrap_err();
    let core = subzero_core::LifecycleError::from(subzero_core::lifecycle::error::StaleRun {
        child,
        expected: stale,
        active: Some(_run),
    });
    assert_eq!(err.to_string(), core.to_string());
}

#[tokio::test]
async fn every_transition_bumps_the_row_generation_and_a_refusal_does_not() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let g0 = fx.store.child(&fx.scope, child).await.unwrap().generation;
    fx.queue_followup(child, "later").await;
    let g1 = fx.store.child(&fx.scope, child).await.unwrap().generation;
    assert!(g1 > g0, "queueing is a decided transition of the child");
    let _ = fx
        .store
        .begin_stop(&fx.scope, child, RunId::generate(), TOKEN)
        .await
        .unwrap_err();
    assert_eq!(
        fx.store.child(&fx.scope, child).await.unwrap().generation,
        g1
    );
    fx.store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap();
    assert!(fx.store.child(&fx.scope, child).await.unwrap().generation > g1);
}
