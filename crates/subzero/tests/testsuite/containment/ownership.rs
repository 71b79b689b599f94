//! Ownership is held where no tool can touch it: the broker (outside the PID namespace) and
//! the worker (its init) hold the child lock and the workspace slots close-on-exec, so no
//! tool process inherits a Subzero descriptor. A prompt-injected coder whose `bash` runs
//! `flock(LOCK_UN)` and `close` on every descriptor it has releases nothing: a second
//! write-capable run is still refused while the first runs, and the test itself (a process
//! outside the tree) still cannot take the child's lock or the writer slot.
//!
//! Tried as root (no user namespace), as `nobody` (inside a user namespace) and on the
//! cgroup path where this machine has a writable cgroup v2.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use crate::support::containment::{Case, Path_, own_cgroup};
use crate::support::faults::{Reaper, wait_for};
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

/// Lists every descriptor above stderr (with what it points at), releases any lock on it,
/// closes it, writes the list to `fds.json` and waits for the test's `release` file.
const RELEASE_EVERYTHING: &str = r#"python3 - <<'EOF'
import fcntl, json, os, time
fds = []
for name in os.listdir('/proc/self/fd'):
    fd = int(name)
    if fd <= 2:
        continue
    try:
        fds.append([fd, os.readlink('/proc/self/fd/%d' % fd)])
    except OSError:
        pass
for fd, _ in fds:
    for step in (lambda: fcntl.flock(fd, fcntl.LOCK_UN), lambda: os.close(fd)):
        try:
            step()
        except OSError:
            pass
with open('fds.json.tmp', 'w') as out:
    json.dump(fds, out)
os.rename('fds.json.tmp', 'fds.json')
for _ in range(600):
    if os.path.exists('release'):
        break
    time.sleep(0.1)
EOF"#;

/// True when this process can take `path`'s lock exclusively right now (it then lets go).
fn lock_is_free(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return true;
    };
    let taken = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock);
    taken.is_ok()
}

/// The ownership receipt of a child's snapshot, if it has one.
fn child_ownership(snap: &p::ChildSnapshot) -> Option<&p::OwnershipReceipt> {
    snap.containment.as_ref()?.ownership.as_ref()
}

/// The workspace's writer slot files (there is one by default).
fn writer_slots(state: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(state.join("locks/slots"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().contains(".writer."))
                .collect()
        })
        .unwrap_or_default()
}

