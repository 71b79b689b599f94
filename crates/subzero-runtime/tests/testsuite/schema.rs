//! The database file: migrations by `user_version`, WAL, owner-only permissions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;

use subzero_core::ErrorCode;
use subzero_runtime::paths::StatePaths;
use subzero_runtime::store::{SCHEMA_VERSION, Store, StoreOptions};

#[test]
fn opening_migrates_once_and_reopening_keeps_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let paths = StatePaths::create(dir.path().join("state")).unwrap();
    let db = paths.database();
    let store = Store::open(&db, StoreOptions::default()).unwrap();
    store.close();
    let store = Store::open(&db, StoreOptions::default()).unwrap();
    store.close();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let perms = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(perms, 0o600);
}

#[test]
fn a_database_from_a_newer_subzero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("subzero.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    let err = Store::open(&db, StoreOptions::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal);
    assert!(err.to_string().contains("newer than this subzero"), "{err}");
}

#[tokio::test]
async fn a_closed_store_refuses_writes_as_shutting_down() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db"), StoreOptions::default()).unwrap();
    store.close();
    let err = store
        .release(subzero_core::ChildId::generate(), "bk_X")
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::RuntimeShuttingDown);
}
