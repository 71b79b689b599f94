//! The checkouts ledger: every checkout a child gets is a row, written only from the
//! core's decisions, read back through the core's checked load; two brokers deciding from
//! the same row never both write.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::testsuite::common::{Fixture, supervisor};
use subzero_core::lifecycle::checkout::{Changed, InUse, Prepared, Settled};
use subzero_core::lifecycle::{AnyCheckout, Checkout, CheckoutSite, DiffStats, GitOid};
use subzero_core::{CheckoutState, ChildId, ErrorCode};
use subzero_runtime::error::RuntimeError;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{CheckoutFilter, Store, StoreOptions};

fn oid(c: char) -> GitOid {
    GitOid::parse(&c.to_string().repeat(40)).unwrap()
}

fn site(fx: &Fixture, child: ChildId) -> CheckoutSite {
    CheckoutSite {
        path: fx.dir.path().join("checkouts").join(child.to_string()),
        base: oid('a'),
        workspace_head: oid('b'),
        dirty: true,
        carried: true,
    }
}

const STATS: DiffStats = DiffStats {
    files_changed: 2,
    insertions: 10,
    deletions: 3,
};

/// A child with a prepared checkout of 4 KiB in the ledger.
async fn prepared(fx: &Fixture) -> (ChildId, Checkout<Prepared>) {
    let (child, _) = fx.spawn_child().await;
    let decided = Checkout::prepare(child, site(fx, child));
    let checkout = fx.store.insert_checkout(&fx.scope, decided, 4096).await;
    (child, checkout.unwrap())
}

/// A child whose checkout settled with a change, as written.
async fn settled(fx: &Fixture) -> (ChildId, Checkout<Settled<Changed>>) {
    let (child, checkout) = prepared(fx).await;
    let in_use: Checkout<InUse> = fx.store.write_checkout(checkout.start_run()).await.unwrap();
    let change = supervisor().change_recorded(child, oid('a'), oid('c'), STATS);
    let decided = in_use.settle(change).unwrap();
    (child, fx.store.write_checkout(decided).await.unwrap())
}

async fn stored_state(store: &Store, child: ChildId) -> CheckoutState {
    store.checkout(child).await.unwrap().unwrap().state()
}

#[tokio::test]
async fn a_checkout_is_recorded_through_its_lifecycle_and_loads_as_written() {
    let fx = Fixture::new();
    let (child, checkout) = settled(&fx).await;
    let row = fx.store.checkout_row(child).await.unwrap().unwrap();
    assert_eq!(row.record().unwrap(), checkout.record());
    assert_eq!((row.generation, row.size_bytes), (3, 4096));
    assert_eq!(row.scope_key, fx.scope.key());
    let landed = supervisor().landing_seen(child, oid('c'));
    let applied = fx
        .store
        .write_checkout(checkout.apply(landed).unwrap())
        .await
        .unwrap();
    let loaded = fx.store.checkout(child).await.unwrap().unwrap();
    assert_eq!(loaded.record(), applied.record());
    assert_eq!(loaded.state(), CheckoutState::Applied);
    assert_eq!(loaded.record().change.unwrap().stats, STATS);
}

#[tokio::test]
async fn two_brokers_applying_the_same_checkout_write_once_and_the_other_is_told_it_changed() {
    let fx = Fixture::new();
    let (child, _) = settled(&fx).await;
    let other = Store::open(&fx.paths.database(), StoreOptions::default()).unwrap();
    // Both brokers read the settled row and decide to apply it.
    let decide = |any: Option<AnyCheckout>| {
        let checkout: Checkout<Settled<Changed>> = any.unwrap().try_into().unwrap();
        checkout
            .apply(supervisor().landing_seen(child, oid('c')))
            .unwrap()
    };
    let mine = decide(fx.store.checkout(child).await.unwrap());
    let theirs = decide(other.checkout(child).await.unwrap());
    let (a, b) = tokio::join!(fx.store.write_checkout(mine), other.write_checkout(theirs));
    let (won, lost) = match (a, b) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        (a, b) => panic!("exactly one write must land: {a:?} / {b:?}"),
    };
    assert_eq!(won.state(), CheckoutState::Applied);
    let RuntimeError::CheckoutChanged {
        decided_from,
        stored,
        ..
    } = &lost
    else {
        panic!("expected checkout_changed, got {lost}");
    };
    assert_eq!(*decided_from, Some((CheckoutState::SettledChanged, 3)));
    assert_eq!(*stored, Some((CheckoutState::Applied, 4)));
    assert_eq!(lost.code(), ErrorCode::Busy);
    assert!(
        lost.to_string().contains("read the checkout again"),
        "{lost}"
    );
    assert_eq!(stored_state(&other, child).await, CheckoutState::Applied);
    other.close();
}

#[tokio::test]
async fn a_decision_from_an_older_row_version_changes_nothing() {
    let fx = Fixture::new();
    let (child, checkout) = prepared(&fx).await;
    let stale = fx.store.checkout(child).await.unwrap().unwrap();
    fx.store.write_checkout(checkout.start_run()).await.unwrap();
    let before = fx.store.checkout_row(child).await.unwrap();
    let err = fx
        .store
        .write_checkout(stale.remove().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::CheckoutChanged { .. }), "{err}");
    assert_eq!(fx.store.checkout_row(child).await.unwrap(), before);
}

