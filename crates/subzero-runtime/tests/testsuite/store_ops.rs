//! The store's transactions, read like the spec.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::testsuite::common::{Fixture, TOKEN, model, spawn_input};
use serde_json::json;
use subzero_core::events::EventKind;
use subzero_core::{ChildId, ChildState, ErrorCode, EventSeq, RunId, RunStatus};
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{
    Admit, AdmitFollowup, FollowupDelivery, LockObservation, NewArtifact, Ownership, Phase,
    ReceiptInput, RecoveryOutcome, Settlement,
};

fn completed(child: ChildId, run: RunId, artifact: Option<NewArtifact>) -> Settlement {
    Settlement::Completed {
        preview: "done".to_owned(),
        preview_truncated: false,
        artifact: artifact.unwrap_or_else(crate::testsuite::common::result_artifact),
        leaf: crate::testsuite::common::leaf(child, run, "leaf-1"),
        budget: None,
    }
}

#[tokio::test]
async fn spawn_admission_creates_a_running_owned_child_with_its_first_run() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.state, ChildState::Running);
    assert_eq!(row.ownership, Ownership::Owned);
    assert_eq!(row.owner_token.as_deref(), Some(TOKEN));
    assert_eq!(row.owner_generation, 1);
    assert_eq!(row.active_run_id, Some(run));
    assert_eq!(row.phase, Phase::Starting);
    assert_eq!(row.model, model());
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Running);
    let page = fx
        .store
        .events(&fx.scope, child, EventSeq::START, 10)
        .await
        .unwrap();
    assert_eq!(page.events.len(), 1);
    assert_eq!(page.events[0].body.kind(), EventKind::RunStarted);
}

#[tokio::test]
async fn followups_queue_in_order_and_completed_settlement_dispatches_the_next() {
    let fx = Fixture::new();
    let (child, first) = fx.spawn_child().await;
    let a = fx.queue_followup(child, "a").await;
    let b = fx.queue_followup(child, "b").await;
    assert_eq!(
        fx.store.queued_runs(&fx.scope, child).await.unwrap(),
        vec![a, b]
    );

    let settled = fx
        .store
        .settle_run(child, first, TOKEN, completed(child, first, None))
        .await
        .unwrap();
    assert_eq!(settled.next.as_ref().map(|n| n.run_id), Some(a));
    assert_eq!(settled.next.as_ref().map(|n| n.prompt.as_str()), Some("a"));
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.active_run_id, Some(a));
    assert_eq!(row.last_leaf.map(|l| l.leaf_id), Some("leaf-1".to_owned()));
    assert_eq!(
        fx.store.queued_runs(&fx.scope, child).await.unwrap(),
        vec![b]
    );

    fx.store
        .settle_run(child, a, TOKEN, completed(child, a, None))
        .await
        .unwrap();
    let settled = fx
        .store
        .settle_run(child, b, TOKEN, completed(child, b, None))
        .await
        .unwrap();
    assert_eq!(settled.next, None);
    assert_eq!(settled.child_state, ChildState::Ready);
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.ownership, Ownership::None);
    assert_eq!(row.owner_token, None);
    assert_eq!(row.phase, Phase::Idle);
}

#[tokio::test]
async fn a_failed_run_cancels_the_queue() {
    let fx = Fixture::new();
    let (child, first) = fx.spawn_child().await;
    let queued = fx.queue_followup(child, "later").await;
    let settled = fx
        .store
        .settle_run(
            child,
            first,
            TOKEN,
            Settlement::Failed {
                code: ErrorCode::ModelRequestFailed,
                message: "503".to_owned(),
                partial: None,
                details: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(settled.cancelled, vec![queued]);
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[1].status, RunStatus::Stopped);
    assert!(runs[1].reason.as_deref().unwrap().contains("cancelled"));
}

#[tokio::test]
async fn stop_with_a_stale_run_id_changes_nothing() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let err = fx
        .store
        .begin_stop(&fx.scope, child, RunId::generate(), TOKEN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StaleRun);
    assert!(err.to_string().contains(&run.to_string()), "{err}");
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Running);
}

#[tokio::test]
async fn stop_clears_the_queue_and_stopped_is_written_only_after_confirmation() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let queued = fx.queue_followup(child, "later").await;

    // `stopped` before a stop request is refused.
    let err = fx
        .store
        .settle_run(
            child,
            run,
            TOKEN,
            crate::testsuite::common::stopped(child, run, 0),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);

    let begun = fx
        .store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap();
    assert_eq!(begun.cleared, vec![queued]);
    assert!(!begun.already_requested);
    let again = fx
        .store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap();
    assert!(again.already_requested);
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.phase, Phase::Stopping);
    assert_eq!(row.state, ChildState::Running);

    let settled = fx
        .store
        .settle_run(
            child,
            run,
            TOKEN,
            crate::testsuite::common::stopped(child, run, 3),
        )
        .await
        .unwrap();
    assert_eq!(settled.child_state, ChildState::Ready);
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Stopped);
    assert_eq!(runs[1].status, RunStatus::Stopped);

    let err = fx
        .store
        .begin_stop(&fx.scope, child, run, TOKEN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotRunning);
}