async fn a_tool_that_releases_every_descriptor_changes_no_ownership(path: Path_) {
    let case = Case::new(path);
    let env = &case.env;
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": RELEASE_EVERYTHING}).to_string(),
    ));
    env.server.push(Reply::text("first writer done"));
    env.server.push(Reply::text("second writer done"));
    let mut reaper = Reaper::new(env.dir.path());
    let s = case.broker("broker").await;
    reaper.broker(s.pid());

    let (child, _) = spawn(&s, env, "coder", "Release every descriptor").await;
    let report = env.workspace().join("fds.json");
    let fds: Vec<(i32, String)> = wait_for(Duration::from_secs(30), || {
        let text = std::fs::read_to_string(&report).ok()?;
        serde_json::from_str(&text).ok()
    })
    .expect("the tool listed its descriptors");
    // The tool released and closed everything it had; ownership is unchanged.
    let state = env.state_dir();
    let child_lock = state.join(format!("locks/children/{child}.lock"));
    assert!(
        !lock_is_free(&child_lock),
        "the child's lock was free while its tool ran"
    );
    let slots = writer_slots(&state);
    assert!(!slots.is_empty(), "no writer slot file under {state:?}");
    assert!(
        slots.iter().all(|slot| !lock_is_free(slot)),
        "a writer slot was free while a write-capable run lived"
    );
    let second = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "second writer", "templateId": "coder", "model": env.model()}),
    )
    .await;
    assert!(
        second.is_error,
        "a second writer was admitted: {}",
        second.text
    );
    assert_eq!(second.code(), Some("workspace_busy"), "{}", second.text);
    // Nor by another broker of the same user sharing the state (the cap is cross-broker).
    let other = case.broker("other-broker").await;
    reaper.broker(other.pid());
    let third = call(
        &other,
        "subzero_spawn",
        json!({"prompt": "third writer", "templateId": "coder", "model": env.model()}),
    )
    .await;
    assert_eq!(third.code(), Some("workspace_busy"), "{}", third.text);
    other.close().await.expect("close");
    // And it had nothing of Subzero's to release.
    assert!(
        fds.is_empty(),
        "a tool process inherited descriptors beyond its stdio: {fds:?}"
    );

    // The receipts say so.
    let snap = receipts(&s, &child).await;
    assert_eq!(
        child_ownership(&snap).map(|o| o.tools_hold_locks),
        Some(false),
        "{:#?}",
        snap.containment
    );
    let info = broker_info(&s).await;
    let broker_ownership = info
        .enforcement
        .containment
        .as_ref()
        .and_then(|c| c.ownership.as_ref());
    assert_eq!(
        broker_ownership.map(|o| o.tools_hold_locks),
        Some(false),
        "{:#?}",
        info.enforcement
    );

    std::fs::write(env.workspace().join("release"), b"").expect("release");
    let snap = settled(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let (second_child, _) = spawn(&s, env, "coder", "second writer").await;
    let done = settled(&s, &second_child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_pid_namespace_a_tool_that_unlocks_and_closes_its_descriptors_changes_no_ownership() {
    a_tool_that_releases_every_descriptor_changes_no_ownership(Path_::Namespace).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn as_an_unprivileged_user_a_tool_that_unlocks_and_closes_its_descriptors_changes_no_ownership()
 {
    a_tool_that_releases_every_descriptor_changes_no_ownership(Path_::NamespaceUnprivileged).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_cgroup_a_tool_that_unlocks_and_closes_its_descriptors_changes_no_ownership() {
    match own_cgroup() {
        Ok(_) => a_tool_that_releases_every_descriptor_changes_no_ownership(Path_::Cgroup).await,
        Err(why) => eprintln!("skipping the cgroup case: no writable cgroup v2 here: {why}"),
    }
}

/// On the subreaper fallback (no namespace, no cgroup) the tool processes are the only
/// thing that can keep the locks held while they live, so they still inherit them; the
/// receipts say so instead of claiming otherwise.
#[tokio::test(flavor = "multi_thread")]
async fn on_the_subreaper_fallback_the_receipts_say_tools_hold_the_locks() {
    let case = Case::new(Path_::Fallback);
    let env = &case.env;
    env.server.push(Reply::tool_call(
        "call_1",
        "bash",
        &json!({"command": "ls -l /proc/self/fd/ > fds.txt; until [ -e release ]; do sleep 0.1; done"}).to_string(),
    ));
    env.server.push(Reply::text("done"));
    let mut reaper = Reaper::new(env.dir.path());
    let s = case.broker("broker").await;
    reaper.broker(s.pid());
    let (child, _) = spawn(&s, env, "coder", "List descriptors").await;
    let listing = wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(env.workspace().join("fds.txt"))
            .ok()
            .filter(|t| !t.is_empty())
    })
    .expect("the tool listed its descriptors");
    assert!(listing.contains("locks/children"), "{listing}");
    let snap = receipts(&s, &child).await;
    let ownership = child_ownership(&snap);
    assert_eq!(
        ownership.map(|o| o.tools_hold_locks),
        Some(true),
        "{:#?}",
        snap.containment
    );
    assert!(
        ownership.is_some_and(|o| o.summary.contains("subreaper")),
        "{ownership:#?}"
    );
    std::fs::write(env.workspace().join("release"), b"").expect("release");
    let snap = settled(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    s.close().await.expect("close");
}

/// The test's own lock probe works: a lock this process holds is not free to another
/// descriptor, and is once released (so the assertions above can fail).
#[test]
fn the_lock_probe_sees_a_held_lock() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("probe.lock");
    let file = std::fs::File::create(&path).expect("create");
    let fd = file.as_raw_fd();
    let held =
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).expect("lock");
    assert!(fd >= 0);
    assert!(!lock_is_free(&path));
    drop(held);
    assert!(lock_is_free(&path));
}
