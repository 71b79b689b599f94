//! One worker process as the broker holds it: its pid, the descriptor that says when it
//! exited, its cgroup, and the broker's copies of its locks.
//!
//! The broker is the process outside the worker's tree that proves ownership. It lets go
//! of the locks only once the tree is gone:
//! - in a PID namespace, when the worker — its init — can be reaped: the kernel makes init
//!   reapable only after every other process of the namespace is gone (the worker's own
//!   lock copies close earlier, when it exits);
//! - in a cgroup, once the worker exited and the cgroup was killed, found empty and
//!   removed;
//! - on the subreaper fallback, when the worker exited (its tools hold the locks
//!   themselves there).
//!
//! A worker that cannot be proven gone keeps its locks held: a `busy` answer is better
//! than a second writer.
#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use subzero_sys::reap::{Reaped, reap, reap_blocking};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How long the broker waits for a dead worker's cgroup to empty before it keeps the locks.
const CGROUP_EMPTY: Duration = Duration::from_secs(1);
/// How often the exit of a worker without a pidfd is polled.
const POLL: Duration = Duration::from_millis(5);

/// The pids of this process's workers not yet reaped: every other child of a subreaper
/// broker is an orphan of a worker's tree ([`strays`]).
static WORKERS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Records a worker the moment it is cloned (before any other task can see it).
pub(super) fn register(pid: i32) {
    WORKERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(pid);
}

fn unregister(pid: i32) {
    WORKERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&pid);
}

/// The children of this process that are not its workers, when it is a child subreaper
/// (`subzero mcp` is; it starts no other process): orphans of a dead worker's tree that
/// left their cgroup (the cgroup fallback without Landlock), re-parented here. Empty for
/// a process that is not a subreaper, whose other children are not the broker's.
pub fn strays() -> BTreeSet<i32> {
    if !subzero_sys::reap::is_subreaper() {
        return BTreeSet::new();
    }
    let me = std::process::id() as i32;
    let workers = WORKERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    super::reap::process_table()
        .into_iter()
        .filter(|p| p.ppid == me && !workers.contains(&p.pid))
        .map(|p| p.pid)
        .collect()
}

/// A worker process and what the broker holds for it.
#[derive(Debug)]
pub(super) struct WorkerProcess {
    pid: i32,
    pidfd: Option<AsyncFd<OwnedFd>>,
    cgroup: Option<PathBuf>,
    locks: Vec<OwnedFd>,
    /// Its lock holder's pid, once the spawner started it (`super::holder`).
    holder: Option<tokio::sync::oneshot::Receiver<i32>>,
    exited: bool,
}

impl WorkerProcess {
    pub(super) fn new(
        pid: i32,
        pidfd: Option<OwnedFd>,
        cgroup: Option<PathBuf>,
        locks: Vec<OwnedFd>,
        holder: Option<tokio::sync::oneshot::Receiver<i32>>,
    ) -> WorkerProcess {
        // A pidfd the reactor cannot watch (or no reactor) is dropped; the exit is then
        // polled.
        let reactor = tokio::runtime::Handle::try_current().is_ok();
        let pidfd = pidfd.filter(|_| reactor).and_then(|fd| {
            // SAFETY: an `OwnedFd` is open and names the same descriptor for as long as
            // the `AsyncFd` owns it.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()
        });
        WorkerProcess {
            pid,
            pidfd,
            cgroup,
            locks,
            holder,
            exited: false,
        }
    }

    pub(super) fn pid(&self) -> i32 {
        self.pid
    }

    pub(super) fn cgroup(&self) -> Option<&std::path::Path> {
        self.cgroup.as_deref()
    }

    /// Waits up to `limit` for the worker to exit and reaps it; then ends its cgroup and,
    /// once its tree is proven gone, lets go of the locks. Returns whether it exited.
    pub(super) async fn wait_exit(&mut self, limit: Duration) -> bool {
        if !self.exited {
            if tokio::time::timeout(limit, self.exit()).await.is_err() {
                return false;
            }
            self.exited = true;
        }
        self.end_tree().await;
        true
    }

    /// Resolves once the worker has exited (and is reaped).
    async fn exit(&self) {
        if let Some(pidfd) = &self.pidfd {
            // A pidfd polls readable once its process has exited; an error means the
            // reactor lost it, and the poll below still sees the exit.
            if let Ok(mut ready) = pidfd.readable().await {
                ready.retain_ready();
            }
        }
        while !self.reap() {
            tokio::time::sleep(POLL).await;
        }
    }

    /// Reaps the worker if it exited; true when it did (or is not our child any more).
    fn reap(&self) -> bool {
        let gone = !matches!(reap(Some(self.pid)), Reaped::Running);
        if gone {
            unregister(self.pid);
        }
        gone
    }

