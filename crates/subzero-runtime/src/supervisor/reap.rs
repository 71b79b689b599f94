//! Ending worker trees: the only place in the broker that sends a signal.
//!
//! The worker normally tears its own tool tree down and confirms. This module is the
//! broker's side of the guarantee for when it does not: a worker that ignores a cancel
//! or was SIGKILLed. The broker is a child subreaper, so the orphans of a dead worker
//! (tool processes in their own groups, `setsid` escapees, double-forked daemons) are
//! re-parented to the broker, where this module finds them in `/proc` and ends them.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use subzero_sys::procfs::{Stat, pids};
use subzero_sys::reap::{Reaped, reap};
use subzero_sys::signal::{Signal, send, send_group};

/// One row of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcEntry {
    /// Process id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// Process-group id.
    pub pgid: i32,
}

/// Make this process a child subreaper, so orphaned descendants come back to it.
pub fn become_subreaper() -> std::io::Result<()> {
    subzero_sys::reap::become_subreaper()
}

/// A snapshot of every process visible in `/proc`.
pub fn process_table() -> Vec<ProcEntry> {
    pids()
        .filter_map(|(pid, _)| {
            let stat = Stat::of(pid)?;
            Some(ProcEntry {
                pid: i32::try_from(pid).ok()?,
                ppid: stat.ppid,
                pgid: stat.pgid,
            })
        })
        .collect()
}

/// Every descendant of `root` (not `root` itself) in `table`.
pub fn descendants(table: &[ProcEntry], root: i32) -> BTreeSet<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in table {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut found = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            if found.insert(child) {
                stack.push(child);
            }
        }
    }
    found
}

/// Whether a process exists (zombies count as gone: they hold no descriptors).
pub fn is_alive(pid: i32) -> bool {
    u32::try_from(pid)
        .ok()
        .and_then(Stat::of)
        .is_some_and(|stat| !stat.is_gone())
}

/// End a set of processes: SIGTERM to each one's process group and to itself, a grace
/// period, then SIGKILL to whatever is left. Reaps those that are this process's own
/// children (orphans re-parented to the subreaper), except pids in `not_mine`, which a
/// `tokio::process::Child` owns and waits for itself. Returns how many were signalled.
pub async fn terminate(pids: &BTreeSet<i32>, not_mine: &BTreeSet<i32>, grace: Duration) -> usize {
    if pids.is_empty() {
        return 0;
    }
    let me = std::process::id() as i32;
    let groups: BTreeSet<i32> = process_table()
        .iter()
        .filter(|p| pids.contains(&p.pid) && p.pgid != me && p.pgid > 1)
        .map(|p| p.pgid)
        .collect();
    signal_all(pids, &groups, Signal::TERM);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        reap_orphans(pids, not_mine);
        if !pids.iter().any(|&p| is_alive(p)) {
            return pids.len();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    signal_all(pids, &groups, Signal::KILL);
    for _ in 0..200 {
        reap_orphans(pids, not_mine);
        if !pids.iter().any(|&p| is_alive(p)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pids.len()
}

fn signal_all(pids: &BTreeSet<i32>, groups: &BTreeSet<i32>, signal: Signal) {
    for &group in groups {
        // A group already gone is what we want.
        send_group(group, signal);
    }
    for &pid in pids {
        send(pid, signal);
    }
}

/// Collect exit statuses of listed processes that are our own children, so they do
/// not linger as zombies under the broker.
fn reap_orphans(pids: &BTreeSet<i32>, not_mine: &BTreeSet<i32>) {
    for &pid in pids.difference(not_mine) {
        let _ = reap(Some(pid));
    }
}

/// Collects the exit status of `pid` if it is this process's child (an orphan re-parented
/// to the subreaper broker), waiting up to `limit` for it to become reapable; nothing for
/// a process that is not our child.
pub async fn collect_exited(pid: i32, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match reap(Some(pid)) {
            Reaped::Running | Reaped::Interrupted => {}
            Reaped::Exited { .. } | Reaped::NoChild | Reaped::Failed => return,
        }
        if tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_follow_the_parent_chain() {
        let table = [
            ProcEntry {
                pid: 2,
                ppid: 1,
                pgid: 2,
            },
            ProcEntry {
                pid: 3,
                ppid: 2,
                pgid: 3,
            },
            ProcEntry {
                pid: 4,
                ppid: 3,
                pgid: 3,
            },
            ProcEntry {
                pid: 5,
                ppid: 1,
                pgid: 5,
            },
        ];
        assert_eq!(descendants(&table, 2), BTreeSet::from([3, 4]));
        assert!(descendants(&table, 5).is_empty());
    }

    #[test]
    fn this_process_is_alive_and_a_bogus_pid_is_not() {
        assert!(is_alive(std::process::id() as i32));
        assert!(!is_alive(i32::MAX));
    }
}
