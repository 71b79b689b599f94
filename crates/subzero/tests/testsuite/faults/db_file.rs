//! The database file itself, with the real `subzero mcp`: a clean exit leaves a
//! `subzero.db` that is complete by itself (the WAL checkpointed), and a database
//! deleted or replaced under a running broker is refused with `storage_unavailable`,
//! never written into the orphaned file.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::faults::{RawBroker, Reaper};
use crate::support::mcp::Env;
use crate::support::mcp::{last_status, p};
use serde_json::json;
use subzero_testkit::Reply;

fn database(env: &Env) -> PathBuf {
    env.state_dir().join("subzero.db")
}

fn wal(db: &Path) -> PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// Length and modification time: what any write into the file would change.
fn footprint(path: &Path) -> Option<(u64, i64, i64)> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.mtime(), m.mtime_nsec()))
}

/// Spawn a researcher child and wait until its run settled; returns the child id.
fn spawn_and_settle(broker: &mut RawBroker, env: &Env, prompt: &str) -> String {
    let out = broker.typed::<p::SpawnOutput>(
        "subzero_spawn",
        json!({"prompt": prompt, "templateId": "researcher", "model": env.model()}),
    );
    let child = out.child_id.as_str().to_owned();
    for _ in 0..6 {
        let snap = broker
            .typed::<p::ChildSnapshot>("subzero_get", json!({"childId": child, "waitMs": 10000}));
        if snap.state != p::ChildState::Running {
            assert_eq!(
                last_status(&snap),
                Some(p::TerminalRunStatus::Completed),
                "{snap:#?}"
            );
            return child;
        }
    }
    panic!("child {child} did not settle");
}

fn children_in(db: &Path) -> Vec<String> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the copy");
    let mut stmt = conn
        .prepare("SELECT child_id FROM children ORDER BY child_id")
        .expect("children table");
    stmt.query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

#[test]
fn a_clean_exit_leaves_a_database_file_that_is_complete_by_itself() {
    let env = Env::new(vec![Reply::text("Kept in the database file.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut broker = RawBroker::start(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    let child = spawn_and_settle(&mut broker, &env, "Remember this");

    broker.close_stdin();
    let status = broker
        .wait_exit(Duration::from_secs(10))
        .expect("the broker exits on stdin EOF");
    assert!(status.success(), "broker exited with {status}");

    let db = database(&env);
    let wal_len = std::fs::metadata(wal(&db)).map_or(0, |m| m.len());
    assert_eq!(
        wal_len, 0,
        "a clean exit left a {wal_len}-byte WAL beside the database"
    );
    // Copying subzero.db alone (the naive backup) copies the child and its result.
    let copy = env.dir.path().join("backup.db");
    std::fs::copy(&db, &copy).expect("copy the database file alone");
    assert_eq!(children_in(&copy), vec![child.clone()]);
    let conn = rusqlite::Connection::open(&copy).expect("open the copy");
    let status: String = conn
        .query_row(
            "SELECT status FROM runs WHERE child_id = ?1",
            [&child],
            |r| r.get(0),
        )
        .expect("the run is in the copy");
    assert_eq!(status, "completed");
}

#[test]
fn a_database_deleted_under_a_running_broker_is_refused_and_never_recreated() {
    let env = Env::new(vec![Reply::text("First."), Reply::text("Never.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut broker = RawBroker::start(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    spawn_and_settle(&mut broker, &env, "First");

    let db = database(&env);
    std::fs::remove_file(&db).expect("delete the database under the broker");
    let body = broker.refused_with(
        "subzero_spawn",
        json!({"prompt": "Second", "templateId": "researcher", "model": env.model()}),
    );
    assert_eq!(body.code, p::ErrorCode::StorageUnavailable, "{body:#?}");
    let message = body.message.as_str();
    assert!(
        message.contains(&db.display().to_string()) && message.contains("restart"),
        "{message}"
    );
    assert!(!db.exists(), "the broker recreated {}", db.display());
    assert_eq!(
        env.server.requests().len(),
        1,
        "the refused spawn reached the model"
    );

    broker.close_stdin();
    broker
        .wait_exit(Duration::from_secs(10))
        .expect("the broker exits on stdin EOF");
    assert!(
        !db.exists(),
        "the exiting broker recreated {}",
        db.display()
    );
}

#[test]
fn a_database_replaced_under_a_running_broker_is_refused_and_the_orphan_is_not_written() {
    let env = Env::new(vec![Reply::text("First."), Reply::text("Never.")]);
    let mut reaper = Reaper::new(env.dir.path());
    let mut broker = RawBroker::start(&env.command("broker"));
    reaper.broker(Some(broker.pid()));
    let first = spawn_and_settle(&mut broker, &env, "First");

    // A name for the file the broker has open, then another database at its path (a
    // restore done while the host was still running).
    let db = database(&env);
    let orphan = env.dir.path().join("orphan.db");
    std::fs::hard_link(&db, &orphan).expect("link the open database");
    let replacement = env.state_dir().join("restored.db");
    std::fs::write(&replacement, b"").expect("replacement");
    std::fs::rename(&replacement, &db).expect("replace the database under the broker");
    let before = (footprint(&orphan), footprint(&wal(&db)));

    let body = broker.refused_with(
        "subzero_spawn",
        json!({"prompt": "Second", "templateId": "researcher", "model": env.model()}),
    );
    assert_eq!(body.code, p::ErrorCode::StorageUnavailable, "{body:#?}");
    let message = body.message.as_str();
    assert!(
        message.contains(&db.display().to_string())
            && message.contains("replaced")
            && message.contains("restart"),
        "{message}"
    );
    // A write to an existing child is refused the same way.
    let body = broker.refused_with(
        "subzero_send",
        json!({"childId": first, "message": "More", "mode": "followup"}),
    );
    assert_eq!(body.code, p::ErrorCode::StorageUnavailable, "{body:#?}");

    broker.close_stdin();
    broker
        .wait_exit(Duration::from_secs(10))
        .expect("the broker exits on stdin EOF");
    assert_eq!(
        (footprint(&orphan), footprint(&wal(&db))),
        before,
        "the orphaned database or its log was written"
    );
    assert_eq!(
        footprint(&db).map(|f| f.0),
        Some(0),
        "the replacement was written by the old broker"
    );
}
