//! The transaction runner, which only the store reaches: a panicking transaction rolls
//! back and answers `internal`, the writer thread lives on, and every write runs on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use subzero_core::ErrorCode;

use super::{Store, StoreOptions, WRITER_THREAD_NAME};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("subzero.db"), StoreOptions::default()).unwrap();
    (dir, store)
}

fn receipts(store: &Store) -> i64 {
    store
        .read_blocking(|c| {
            Ok(c.query_row("SELECT COUNT(*) AS n FROM receipts", [], |r| r.get("n"))?)
        })
        .unwrap()
}

const INSERT: &str = "INSERT INTO receipts VALUES ('s', 'subzero_spawn', ?1, 'd', '{}', 'now')";

#[tokio::test]
async fn a_panicking_transaction_answers_internal_rolls_back_and_later_writes_work() {
    let (_dir, store) = store();
    let err = store
        .transact::<(), _>(|tx, _| {
            tx.execute(INSERT, ["r1"])?;
            panic!("injected panic inside a store transaction");
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal, "{err}");
    assert!(err.to_string().contains("panicked"), "{err}");
    assert_eq!(
        receipts(&store),
        0,
        "the panicking transaction was not rolled back"
    );
    // The writer thread lives on: the next write commits, through the same thread.
    store
        .transact(|tx, _| {
            tx.execute(INSERT, ["r2"])?;
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(receipts(&store), 1);
    store.close();
}

#[test]
fn a_panicking_blocking_transaction_answers_internal_and_the_writer_lives_on() {
    let (_dir, store) = store();
    for _ in 0..3 {
        let err = store.transact_blocking::<(), _>(|_, _| panic!("an injected panic"));
        assert!(
            matches!(&err, Err(e) if e.code() == ErrorCode::Internal),
            "{err:?}"
        );
        store.transact_blocking(|_, _| Ok(())).unwrap();
    }
    store.close();
}

#[tokio::test]
async fn store_mutations_run_on_the_writer_thread_not_the_reactor() {
    let (_dir, store) = store();
    let here = std::thread::current().id();
    let (name, id) = store
        .transact(|_, _| {
            let t = std::thread::current();
            Ok((t.name().map(str::to_owned), t.id()))
        })
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some(WRITER_THREAD_NAME));
    assert_ne!(id, here);
    store.close();
}