#[tokio::test]
async fn a_ready_child_must_be_claimed_before_a_followup_starts_it() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.store
        .settle_run(child, run, TOKEN, completed(child, run, None))
        .await
        .unwrap();

    let followup = |token: &str| AdmitFollowup {
        child_id: child,
        run_id: RunId::generate(),
        prompt: "next".to_owned(),
        owner_token: token.to_owned(),
        receipt: None,
    };
    let err = fx
        .store
        .admit_followup(&fx.scope, followup(TOKEN))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy);

    let claim = fx.store.claim(&fx.scope, child, TOKEN).await.unwrap();
    assert_eq!(claim.owner_generation, 2);
    let err = fx
        .store
        .claim(&fx.scope, child, "bk_OTHER")
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy);

    let admitted = fx
        .store
        .admit_followup(&fx.scope, followup(TOKEN))
        .await
        .unwrap();
    assert!(matches!(admitted, Admit::New(FollowupDelivery::Started)));
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.state, ChildState::Running);
}

#[tokio::test]
async fn a_request_id_replays_its_receipt_and_conflicts_on_other_arguments() {
    let fx = Fixture::new();
    let receipt = |digest: &str| ReceiptInput {
        tool: "subzero_spawn".to_owned(),
        request_id: "req-1".to_owned(),
        args_digest: digest.to_owned(),
        receipt: json!({"childId": "first"}),
    };
    let mut input = spawn_input(&fx.scope, TOKEN);
    input.receipt = Some(receipt("d1"));
    assert!(matches!(
        fx.store.admit_spawn(input).await.unwrap(),
        Admit::New(_)
    ));

    let mut again = spawn_input(&fx.scope, TOKEN);
    again.receipt = Some(receipt("d1"));
    match fx.store.admit_spawn(again).await.unwrap() {
        Admit::Replayed(stored) => assert_eq!(stored, json!({"childId": "first"})),
        Admit::New(_) => panic!("second effect"),
    }
    assert_eq!(fx.count("SELECT COUNT(*) FROM children"), 1);

    let mut other = spawn_input(&fx.scope, TOKEN);
    other.receipt = Some(receipt("d2"));
    let err = fx.store.admit_spawn(other).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::RequestConflict);
    let found = fx
        .store
        .find_receipt(&fx.scope, receipt("d1"))
        .await
        .unwrap();
    assert!(found.is_some());
}

#[tokio::test]
async fn another_scope_or_a_replaced_directory_sees_nothing() {
    let fx = Fixture::new();
    let (child, _) = fx.spawn_child().await;
    let other_dir = fx.dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other = WorkspaceScope::resolve(&other_dir).unwrap();
    let err = fx.store.child(&other, child).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    let err = fx
        .store
        .events(&other, child, EventSeq::START, 5)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);

    // Same path, new directory: a different scope.
    // (Create the replacement before removing the original so the inode cannot be reused.)
    let replacement = fx.dir.path().join("replacement");
    std::fs::create_dir(&replacement).unwrap();
    std::fs::remove_dir(&fx.workspace).unwrap();
    std::fs::rename(&replacement, &fx.workspace).unwrap();
    let replaced = WorkspaceScope::resolve(&fx.workspace).unwrap();
    assert_eq!(replaced.root(), fx.scope.root());
    assert_ne!(replaced, fx.scope);
    let err = fx.store.child(&replaced, child).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert!(
        fx.store
            .list_children(&replaced, 50, None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        fx.store
            .list_children(&fx.scope, 50, None)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn resume_rewrites_the_model_and_needs_a_claim() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    fx.store
        .settle_run(
            child,
            run,
            TOKEN,
            Settlement::Interrupted {
                reason: "worker lost".to_owned(),
                tree_gone: true,
            },
        )
        .await
        .unwrap();
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.state, ChildState::Interrupted);
    assert_eq!(row.interrupt_reason.as_deref(), Some("worker lost"));

    let err = fx
        .store
        .admit_followup(
            &fx.scope,
            AdmitFollowup {
                child_id: child,
                run_id: RunId::generate(),
                prompt: "x".to_owned(),
                owner_token: TOKEN.to_owned(),
                receipt: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Interrupted);

    let mut new_model = model();
    new_model.model = "other-model".to_owned();
    let err = fx
        .store
        .commit_resume(
            &fx.scope,
            child,
            TOKEN,
            subzero_runtime::store::ResumeCommit {
                model: new_model.clone(),
                observed: fx.observed_leaf(child).await,
                first: None,
                receipt: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Busy);

    fx.store.claim(&fx.scope, child, TOKEN).await.unwrap();
    let next = RunId::generate();
    let resumed = fx
        .store
        .commit_resume(
            &fx.scope,
            child,
            TOKEN,
            subzero_runtime::store::ResumeCommit {
                model: new_model.clone(),
                observed: fx.observed_leaf(child).await,
                first: Some((next, "continue".to_owned())),
                receipt: None,
            },
        )
        .await
        .unwrap();
    let Admit::New(resumed) = resumed else {
        panic!("replayed")
    };
    assert_eq!(resumed.state, ChildState::Running);
    assert_eq!(resumed.run_id, Some(next));
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.model, new_model);
    assert_eq!(row.interrupt_reason, None);
}

#[tokio::test]
async fn recovery_with_a_free_lock_interrupts_the_run_and_cancels_the_queue() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let queued = fx.queue_followup(child, "later").await;
    let outcome = fx
        .store
        .recover_child(child, 1, LockObservation::Free, "owner gone")
        .await
        .unwrap();
    assert_eq!(
        outcome,
        RecoveryOutcome::Interrupted {
            run_id: Some(run),
            cancelled: vec![queued]
        }
    );
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert_eq!(runs[0].reason.as_deref(), Some("owner gone"));
    assert_eq!(runs[1].status, RunStatus::Interrupted);
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.state, ChildState::Interrupted);
    assert_eq!(row.ownership, Ownership::None);

    // A stale generation changes nothing.
    let outcome = fx
        .store
        .recover_child(child, 7, LockObservation::Held, "x")
        .await
        .unwrap();
    assert_eq!(outcome, RecoveryOutcome::Changed);
}

