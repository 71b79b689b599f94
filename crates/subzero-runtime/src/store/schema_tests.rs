//! The migrations, step by step: what each one keeps and what its columns check.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn insert_run(conn: &Connection, ordinal: i64, extra: &str) -> rusqlite::Result<usize> {
    conn.execute(
        &format!(
            "INSERT INTO runs (run_id, child_id, ordinal, status, prompt, created_at{}) \
             VALUES (?1, 'ch_x', ?2, 'completed', 'p', 'now'{})",
            if extra.is_empty() {
                ""
            } else {
                ", usage_source, cut_max_output_tokens"
            },
            if extra.is_empty() {
                String::new()
            } else {
                format!(", {extra}")
            },
        ),
        rusqlite::params![format!("run_{ordinal}"), ordinal],
    )
}

#[test]
fn runs_stored_before_v4_are_reported_and_uncut_and_the_columns_are_checked() {
    let conn = Connection::open_in_memory().unwrap();
    // Up to v3, with a run in it (no child: foreign keys stay off on this connection).
    for step in &MIGRATIONS[..3] {
        conn.execute_batch(step).unwrap();
    }
    conn.pragma_update(None, "user_version", 3).unwrap();
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    insert_run(&conn, 1, "").unwrap();
    conn.execute_batch(MIGRATIONS[3]).unwrap();
    let (source, cut): (String, Option<i64>) = conn
        .query_row(
            "SELECT usage_source, cut_max_output_tokens FROM runs WHERE run_id = 'run_1'",
            [],
            |r| Ok((r.get("usage_source")?, r.get("cut_max_output_tokens")?)),
        )
        .unwrap();
    assert_eq!((source.as_str(), cut), ("reported", None));
    insert_run(&conn, 2, "'estimated', 64").unwrap();
    assert!(insert_run(&conn, 3, "'guessed', NULL").is_err());
    assert!(insert_run(&conn, 4, "'reported', 0").is_err());
    drop(conn);
    let mut conn = Connection::open_in_memory().unwrap();
    migrate(&mut conn).unwrap();
}

#[test]
fn a_v6_database_upgrades_to_the_checkouts_ledger_and_labels_keeping_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("subzero.db");
    let conn = Connection::open(&path).unwrap();
    for step in &MIGRATIONS[..6] {
        conn.execute_batch(step).unwrap();
    }
    conn.pragma_update(None, "user_version", 6).unwrap();
    let child = subzero_core::ChildId::generate().to_string();
    conn.execute(
        "INSERT INTO children (child_id, scope_key, scope_uid, workspace_root, scope_dev, \
         scope_ino, template_id, snapshot_json, write_capable, model_url, model_name, \
         model_api, credential_ref, state, phase, ownership, created_at, updated_at) \
         VALUES (?1, 'k', 0, '/w', 0, 0, 'coder', '{}', 1, 'u', 'm', 'openai-completions', \
         'c', 'ready', 'idle', 'none', 't', 't')",
        [&child],
    )
    .unwrap();
    drop(conn);
    let store = crate::store::Store::open(&path, crate::store::StoreOptions::default());
    store.unwrap().close();
    let conn = Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get("user_version"))
        .unwrap();
    assert_eq!((version, SCHEMA_VERSION), (9, 9));
    let (kept, label): (String, Option<String>) = conn
        .query_row("SELECT child_id, label FROM children", [], |r| {
            Ok((r.get("child_id")?, r.get("label")?))
        })
        .unwrap();
    assert_eq!((kept.as_str(), label), (child.as_str(), None));
    let insert = |child: &str, state: &str| {
        conn.execute(
            "INSERT INTO checkouts (child_id, scope_key, path, base_commit, workspace_head, \
             dirty, carried, state, size_bytes, generation, created_at, updated_at) \
             VALUES (?1, 'k', '/c', 'b', 'h', 0, 0, ?2, 0, 1, 't', 't')",
            [child, state],
        )
    };
    assert!(insert(&child, "guessed").is_err(), "the state is checked");
    assert!(
        insert("ch_nobody", "prepared").is_err(),
        "the child must exist"
    );
    insert(&child, "prepared").unwrap();
}
