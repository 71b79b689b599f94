//! The store under faults, on a real SQLite file through the real writer thread: a clean
//! close that must leave the database complete by itself, and a database file deleted
//! or replaced under an open store. (A transaction that panics is the store's own unit
//! test: only the store runs raw transactions.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::testsuite::common::Fixture;
use subzero_core::ErrorCode;
use subzero_runtime::store::{SCHEMA_VERSION, Store, StoreOptions};

/// Size of the write-ahead log beside `db` (0 when absent).
fn wal_len(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// Length and modification time of a file: what a write into it would change.
fn footprint(path: &Path) -> (u64, i64, i64) {
    let meta = std::fs::metadata(path).unwrap();
    (meta.len(), meta.mtime(), meta.mtime_nsec())
}

#[tokio::test]
async fn a_clean_close_leaves_a_database_that_is_complete_by_itself() {
    let fx = Fixture::new();
    let (child, _) = fx.spawn_child().await;
    // A read, so the store holds a pooled read connection when it closes (as a broker does).
    fx.store.child(&fx.scope, child).await.unwrap();
    let db = fx.paths.database();
    fx.store.close();
    assert_eq!(
        wal_len(&db),
        0,
        "a clean close left the WAL un-checkpointed"
    );

    // The database file alone, copied elsewhere, holds the child.
    let copy = fx.dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let found: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM children WHERE child_id = ?1",
            [child.to_string()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(found, 1, "the copied database file misses the child");

    // Reopened read-only with neither log nor index beside it, the database still reads.
    let ro = Store::open_read_only(&db, StoreOptions::default())
        .unwrap()
        .expect("the database exists");
    assert_eq!(ro.child(&fx.scope, child).await.unwrap().child_id, child);
    ro.close();
}

#[tokio::test]
async fn a_close_while_another_connection_reads_still_closes_promptly() {
    let fx = Fixture::new();
    fx.spawn_child().await;
    // Another broker mid-read: the checkpoint cannot truncate the log, which is fine.
    let other = fx.raw();
    other.execute_batch("BEGIN").unwrap();
    let _: i64 = other
        .query_row("SELECT COUNT(*) FROM children", [], |r| r.get(0))
        .unwrap();
    let started = std::time::Instant::now();
    fx.store.close();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "close waited {:?} for a reader",
        started.elapsed()
    );
    other.execute_batch("COMMIT").unwrap();
}

#[tokio::test]
async fn a_database_deleted_under_the_store_is_refused_naming_the_path_and_never_recreated() {
    let fx = Fixture::new();
    fx.spawn_child().await;
    let db = fx.paths.database();
    std::fs::remove_file(&db).unwrap();

    let err = fx
        .store
        .admit_spawn(crate::testsuite::common::spawn_input(
            &fx.scope,
            crate::testsuite::common::TOKEN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StorageUnavailable, "{err}");
    let text = err.to_string();
    assert!(text.contains(&db.display().to_string()), "{text}");
    assert!(text.contains("restart"), "{text}");
    assert!(!db.exists(), "the store recreated {}", db.display());
    fx.store.close();
    assert!(!db.exists(), "closing recreated {}", db.display());
}

#[tokio::test]
async fn a_database_replaced_under_the_store_is_refused_and_the_orphan_is_never_written() {
    let fx = Fixture::new();
    let (child, _) = fx.spawn_child().await;
    let db = fx.paths.database();
    // Keep a name for the file the store has open, then put another file at its path.
    let orphan = fx.dir.path().join("orphan.db");
    std::fs::hard_link(&db, &orphan).unwrap();
    let replacement = fx.paths.root().join("replacement.db");
    std::fs::write(&replacement, b"").unwrap();
    std::fs::rename(&replacement, &db).unwrap();
    let before = (footprint(&orphan), wal_len(&db));

    let err = fx
        .store
        .admit_spawn(crate::testsuite::common::spawn_input(
            &fx.scope,
            crate::testsuite::common::TOKEN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StorageUnavailable, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&db.display().to_string()) && text.contains("replaced"),
        "{text}"
    );
    assert!(text.contains("restart"), "{text}");
    // Any write gets the same answer.
    let err = fx
        .store
        .release(child, crate::testsuite::common::TOKEN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::StorageUnavailable, "{err}");
    fx.store.close();

    assert_eq!(
        (footprint(&orphan), wal_len(&db)),
        before,
        "the orphaned database (or its log) was written"
    );
    assert_eq!(
        std::fs::metadata(&db).unwrap().len(),
        0,
        "the replacement was written"
    );
}

#[tokio::test]
async fn a_read_only_store_reads_without_taking_the_write_lock_and_refuses_writes() {
    let fx = Fixture::new();
    let (child, _) = fx.spawn_child().await;
    let db = fx.paths.database();
    // Another process holds the write lock for as long as it likes.
    let writer = fx.raw();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();

    let started = std::time::Instant::now();
    let ro = Store::open_read_only(&db, StoreOptions::default())
        .unwrap()
        .expect("the database exists");
    let row = ro.child(&fx.scope, child).await.unwrap();
    assert_eq!(row.child_id, child);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "the read-only open waited {:?} for the writer",
        started.elapsed()
    );
    let err = ro
        .release(child, crate::testsuite::common::TOKEN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal, "{err}");
    assert!(err.to_string().contains("read-only"), "{err}");
    // query_only: even a raw statement through a read connection cannot write.
    let err = ro
        .read_blocking(|c| Ok(c.execute_batch("CREATE TABLE intruder (x)")?))
        .unwrap_err();
    assert!(
        err.to_string().contains("readonly") || err.to_string().contains("read-only"),
        "{err}"
    );
    ro.close();
    writer.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn a_read_only_open_never_creates_or_migrates_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("subzero.db");
    let opened = Store::open_read_only(&missing, StoreOptions::default()).unwrap();
    assert!(
        opened.is_none(),
        "a missing database is no children, not an error"
    );
    assert!(!missing.exists());

    // A database at an older schema version is refused naming the one that upgrades it.
    let old = dir.path().join("old.db");
    let conn = rusqlite::Connection::open(&old).unwrap();
    conn.execute_batch("CREATE TABLE unrelated (x); PRAGMA user_version = 0;")
        .unwrap();
    drop(conn);
    let err = Store::open_read_only(&old, StoreOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("subzero mcp") && text.contains("older"),
        "{text}"
    );
    let conn = rusqlite::Connection::open(&old).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0, "a read-only open migrated the database");
    assert!(SCHEMA_VERSION > version);
}
