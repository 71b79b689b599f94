//! Lock and slot descriptors become inheritable only inside the spawned worker (between
//! clone and exec), never in the broker, which keeps its own copies close-on-exec: four
//! workers spawned at once each hold exactly their own child lock and their own worker
//! slot — none holds another child's, so a settled child never looks `busy` and a free
//! slot never looks taken.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

/// The lock files (relative to `<state>/locks`) that `pid` has open.
fn locks_held_by(pid: u32, locks: &std::path::Path) -> BTreeSet<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return BTreeSet::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            target
                .strip_prefix(locks)
                .ok()
                .map(|rel| rel.to_string_lossy().into_owned())
        })
        .collect()
}

/// Whether every descriptor `pid` holds on a lock file has close-on-exec set.
fn lock_fds_close_on_exec(pid: u32, locks: &std::path::Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(locks)))
        .all(|fd| {
            let info = std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .unwrap_or_default();
            info.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                .is_some_and(|flags| flags & 0o2_000_000 != 0)
        })
}

#[tokio::test(flavor = "multi_thread")]
async fn four_workers_spawned_at_once_each_hold_exactly_their_own_locks() {
    for round in 0..3 {
        let env = Env::new((0..4).map(|_| Reply::Hang).collect());
        let mut reaper = Reaper::new(env.dir.path());
        let s = env.broker(&format!("broker-{round}")).await;
        reaper.broker(s.pid());
        let spawns = (0..4).map(|n| {
            call(
                &s,
                "subzero_spawn",
                json!({"prompt": format!("task {n}"), "templateId": "researcher", "model": env.model()}),
            )
        });
        let replies = futures::future::join_all(spawns).await;
        let children: Vec<String> = replies
            .iter()
            .map(|r| {
                assert!(!r.is_error, "spawn failed: {}", r.text);
                Some(
                    parse::<p::SpawnOutput>("subzero_spawn", &r.structured)
                        .child_id
                        .to_string(),
                )
                .as_deref()
                .expect("childId")
                .to_owned()
            })
            .collect();
        assert!(
            env.server.wait_for_requests(4, Duration::from_secs(20)),
            "every worker reached the model"
        );
        let locks = env.state_dir().join("locks");
        let workers = workers_in(&env.workspace());
        assert_eq!(workers.len(), 4, "{workers:?}");
        let mut slots_seen = BTreeSet::new();
        let mut children_seen = BTreeSet::new();
        for worker in &workers {
            let held = locks_held_by(*worker, &locks);
            let child_locks: Vec<&String> =
                held.iter().filter(|p| p.starts_with("children/")).collect();
            let slots: Vec<&String> = held.iter().filter(|p| p.starts_with("slots/")).collect();
            assert_eq!(
                child_locks.len(),
                1,
                "worker {worker} holds other children's locks: {held:?}"
            );
            assert_eq!(
                slots.len(),
                1,
                "worker {worker} holds other workers' slots: {held:?}"
            );
            assert!(slots[0].contains(".worker."), "{held:?}");
            assert!(
                children_seen.insert(child_locks[0].clone()),
                "two workers hold {}",
                child_locks[0]
            );
            assert!(
                slots_seen.insert(slots[0].clone()),
                "two workers hold {}",
                slots[0]
            );
        }
        let expected: BTreeSet<String> = children
            .iter()
            .map(|c| format!("children/{c}.lock"))
            .collect();
        assert_eq!(children_seen, expected);
        // The broker holds its own copies of exactly those (it is the process outside each
        // tree that proves ownership until the tree is gone), every one close-on-exec, so
        // no worker it starts later gets another child's.
        let broker = s.pid().expect("pid");
        let broker_locks: BTreeSet<String> = locks_held_by(broker, &locks)
            .into_iter()
            .filter(|p| !p.starts_with("owners/"))
            .collect();
        let workers_locks: BTreeSet<String> = children_seen.union(&slots_seen).cloned().collect();
        assert_eq!(broker_locks, workers_locks, "the broker's lock copies");
        assert!(
            lock_fds_close_on_exec(broker, &locks),
            "a lock descriptor of the broker is inheritable"
        );
        for child in &children {
            let snap = get(&s, json!({"childId": child})).await;
            let run = snap.active_run_id.clone().expect("active run").to_string();
            stop(
                &s,
                json!({"childId": child, "expectedRunId": run, "waitMs": 5000}),
            )
            .await;
        }
        s.close().await.expect("close");
    }
}
