//! The checkpoint after each epoch: undo every fault, bring every broker back, then check
//! the invariants that need a quiet moment — every child settles, every interrupted child
//! resumes, every result reads back the same, no process of a settled child remains, the
//! database is intact, every checkout is kept and no change landed twice
//! ([`crate::checkouts`]).

use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest, Sha256};
use subzero_protocol::{ArtifactChunk, ChildSnapshot, ChildState, ListOutput, ResumeOutput};

use crate::exec::Ctx;
use crate::kernel;
use crate::verdict::Invariant;
use crate::world::Answer;

/// The broker the checks talk to (it is always brought back first).
const CHECKER: usize = 0;
/// How long processes of settled children may take to be gone.
const EXIT_BOUND: Duration = Duration::from_secs(10);

/// Brings everything back: every stopped worker continued, the model answering, every
/// broker up.
pub async fn recover(ctx: &Ctx) {
    ctx.world.continue_all();
    ctx.world.model.switch.set_dropping(false);
    for b in 0..ctx.world.broker_count() {
        if !ctx.world.broker_up(b)
            && let Err(e) = ctx.world.start_broker(b, Duration::from_secs(60)).await
        {
            ctx.violation(Invariant::TypedAnswers, e);
        }
    }
}

/// Every check of a checkpoint, in order.
pub async fn checkpoint(ctx: &Ctx, settle_bound: Duration) {
    recover(ctx).await;
    let children = all_children(ctx).await;
    settle(ctx, &children, settle_bound).await;
    resume_interrupted(ctx, &children).await;
    results_kept(ctx).await;
    no_leftovers(ctx, "after every child settled").await;
    database_intact(ctx);
    crate::checkouts::check(ctx);
}

/// Every child the brokers list, and every child the ledger knows.
async fn all_children(ctx: &Ctx) -> Vec<String> {
    let mut children = ctx.ledger().children();
    let mut after: Option<String> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut args = json!({"limit": 200});
        if let Some(after) = &after {
            args["after"] = json!(after);
        }
        match ctx.call(CHECKER, "subzero_list", args, 0).await {
            Answer::Ok(value) => {
                let Some(page) = ctx.parse::<ListOutput>("subzero_list", &value) else {
                    break;
                };
                for child in page.children.iter() {
                    let id = child.child_id.to_string();
                    if !children.contains(&id) {
                        children.push(id);
                    }
                }
                match page.next_after {
                    Some(next) => after = Some(next.to_string()),
                    None => break,
                }
            }
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(200)).await,
            other => {
                ctx.violation(
                    Invariant::Settles,
                    format!("subzero_list did not answer once the brokers were back: {other:?}"),
                );
                break;
            }
        }
    }
    children
}

/// `subzero_get` of `child` from the ledger's cursor, recorded in the ledger.
async fn get(ctx: &Ctx, child: &str, wait_ms: u64) -> Option<ChildSnapshot> {
    let cursor = ctx.ledger().cursor(child);
    let args = json!({"childId": child, "waitMs": wait_ms, "cursor": cursor, "eventLimit": 50});
    match ctx.call(CHECKER, "subzero_get", args, wait_ms).await {
        Answer::Ok(value) => {
            let snapshot = ctx.parse::<ChildSnapshot>("subzero_get", &value)?;
            ctx.observe(cursor, &snapshot);
            Some(snapshot)
        }
        _ => None,
    }
}

fn settled(snapshot: &ChildSnapshot) -> bool {
    snapshot.state != ChildState::Running && snapshot.active_run_id.is_none()
}

/// Waits until every child settled; records how long it took.
async fn settle(ctx: &Ctx, children: &[String], bound: Duration) {
    let started = Instant::now();
    let mut open: Vec<String> = children.to_vec();
    let mut last: std::collections::HashMap<String, ChildSnapshot> = Default::default();
    while !open.is_empty() && started.elapsed() < bound {
        let mut still = Vec::new();
        for child in open {
            match get(ctx, &child, 1000).await {
                Some(snapshot) if settled(&snapshot) => {
                    last.insert(child, snapshot);
                }
                Some(snapshot) => {
                    last.insert(child.clone(), snapshot);
                    still.push(child);
                }
                None => still.push(child),
            }
        }
        open = still;
    }
    ctx.stats()
        .settle_ms
        .push(started.elapsed().as_millis() as u64);
    for child in open {
        let state = last.get(&child).map_or("never answered".to_owned(), |s| {
            format!(
                "state {}, phase {}, active run {:?}",
                s.state,
                s.phase,
                s.active_run_id.as_ref().map(|r| r.to_string())
            )
        });
        ctx.violation(
            Invariant::Settles,
            format!(
                "child {child} did not settle within {bound:?} of every broker being back: {state}"
            ),
        );
    }
    // Read every child's events to the end, so no terminal event goes unseen.
    for child in children {
        for _ in 0..20 {
            match get(ctx, child, 0).await {
                Some(snapshot) if snapshot.events.len() == 50 => continue,
                _ => break,
            }
        }
    }
}

