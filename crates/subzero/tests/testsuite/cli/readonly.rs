//! The human tools never write: `subzero ls | show | logs | output` read a missing
//! database as "no children yet" (creating nothing), never wait for a writer or migrate,
//! and `subzero doctor` finds nothing to fail in a fresh or missing state directory.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::cli::*;
use crate::support::mcp::Env;

const CHILD: &str = "ch_01JBBBBBBBBBBBBBBBBBBBBBBB";
const ARTIFACT: &str = "art_01JBBBBBBBBBBBBBBBBBBBBBBB";

fn inspect(state: &Path, args: &[&str]) -> std::process::Output {
    subzero()
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .output()
        .expect("subzero runs")
}

/// Every path under `dir`, sorted.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

fn fresh_state(dir: &Path) -> PathBuf {
    let state = dir.join("state");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&state)
        .expect("state dir");
    state
}

#[test]
fn ls_with_no_database_lists_no_children_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing");
    let empty = fresh_state(dir.path());
    for state in [&missing, &empty] {
        let out = inspect(state, &["ls", "--json"]);
        assert!(
            out.status.success(),
            "ls failed on {}: {}",
            state.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let listed = json_of(&out);
        assert_eq!(listed, serde_json::json!({"children": []}), "{listed:#?}");
        let out = inspect(state, &["ls"]);
        assert!(out.status.success());
    }
    assert!(!missing.exists(), "ls created {}", missing.display());
    assert!(tree(&empty).is_empty(), "ls created {:?}", tree(&empty));
}

#[test]
fn show_logs_and_output_with_no_database_are_not_found_and_create_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing");
    let empty = fresh_state(dir.path());
    for state in [&missing, &empty] {
        for args in [
            vec!["show", CHILD],
            vec!["logs", CHILD],
            vec!["output", ARTIFACT],
        ] {
            let out = inspect(state, &args);
            assert_eq!(out.status.code(), Some(1), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.starts_with("error[not_found]: "), "{args:?}: {err}");
            assert!(err.contains("no children yet"), "{args:?}: {err}");
        }
    }
    assert!(!missing.exists(), "created {}", missing.display());
    assert!(tree(&empty).is_empty(), "created {:?}", tree(&empty));
}

/// Hold `BEGIN IMMEDIATE` on `db` (as another broker's long write would) until told.
fn hold_write_lock(db: PathBuf) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (taken, rx) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&db).expect("open the database");
        conn.execute_batch("BEGIN IMMEDIATE").expect("write lock");
        taken.send(()).expect("signal");
        let _ = released.recv_timeout(Duration::from_secs(60));
        conn.execute_batch("ROLLBACK").expect("release");
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the write lock was taken");
    (release, holder)
}

#[tokio::test(flavor = "multi_thread")]
async fn inspection_reads_while_another_process_holds_the_write_lock() {
    let env = Env::new(vec![]);
    env.broker("broker").await.close().await.expect("close");
    let state = env.state_dir();
    let before = tree(&state);
    let (release, holder) = hold_write_lock(state.join("subzero.db"));

    for args in [
        vec!["ls", "--json"],
        vec!["show", CHILD],
        vec!["logs", CHILD],
        vec!["output", ARTIFACT],
    ] {
        let started = Instant::now();
        let out = inspect(&state, &args);
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            took < Duration::from_secs(2),
            "{args:?} waited {took:?} for the writer: {err}"
        );
        if args[0] == "ls" {
            assert!(out.status.success(), "{args:?}: {err}");
            assert!(parsed_of::<Listing>(&out).children.is_empty());
        } else {
            assert!(err.starts_with("error[not_found]: "), "{args:?}: {err}");
        }
    }
    release.send(()).expect("release");
    holder.join().expect("holder");
    // Reading created no file (no lock dir, no artifact dir, no scratch).
    let after: Vec<PathBuf> = tree(&state)
        .into_iter()
        .filter(|p| {
            !p.to_string_lossy().ends_with("-shm") && !p.to_string_lossy().ends_with("-wal")
        })
        .collect();
    let before: Vec<PathBuf> = before
        .into_iter()
        .filter(|p| {
            !p.to_string_lossy().ends_with("-shm") && !p.to_string_lossy().ends_with("-wal")
        })
        .collect();
    assert_eq!(after, before);
}

#[test]
fn a_database_at_an_older_schema_version_is_refused_naming_subzero_mcp_and_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = fresh_state(dir.path());
    let db = state.join("subzero.db");
    let conn = rusqlite::Connection::open(&db).expect("db");
    conn.execute_batch("CREATE TABLE unrelated (x); PRAGMA user_version = 0;")
        .expect("old database");
    drop(conn);
    let bytes = std::fs::read(&db).expect("read");
    let out = inspect(&state, &["ls"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("older") && err.contains("`subzero mcp`"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&db).expect("read"),
        bytes,
        "ls changed the database"
    );
}

#[test]
fn doctor_on_a_fresh_or_missing_state_directory_reports_no_failure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    let missing = dir.path().join("missing");
    let fresh = fresh_state(dir.path());
    for state in [&missing, &fresh] {
        let (code, report) = doctor(state, &config, &[], &[]);
        assert!(
            failures(&report).is_empty(),
            "{}: {report:#?}",
            state.display()
        );
        assert_eq!(code, 0, "{report:#?}");
    }
    let (_, report) = doctor(&fresh, &config, &[], &[]);
    let lock = checks(&report, "lock dir");
    assert_eq!(lock.len(), 1, "{report:#?}");
    assert!(
        Some(lock[0].detail.as_str()).is_some_and(|d| d.contains("created by `subzero mcp`")),
        "{report:#?}"
    );
    assert!(!missing.exists(), "doctor created {}", missing.display());
    assert!(tree(&fresh).is_empty(), "doctor created {:?}", tree(&fresh));
}

#[test]
fn doctor_still_fails_a_lock_directory_it_cannot_write() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = fresh_state(dir.path());
    // A file where the lock directory belongs: nothing can create it.
    std::fs::write(state.join("locks"), b"").expect("file");
    let (code, report) = doctor(&state, &dir.path().join("config.toml"), &[], &[]);
    let lock = checks(&report, "lock dir");
    assert_eq!(lock.len(), 1, "{report:#?}");
    assert_eq!(lock[0].status, Status::Fail, "{report:#?}");
    assert_eq!(code, 1);
}
