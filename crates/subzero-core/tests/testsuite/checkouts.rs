//! The isolated checkout's lifecycle in values: git ids are validated, every legal
//! stored record loads back as itself, decisions name what they were made from and are
//! written once, and the value-level twin goes up only into the state it holds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use proptest::prelude::*;
use subzero_core::lifecycle::checkout::{Changed, InUse, Settled};
use subzero_core::lifecycle::{
    AnyCheckout, ChangeRecord, Checkout, CheckoutRecord, CheckoutSite, DiffStats, GitOid,
};
use subzero_core::{CheckoutState, ChildId, Coded, ErrorCode};

use crate::testsuite::support::{storage_key, supervisor};

fn oid(c: char) -> GitOid {
    GitOid::parse(&c.to_string().repeat(40)).unwrap()
}

fn site() -> CheckoutSite {
    CheckoutSite {
        path: PathBuf::from("/state/checkouts/ch"),
        base: oid('a'),
        workspace_head: oid('b'),
        dirty: false,
        carried: false,
    }
}

fn in_use(child: ChildId) -> Checkout<InUse> {
    let prepared = Checkout::prepare(child, site()).commit(|_| Ok::<(), ()>(()));
    prepared
        .unwrap()
        .start_run()
        .commit(|_| Ok::<(), ()>(()))
        .unwrap()
}

#[test]
fn git_oids_are_40_or_64_hex_digits_kept_in_lowercase() {
    let upper = "ABCDEF0123".repeat(4);
    assert_eq!(
        GitOid::parse(&upper).unwrap().as_str(),
        upper.to_lowercase()
    );
    assert!(GitOid::parse(&"0".repeat(64)).is_ok());
    for bad in ["", "abc", &"0".repeat(39), &"0".repeat(41), &"g".repeat(40)] {
        let err = GitOid::parse(bad).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidRequest);
        assert!(err.to_string().contains("git rev-parse"), "{err}");
    }
    let json = serde_json::json!("0".repeat(39));
    assert!(serde_json::from_value::<GitOid>(json).is_err());
}

#[test]
fn a_decision_names_the_row_it_was_made_from_and_is_written_once_with_the_row_after() {
    let child = ChildId::generate();
    let checkout = in_use(child);
    assert_eq!(checkout.version(), 2);
    let stats = DiffStats {
        files_changed: 1,
        insertions: 2,
        deletions: 3,
    };
    let proof = supervisor().change_recorded(child, oid('a'), oid('c'), stats);
    let decided = checkout.settle(proof).unwrap();
    let origin = decided.origin().unwrap();
    assert_eq!(
        (origin.child(), origin.state(), origin.version()),
        (child, CheckoutState::InUse, 2)
    );
    let mut writes = Vec::new();
    let settled = decided
        .commit(|c| {
            writes.push(c.record().clone());
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(writes, vec![settled.record()]);
    assert_eq!(settled.record().version, 3);
    let change = ChangeRecord {
        head: oid('c'),
        stats,
    };
    assert_eq!(settled.recorded(), &change);
}

#[test]
fn a_failed_write_gives_nothing_back() {
    let decided = Checkout::prepare(ChildId::generate(), site());
    assert_eq!(
        decided.commit(|_| Err("disk full")).unwrap_err(),
        "disk full"
    );
}

#[test]
fn refused_evidence_gives_the_checkout_back_unchanged() {
    let child = ChildId::generate();
    let checkout = in_use(child);
    let before = checkout.record();
    let foreign = supervisor().no_change_recorded(ChildId::generate(), oid('a'));
    let (back, err) = checkout.settle_unchanged(foreign).unwrap_err();
    assert_eq!(back.record(), before);
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert!(
        err.to_string().contains("record the checkout again"),
        "{err}"
    );
}

#[test]
fn the_twin_goes_up_only_into_the_state_it_holds() {
    let any = AnyCheckout::from(in_use(ChildId::generate()));
    let wrong = Checkout::<Settled<Changed>>::try_from(any).unwrap_err();
    assert_eq!(wrong.code(), ErrorCode::InvalidRequest);
    assert_eq!(wrong.found, "in_use");
    let back: Checkout<InUse> = wrong.value.try_into().unwrap();
    assert_eq!(back.state(), CheckoutState::InUse);
}

#[test]
fn a_transition_the_state_lacks_is_refused_at_run_time_naming_what_to_do() {
    let any = AnyCheckout::from(in_use(ChildId::generate()));
    let landed = supervisor().landing_seen(ChildId::generate(), oid('c'));
    let (back, err) = any.apply(landed).unwrap_err();
    assert_eq!(back.state(), CheckoutState::InUse);
    assert_eq!(err.code(), ErrorCode::ChangeUnavailable);
    assert!(
        err.to_string().contains("wait until its run settles"),
        "{err}"
    );
}

fn state_and_change() -> impl Strategy<Value = (CheckoutState, bool)> {
    (0..CheckoutState::ALL.len()).prop_map(|i| {
        let state = CheckoutState::ALL[i];
        let change = matches!(
            state,
            CheckoutState::SettledChanged | CheckoutState::Applied | CheckoutState::Discarded
        );
        (state, change)
    })
}

proptest! {
    #[test]
    fn every_legal_record_loads_back_as_itself(
        (state, with_change) in state_and_change(),
        stats in any::<(u64, u64, u64)>(),
        version in 1..u64::MAX / 2,
        (dirty, carried) in any::<(bool, bool)>().prop_map(|(d, c)| (d, d && c)),
        head in "[0-9a-f]{40}",
    ) {
        prop_assume!(head != "a".repeat(40));
        let record = CheckoutRecord {
            child: ChildId::generate(),
            state,
            site: CheckoutSite { dirty, carried, ..site() },
            change: with_change.then(|| ChangeRecord {
                head: GitOid::parse(&head).unwrap(),
                stats: DiffStats { files_changed: stats.0, insertions: stats.1, deletions: stats.2 },
            }),
            version,
        };
        let loaded = AnyCheckout::load(record.clone(), storage_key()).unwrap();
        prop_assert_eq!(loaded.state(), state);
        prop_assert_eq!(loaded.record(), record);
    }

    #[test]
    fn a_change_on_the_wrong_state_never_loads((state, with_change) in state_and_change()) {
        let record = CheckoutRecord {
            child: ChildId::generate(),
            state,
            site: site(),
            change: (!with_change).then(|| ChangeRecord { head: oid('c'), stats: DiffStats::default() }),
            version: 1,
        };
        let err = AnyCheckout::load(record, storage_key()).unwrap_err();
        prop_assert_eq!(err.code(), ErrorCode::Internal);
    }
}
