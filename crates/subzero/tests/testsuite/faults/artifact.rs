//! An artifact write that fails: the run fails with the typed `artifact_unavailable`,
//! the child is `ready` (not stuck running), no artifact is registered or left behind,
//! and once the fault is gone the next run stores its result.
//!
//! The tests run as root, so permissions cannot make the write fail; instead a regular
//! file is put where the child's artifact directory must be created.

use std::path::Path;
use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::{Reply, Step};

fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path.to_string_lossy().into_owned());
        }
    }
    found
}

fn registered_artifacts(db: &Path, child: &str) -> i64 {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the database");
    conn.query_row(
        "SELECT count(*) FROM artifacts WHERE child_id = ?1",
        [child],
        |r| r.get(0),
    )
    .expect("count artifacts")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_that_cannot_be_stored_fails_the_run_with_artifact_unavailable() {
    let env = Env::new(vec![
        Reply::Sse(vec![
            Step::delay_ms(800),
            Step::text("A result with nowhere to go."),
            Step::finish("stop"),
            Step::done(),
        ]),
        Reply::text("Stored fine."),
    ]);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());

    let (child, run) = spawn(&s, &env, "researcher", "Produce a result").await;
    let artifacts = env.state_dir().join("artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    let blocker = artifacts.join(&child);
    std::fs::write(&blocker, "not a directory").expect("blocker");

    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(snap.active_run_id, None, "{snap:#?}");
    assert_eq!(last(&snap).run_id.as_str(), run.as_str(), "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Failed),
        "{snap:#?}"
    );
    assert_eq!(
        last(&snap).error.as_ref().map(|e| e.code),
        Some(p::ErrorCode::ArtifactUnavailable),
        "{snap:#?}"
    );
    assert!(last(&snap).artifact_id.is_none(), "{snap:#?}");
    let kinds = kinds(&snap);
    assert!(
        kinds.contains(&"failed") && !kinds.contains(&"completed"),
        "{kinds:?}"
    );
    let db = env.state_dir().join("subzero.db");
    assert_eq!(
        registered_artifacts(&db, &child),
        0,
        "an artifact was registered for a failed write"
    );
    assert_eq!(
        files_under(&artifacts),
        vec![blocker.to_string_lossy().into_owned()],
        "a partial artifact was left behind"
    );
    assert_eq!(env.server.requests().len(), 1, "the run was retried");

    // The fault is gone: the next run stores its result whole.
    std::fs::remove_file(&blocker).expect("remove blocker");
    let sent = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "Again"}),
    )
    .await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(last(&snap).run_id, sent.run_id, "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let artifact = last(&snap)
        .artifact_id
        .as_deref()
        .map(String::as_str)
        .expect("artifact");
    let out = read_output(&s, json!({"artifactId": artifact})).await;
    assert_eq!(out.text.as_str(), "Stored fine.", "{out:#?}");
    assert_eq!(registered_artifacts(&db, &child), 1);
    s.close().await.expect("close");
}

/// A small tmpfs mounted over the artifacts directory; unmounted on drop.
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    /// `None` when this process may not mount (not root, or no CAP_SYS_ADMIN).
    fn mount(at: &Path, size: &str) -> Option<SmallFs> {
        std::fs::create_dir_all(at).expect("mount point");
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then(|| SmallFs(at.to_path_buf()))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_larger_than_the_free_space_fails_the_run_and_leaves_no_partial_file() {
    let big = "x".repeat(256 * 1024);
    let env = Env::new(vec![Reply::text(&big), Reply::text("Small enough.")]);
    let artifacts = env.state_dir().join("artifacts");
    let Some(_fs) = SmallFs::mount(&artifacts, "64k") else {
        eprintln!("skipped: cannot mount a small tmpfs here (needs root / CAP_SYS_ADMIN)");
        return;
    };
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());

    let (child, run) = spawn(&s, &env, "researcher", "Produce a large result").await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(snap.state, p::ChildState::Ready, "{snap:#?}");
    assert_eq!(last(&snap).run_id.as_str(), run.as_str(), "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Failed),
        "{snap:#?}"
    );
    assert_eq!(
        last(&snap).error.as_ref().map(|e| e.code),
        Some(p::ErrorCode::ArtifactUnavailable),
        "{snap:#?}"
    );
    assert!(last(&snap).artifact_id.is_none(), "{snap:#?}");
    let db = env.state_dir().join("subzero.db");
    assert_eq!(registered_artifacts(&db, &child), 0);
    assert_eq!(
        files_under(&artifacts),
        Vec::<String>::new(),
        "a partial artifact was left behind"
    );

    let sent = send(
        &s,
        json!({"childId": child, "mode": "followup", "message": "Shorter please"}),
    )
    .await;
    let snap = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(last(&snap).run_id, sent.run_id, "{snap:#?}");
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    assert_eq!(registered_artifacts(&db, &child), 1);
    s.close().await.expect("close");
}