// ---- injected failures leave no partial state ------------------------------------

#[tokio::test]
async fn a_failure_inside_admission_leaves_nothing() {
    let fx = Fixture::new();
    fx.inject_event_failure();
    let mut input = spawn_input(&fx.scope, TOKEN);
    input.receipt = Some(ReceiptInput {
        tool: "subzero_spawn".to_owned(),
        request_id: "r".to_owned(),
        args_digest: "d".to_owned(),
        receipt: json!({}),
    });
    let err = fx.store.admit_spawn(input).await.unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    for table in [
        "children",
        "runs",
        "followups",
        "events",
        "receipts",
        "checkouts",
    ] {
        assert_eq!(
            fx.count(&format!("SELECT COUNT(*) FROM {table}")),
            0,
            "{table}"
        );
    }
}

#[tokio::test]
async fn a_failure_inside_stop_leaves_the_run_and_queue_untouched() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let queued = fx.queue_followup(child, "later").await;
    let before = fx.store.child(&fx.scope, child).await.unwrap();
    fx.inject_event_failure();
    assert!(
        fx.store
            .begin_stop(&fx.scope, child, run, TOKEN)
            .await
            .is_err()
    );
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Running);
    assert_eq!(runs[1].status, RunStatus::Queued);
    assert_eq!(
        fx.store.queued_runs(&fx.scope, child).await.unwrap(),
        vec![queued]
    );
    let after = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(after.phase, before.phase);
    assert_eq!(after.next_event_seq, before.next_event_seq);

    fx.clear_injection();
    assert!(
        fx.store
            .begin_stop(&fx.scope, child, run, TOKEN)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_failure_inside_settle_leaves_the_run_active_and_registers_nothing() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let queued = fx.queue_followup(child, "later").await;
    fx.inject_event_failure();
    let artifact = NewArtifact {
        artifact_id: subzero_core::ArtifactId::generate(),
        file_name: "x.txt".to_owned(),
        total_bytes: 4,
    };
    assert!(
        fx.store
            .settle_run(child, run, TOKEN, completed(child, run, Some(artifact)))
            .await
            .is_err()
    );
    let row = fx.store.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.state, ChildState::Running);
    assert_eq!(row.active_run_id, Some(run));
    assert_eq!(row.last_leaf, None);
    let runs = fx.store.runs(&fx.scope, child).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Running);
    assert_eq!(runs[1].status, RunStatus::Queued);
    assert_eq!(
        fx.store.queued_runs(&fx.scope, child).await.unwrap(),
        vec![queued]
    );
    assert_eq!(fx.count("SELECT COUNT(*) FROM artifacts"), 0);

    fx.clear_injection();
    let settled = fx
        .store
        .settle_run(child, run, TOKEN, completed(child, run, None))
        .await
        .unwrap();
    assert_eq!(settled.next.map(|n| n.run_id), Some(queued));
}