    /// After the exit: the cgroup killed, emptied and removed, then the locks released.
    async fn end_tree(&mut self) {
        if self.locks.is_empty() && self.cgroup.is_none() {
            return;
        }
        if let Some(dir) = &self.cgroup {
            // A tool that moved itself out of the cgroup (possible only without Landlock)
            // came back to this subreaper broker when the worker died.
            let strays = strays();
            super::reap::terminate(&strays, &BTreeSet::new(), Duration::from_millis(100)).await;
            match super::cgroup::kill(dir, CGROUP_EMPTY).await {
                Ok(true) => self.cgroup = None,
                Ok(false) => {
                    tracing::warn!(cgroup = %dir.display(), "a dead worker's cgroup did not empty within 1 s; its locks stay held");
                    return;
                }
                Err(err) => {
                    tracing::warn!(cgroup = %dir.display(), %err, "cannot end a dead worker's cgroup; its locks stay held");
                    return;
                }
            }
        }
        self.locks.clear();
        self.reap_holder().await;
    }

    /// Collects the lock holder's exit: it ends right after the worker's tree did.
    async fn reap_holder(&mut self) {
        let Some(rx) = self.holder.take() else {
            return;
        };
        // The spawner starts it right after answering the spawn: a moment at most.
        let Ok(Ok(pid)) = tokio::time::timeout(Duration::from_secs(1), rx).await else {
            return;
        };
        super::reap::collect_exited(pid, Duration::from_secs(1)).await;
        if !super::reap::is_alive(pid) {
            unregister(pid);
        }
    }
}

impl Drop for WorkerProcess {
    /// A worker dropped before it was seen gone keeps its locks until it is: a task (or,
    /// without a runtime, a thread) waits for it and only then lets them go. Locks whose
    /// tree cannot be proven gone (a cgroup that never empties) stay held while this
    /// broker lives.
    fn drop(&mut self) {
        if self.exited && self.locks.is_empty() && self.cgroup.is_none() {
            return;
        }
        let rest = WorkerProcess {
            pid: self.pid,
            pidfd: self.pidfd.take(),
            cgroup: self.cgroup.take(),
            locks: std::mem::take(&mut self.locks),
            holder: self.holder.take(),
            exited: self.exited,
        };
        self.exited = true;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let mut watched = Watched(Some(rest));
                runtime.spawn(async move {
                    if let Some(rest) = watched.0.as_mut() {
                        if !rest.exited {
                            rest.exit().await;
                            rest.exited = true;
                        }
                        rest.end_tree().await;
                        settle(rest);
                    }
                    let _ = watched.0.take();
                });
            }
            Err(_) => on_a_thread(rest),
        }
    }
}

/// A dropped worker a task waits for. A runtime shutting down drops that task, at once if
/// it is spawned then: the worker goes to a thread instead (a second task would be dropped
/// the same way, and its worker's drop would spawn another, without end).
struct Watched(Option<WorkerProcess>);

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(rest) = self.0.take() {
            on_a_thread(rest);
        }
    }
}

/// No reactor: block a thread on the worker's exit; its cgroup, if any, is left for the
/// next broker's sweep.
fn on_a_thread(mut rest: WorkerProcess) {
    std::thread::spawn(move || {
        if !rest.exited {
            reap_blocking(rest.pid);
            unregister(rest.pid);
        }
        if rest.cgroup.is_none() {
            rest.locks.clear();
        }
        settle(&mut rest);
    });
}

/// What is left of a dropped worker once it was waited for: locks its tree may still
/// hold are never closed by this broker, and nothing is left for its drop to do.
fn settle(rest: &mut WorkerProcess) {
    std::mem::forget(std::mem::take(&mut rest.locks));
    rest.cgroup = None;
    rest.exited = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker dropped while its runtime shuts down (its task cancelled with the others)
    /// is waited for on a thread; it once spawned a task per drop, each dropped at once by
    /// the closing runtime, until the stack overflowed.
    #[test]
    fn a_worker_dropped_while_the_runtime_shuts_down_is_waited_for_on_a_thread() {
        // Reaped by the drop's thread (by pid), not through `Child`.
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .expect("spawn sleep");
        let pid = i32::try_from(child.id()).expect("pid");
        register(pid);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (parked, is_parked) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            let _worker = WorkerProcess::new(pid, None, None, Vec::new(), None);
            let _ = parked.send(());
            std::future::pending::<()>().await;
        });
        runtime.block_on(async {
            while is_parked.try_recv().is_err() {
                tokio::task::yield_now().await;
            }
        });
        drop(runtime);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while WORKERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&pid)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the worker was never reaped"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