/// Every interrupted child is resumed (without a message: it comes back `ready`).
async fn resume_interrupted(ctx: &Ctx, children: &[String]) {
    for child in children {
        let Some(snapshot) = get(ctx, child, 0).await else {
            continue;
        };
        if snapshot.state != ChildState::Interrupted {
            continue;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let args = json!({"childId": child, "model": ctx.world.model_ref()});
            let answer = ctx.call(CHECKER, "subzero_resume", args, 0).await;
            let refusal = match answer {
                Answer::Ok(value) => {
                    if let Some(out) = ctx.parse::<ResumeOutput>("subzero_resume", &value) {
                        ctx.stats().resumed += 1;
                        if out.state.to_string() != "ready" {
                            ctx.violation(
                                Invariant::InterruptedResumes,
                                format!(
                                    "child {child} resumed without a message came back {}",
                                    out.state
                                ),
                            );
                        }
                    }
                    break;
                }
                Answer::Refused(code, message) => format!("`{code}`: {message}"),
                other => format!("{other:?}"),
            };
            if Instant::now() > deadline {
                ctx.violation(
                    Invariant::InterruptedResumes,
                    format!(
                        "interrupted child {child} could not be resumed within 30 s: {refusal}"
                    ),
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Every run reported terminal still has that status in the store, and every result
/// reads back in full, the same bytes as the first time (and, for a plan that ends in
/// text, exactly the text the model sent).
async fn results_kept(ctx: &Ctx) {
    let runs = ctx.ledger().terminal_runs();
    let db = ctx.world.state.join("subzero.db");
    let conn =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY);
    for (run, log) in &runs {
        let status = log.status.as_deref().unwrap_or_default();
        if let Ok(conn) = &conn {
            let stored: Result<String, _> =
                conn.query_row("SELECT status FROM runs WHERE run_id = ?1", [run], |r| {
                    r.get(0)
                });
            match stored {
                Ok(stored) if stored == status => {}
                Ok(stored) => ctx.violation(
                    Invariant::ResultsKept,
                    format!("run {run} was reported {status}; the store now says {stored}"),
                ),
                Err(e) => ctx.violation(
                    Invariant::ResultsKept,
                    format!("run {run} was reported {status}; the store has no such run ({e})"),
                ),
            }
        }
        let Some(artifact) = &log.artifact else {
            continue;
        };
        if status != "completed" && status != "budget_exhausted" {
            continue;
        }
        let Some(text) = read_whole(ctx, artifact).await else {
            ctx.violation(
                Invariant::ResultsKept,
                format!("artifact {artifact} of {status} run {run} does not read back"),
            );
            continue;
        };
        ctx.stats().artifacts_checked += 1;
        let digest = (
            text.len() as u64,
            hex::encode(Sha256::digest(text.as_bytes())),
        );
        let first = log.digest.is_none();
        if let Some(detail) = ctx.ledger().record_digest(run, digest) {
            ctx.violation(Invariant::ResultsKept, detail);
        }
        if first
            && status == "completed"
            && let Some(expected) = log.plan.as_ref().and_then(|p| p.answer())
            && text != expected
        {
            ctx.violation(
                Invariant::ResultsKept,
                format!(
                    "artifact {artifact} of run {run} holds {} bytes starting {:?}; the model answered {} bytes starting {:?}",
                    text.len(),
                    text.chars().take(40).collect::<String>(),
                    expected.len(),
                    expected.chars().take(40).collect::<String>()
                ),
            );
        }
    }
    let mut stats = ctx.stats();
    stats.runs_ended.clear();
    for (_, log) in &runs {
        *stats
            .runs_ended
            .entry(log.status.clone().unwrap_or_default())
            .or_default() += 1;
    }
}

/// The whole artifact, read with `subzero_output` chunk by chunk.
async fn read_whole(ctx: &Ctx, artifact: &str) -> Option<String> {
    let mut text = String::new();
    let mut offset = 0u64;
    for _ in 0..1000 {
        let args = json!({"artifactId": artifact, "offset": offset, "length": 65536});
        let value = match ctx.call(CHECKER, "subzero_output", args, 0).await {
            Answer::Ok(value) => value,
            _ => return None,
        };
        let chunk = ctx.parse::<ArtifactChunk>("subzero_output", &value)?;
        text.push_str(&chunk.text);
        if chunk.eof {
            return (text.len() as u64 == chunk.total_bytes).then_some(text);
        }
        offset = chunk.next_offset;
    }
    None
}

/// No worker, lock holder or tagged tool process of the soak remains once every child is
/// settled (or every broker closed).
pub async fn no_leftovers(ctx: &Ctx, when: &str) {
    let state = ctx.world.state.clone();
    let root = ctx.world.root.clone();
    let state_text = state.to_string_lossy().into_owned();
    let find = move || -> Vec<String> {
        let mut left: Vec<String> = kernel::workers(&state)
            .into_iter()
            .map(|w| {
                format!(
                    "worker pid {} of child {}",
                    w.pid,
                    w.child.as_deref().unwrap_or("?")
                )
            })
            .collect();
        left.extend(
            kernel::processes()
                .into_iter()
                .filter(|p| {
                    p.argv.first().is_some_and(|a| a.ends_with("subzero-hold"))
                        && p.argv.iter().any(|a| a.contains(&state_text))
                })
                .map(|p| format!("lock holder pid {}", p.pid)),
        );
        left.extend(
            kernel::tagged(&root)
                .into_iter()
                .map(|(pid, tag)| format!("tool process pid {pid} of run {tag}")),
        );
        left
    };
    let deadline = Instant::now() + EXIT_BOUND;
    let mut left = find();
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = find();
    }
    if !left.is_empty() {
        ctx.violation(
            Invariant::NoLeftoverProcess,
            format!(
                "{} processes remain {EXIT_BOUND:?} {when}: {}",
                left.len(),
                left.join("; ")
            ),
        );
    }
}

/// `PRAGMA integrity_check` on the shared database answers `ok`.
pub fn database_intact(ctx: &Ctx) {
    let db = ctx.world.state.join("subzero.db");
    if !db.exists() {
        return;
    }
    let verdict =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| {
                c.busy_timeout(Duration::from_secs(10))?;
                c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
            });
    match verdict {
        Ok(ok) if ok == "ok" => {}
        Ok(problem) => ctx.violation(
            Invariant::DatabaseIntact,
            format!("integrity_check: {problem}"),
        ),
        Err(e) => ctx.violation(
            Invariant::DatabaseIntact,
            format!("integrity_check failed to run: {e}"),
        ),
    }
}

/// The key is in no file under the soak's directory, raw, hex or base64.
pub fn key_never_on_disk(ctx: &Ctx) {
    let key = crate::world::KEY;
    let needles = [
        key.as_bytes().to_vec(),
        hex::encode(key).into_bytes(),
        base64(key.as_bytes()).into_bytes(),
    ];
    let mut found = Vec::new();
    walk(&ctx.world.root, &mut |path, bytes| {
        if needles
            .iter()
            .any(|n| bytes.windows(n.len()).any(|w| w == n.as_slice()))
        {
            found.push(path.display().to_string());
        }
    });
    if !found.is_empty() {
        ctx.violation(
            Invariant::KeyNeverOnDisk,
            format!("the model key is in {}", found.join(", ")),
        );
    }
}

fn walk(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path, &[u8])) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, f),
            Ok(t) if t.is_file() => {
                if let Ok(bytes) = std::fs::read(&path) {
                    f(&path, &bytes);
                }
            }
            _ => {}
        }
    }
}

/// Standard base64 with padding (the soak needs nothing more than encoding one key).
fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(super::base64(b"Man"), "TWFu");
        assert_eq!(super::base64(b"Ma"), "TWE=");
        assert_eq!(super::base64(b"M"), "TQ==");
    }
}