#[tokio::test]
async fn a_checkout_is_inserted_once_and_only_for_a_child_of_the_scope() {
    let fx = Fixture::new();
    let (child, _) = prepared(&fx).await;
    let again = Checkout::prepare(child, site(&fx, child));
    let err = fx
        .store
        .insert_checkout(&fx.scope, again, 1)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::CheckoutChanged {
                decided_from: None,
                stored: Some((CheckoutState::Prepared, 1)),
                ..
            }
        ),
        "{err}"
    );
    let elsewhere = fx.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let foreign = WorkspaceScope::resolve(&elsewhere).unwrap();
    let (other_child, _) = fx.spawn_child().await;
    let decided = Checkout::prepare(other_child, site(&fx, other_child));
    let err = fx
        .store
        .insert_checkout(&foreign, decided, 1)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert_eq!(fx.count("SELECT COUNT(*) FROM checkouts"), 1);
}

#[tokio::test]
async fn listing_filters_by_scope_state_and_age_and_sizes_add_up() {
    let fx = Fixture::new();
    let (changed, _) = settled(&fx).await;
    let (removed, checkout) = prepared(&fx).await;
    fx.store.write_checkout(checkout.remove()).await.unwrap();
    let (measured, _) = prepared(&fx).await;
    fx.store.measure_checkout(measured, 10_000).await.unwrap();
    let ids = |rows: Vec<subzero_runtime::store::CheckoutRow>| {
        rows.into_iter().map(|r| r.child_id).collect::<Vec<_>>()
    };
    let all = fx.store.list_checkouts(CheckoutFilter::default()).await;
    assert_eq!(ids(all.unwrap()), vec![changed, removed, measured]);
    let by_state = CheckoutFilter {
        scope: Some(fx.scope.clone()),
        state: Some(CheckoutState::Removed),
        ..CheckoutFilter::default()
    };
    let rows = fx.store.list_checkouts(by_state).await.unwrap();
    assert_eq!(ids(rows.clone()), vec![removed]);
    assert_eq!(rows[0].size_bytes, 0, "a removed checkout holds no bytes");
    let old = CheckoutFilter {
        updated_before: Some("2000-01-01T00:00:00.000Z".parse().unwrap()),
        ..CheckoutFilter::default()
    };
    assert!(fx.store.list_checkouts(old).await.unwrap().is_empty());
    let total = fx.store.total_checkout_size(Some(&fx.scope)).await.unwrap();
    assert_eq!(total, 4096 + 10_000);
    let err = fx.store.measure_checkout(ChildId::generate(), 1).await;
    assert_eq!(err.unwrap_err().code(), ErrorCode::NotFound);
}

#[tokio::test]
async fn a_ledger_row_that_describes_no_legal_checkout_does_not_load() {
    let fx = Fixture::new();
    let (child, _) = prepared(&fx).await;
    // A raw write (no decision) claims the prepared checkout was applied, without a change.
    fx.raw()
        .execute(
            "UPDATE checkouts SET state = ?1 WHERE child_id = ?2",
            rusqlite::params!["applied", child.to_string()],
        )
        .unwrap();
    let err = fx.store.checkout(child).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal);
    assert!(err.to_string().contains("without a change"), "{err}");
    assert!(
        fx.store
            .checkout(ChildId::generate())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_isolated_spawn_stores_its_child_and_its_checkout_together_or_neither() {
    let fx = Fixture::new();
    let input = crate::testsuite::common::spawn_input(&fx.scope, "token");
    let child = input.child.child_id;
    let decided = Checkout::prepare(child, site(&fx, child));
    let admitted = fx
        .store
        .admit_isolated_spawn(input, decided, 4096)
        .await
        .unwrap();
    assert!(matches!(admitted, subzero_runtime::store::Admit::New(_)));
    assert_eq!(
        stored_state(&fx.store, child).await,
        CheckoutState::Prepared
    );
    assert!(fx.store.child(&fx.scope, child).await.is_ok());

    // The same child again: the admission is refused, and no second row appears.
    let mut again = crate::testsuite::common::spawn_input(&fx.scope, "token");
    again.child.child_id = child;
    let other = Checkout::prepare(child, site(&fx, child));
    assert!(
        fx.store
            .admit_isolated_spawn(again, other, 1)
            .await
            .is_err()
    );
    let row = fx.store.checkout_row(child).await.unwrap().unwrap();
    assert_eq!(row.record().unwrap().version, 1);

    // A checkout the ledger refuses (here: one for a child that is not being stored)
    // takes the child's admission back with it.
    let input = crate::testsuite::common::spawn_input(&fx.scope, "token");
    let admitted_child = input.child.child_id;
    let stranger = ChildId::generate();
    let decided = Checkout::prepare(stranger, site(&fx, stranger));
    assert!(
        fx.store
            .admit_isolated_spawn(input, decided, 1)
            .await
            .is_err()
    );
    assert!(fx.store.child(&fx.scope, admitted_child).await.is_err());
    assert!(fx.store.checkout_row(stranger).await.unwrap().is_none());
}
