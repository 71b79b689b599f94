//! The process tree of one tool call, so a call past `toolTimeoutMs` can be ended on its
//! own while the rest of the run's tool tree (its MCP servers, background jobs of earlier
//! calls) runs on. The whole tree is still torn down by [`super::Containment`] when the
//! run ends; this is the per-call part.
//!
//! A call's tree is what the worker can find of it in `/proc`, each time it looks:
//! - its process group (the leader and everything that stayed in its group);
//! - every descendant of those by parent links (a `setsid` child whose parent lives);
//! - every process re-parented to the worker (a subreaper) that started after the leader:
//!   a double-forked daemon of this call. Calls run one at a time, so nothing else of the
//!   run starts processes meanwhile.
//!
//! A process that left the group and the tree before the worker looked, and lives under
//! another process, is not found; the end of the run still kills it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use subzero_sys::procfs::pids;
use subzero_sys::signal::{Signal, send_group, send_u32};

use super::Containment;

/// How long [`CallTree::kill`] keeps looking for members that are still alive.
const KILL_LIMIT: Duration = Duration::from_secs(2);
/// Pause between two SIGKILL rounds.
const ROUND: Duration = Duration::from_millis(5);

/// One tool call's processes, found from its group leader. Dropped while armed (the call's
/// future was dropped: the run's deadline, a cancel), it kills them at once.
#[derive(Debug)]
pub struct CallTree {
    leader: u32,
    /// The leader's start time (clock ticks after boot), when `/proc` showed it.
    started: Option<u64>,
    armed: bool,
}

impl CallTree {
    /// The tree of the call whose process (a group leader) is `leader`.
    pub fn new(leader: u32) -> Self {
        Self {
            leader,
            started: stat(leader).map(|s| s.started),
            armed: true,
        }
    }

    /// The call ended on its own: what it left running is the run's, not killed here.
    pub fn disarm(&mut self) {
        self.armed = false;
    }

    /// SIGKILLs every member, again each round, until `/proc` shows none alive (at most
    /// [`KILL_LIMIT`]); returns how many distinct processes were signalled.
    pub async fn kill(&mut self, containment: &Containment) -> usize {
        self.armed = false;
        let mut signalled = HashSet::new();
        let end = Instant::now() + KILL_LIMIT;
        loop {
            signalled.extend(self.signal_round(containment));
            containment.reap();
            let left = self.members();
            if left.is_empty() {
                break;
            }
            if Instant::now() > end {
                tracing::error!(
                    remaining = left.len(),
                    "processes of a timed-out tool call survived SIGKILL"
                );
                break;
            }
            tokio::time::sleep(ROUND).await;
        }
        signalled.len()
    }

    /// One SIGKILL to the group and to every member found now.
    fn signal_round(&self, containment: &Containment) -> Vec<u32> {
        let members = self.members();
        containment.kill_group(self.leader);
        for pid in &members {
            send_u32(*pid, Signal::KILL);
        }
        members
    }

    /// Every live member of the tree, as `/proc` shows it now.
    fn members(&self) -> Vec<u32> {
        let me = std::process::id();
        let table = table();
        let mut roots: Vec<u32> = table
            .iter()
            .filter(|(pid, s)| {
                **pid != me
                    && (**pid == self.leader
                        || s.group == self.leader
                        || (s.parent == me
                            && self.started.is_some_and(|started| s.started >= started)))
            })
            .map(|(pid, _)| *pid)
            .collect();
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for (pid, s) in &table {
            children.entry(s.parent).or_default().push(*pid);
        }
        let mut found: HashSet<u32> = HashSet::new();
        while let Some(pid) = roots.pop() {
            if pid == me || !found.insert(pid) {
                continue;
            }
            if let Some(kids) = children.get(&pid) {
                roots.extend(kids);
            }
        }
        found
            .into_iter()
            .filter(|pid| table.get(pid).is_some_and(|s| !s.zombie))
            .collect()
    }
}

impl Drop for CallTree {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // No runtime to wait on here: a few immediate rounds; the run's teardown sweeps
        // whatever is left.
        for _ in 0..3 {
            let members = self.members();
            if members.is_empty() {
                break;
            }
            for pid in members {
                send_u32(pid, Signal::KILL);
            }
            if let Ok(raw) = i32::try_from(self.leader) {
                send_group(raw, Signal::KILL);
            }
        }
    }
}

/// What the tree walk needs of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    parent: u32,
    group: u32,
    started: u64,
    zombie: bool,
}

/// Every process `/proc` shows, by pid.
fn table() -> HashMap<u32, Stat> {
    pids()
        .filter_map(|(pid, _)| Some((pid, stat(pid)?)))
        .collect()
}

/// What the walk needs of `/proc/<pid>/stat`; `None` when it is gone or shows no start
/// time.
fn stat(pid: u32) -> Option<Stat> {
    let stat = subzero_sys::procfs::Stat::of(pid)?;
    Some(Stat {
        parent: u32::try_from(stat.ppid).ok()?,
        group: u32::try_from(stat.pgid).ok()?,
        started: stat.start?,
        zombie: stat.is_gone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_shows_its_own_start_time() {
        let me = stat(std::process::id()).expect("own stat");
        assert!(me.started > 0);
    }
}
